// The MLIR view: what it prints for the common cases, and that mlir-opt-15
// (a declared dependency, tools/install-deps.sh) parses and verifies it.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include "frontend/models/registry.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/del.h"
#include "passes/mlir.h"
#include "passes/pipeline.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;
namespace fs = std::filesystem;

namespace {

std::string find_mlir_opt() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (dir.empty()) continue;
      fs::path p = fs::path(dir) / "mlir-opt-15";
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  if (::access("/usr/lib/llvm-15/bin/mlir-opt", X_OK) == 0) return "/usr/lib/llvm-15/bin/mlir-opt";
  return "";
}

// Runs mlir-opt on `mlir`; its exit status, with its output in `log`.
int mlir_opt(const std::string& mlir, const std::string& tag, std::string& log) {
  const std::string bin = find_mlir_opt();
  if (bin.empty())
    FAIL("mlir-opt-15 not found on PATH nor at /usr/lib/llvm-15/bin/mlir-opt: run "
         "tools/install-deps.sh (mlir-15-tools is a declared dependency)");
  const fs::path in = fsdpc::testing::write_scratch(tag + ".mlir", mlir);
  const fsdpc::testing::Run r =
      fsdpc::testing::run_shell("'" + bin + "' --allow-unregistered-dialect '" + in.string() + "'", {.merge = true});
  log = r.out;
  if (r.code == 0)
    fs::remove(in);
  else
    log += "\n(input kept in " + in.string() + ")";
  return r.code;
}

void check_parses(const std::string& mlir, const std::string& tag) {
  std::string log;
  const int status = mlir_opt(mlir, tag, log);
  INFO(mlir);
  INFO(log);
  CHECK(status == 0);
}

Proxy arg(std::string name, Shape shape, DType dtype = DType::f32,
          DistType dist = DistType::none) {
  Proxy p;
  p.name = std::move(name);
  p.type.shape = std::move(shape);
  p.type.dtype = dtype;
  p.type.dist = dist;
  return p;
}

Operand in(const std::string& name) { return Operand::of(name); }

// Collectives, futures, del, literals of every kind, int and bool compares,
// 0-d and bf16 tensors, a multi-output op and nested returns.
Trace hand_built() {
  Trace t;
  t.name = "forward";
  t.provenance = "hand";
  TraceBuilder b(t);
  Proxy w = arg("t_h_0_w", {2, 4}, DType::f32, DistType::fully_sharded);
  w.param_path = "h.0.w";
  w.requires_grad = false;
  b.add_arg(w);
  b.add_arg(arg("x", {4, 4}));
  b.add_arg(arg("idx", {4}, DType::i64));
  b.add_arg(arg("h", {}, DType::bf16));
  const Attrs gather{{"group", std::string("dp")}, {"size", int64_t{2}}, {"dim", int64_t{0}}};
  Proxy ft = b.emit1(OpId::AllGather, {in("t_h_0_w")}, gather);
  Proxy full = b.emit1(OpId::Wait, {in(ft.name)});
  Proxy y = b.emit1(OpId::Matmul, {in("x"), in(full.name)});
  const double inf = std::numeric_limits<double>::infinity();
  Proxy ninf = b.emit1(OpId::Maximum, {in(y.name), Operand::lit(-inf)});
  Proxy mask = b.emit1(OpId::Gt, {in(ninf.name), Operand::lit(0.5)});
  Proxy sel = b.emit1(OpId::Where, {in(mask.name), in(y.name), Operand::lit(1e-05)});
  Proxy ieq = b.emit1(OpId::Eq, {in("idx"), Operand::lit(3.0)});
  Proxy bne = b.emit1(OpId::Ne, {in(ieq.name), Operand::lit(1.0)});
  Proxy ihalf = b.emit1(OpId::Add, {in("idx"), Operand::lit(0.5)});
  Proxy hh = b.emit1(OpId::Mul, {in("h"), Operand::lit(2.0)});
  Attrs rs = gather;
  rs.set("op", std::string("sum"));
  Proxy ft2 = b.emit1(OpId::ReduceScatter, {in(sel.name)}, rs);
  Proxy part = b.emit1(OpId::Wait, {in(ft2.name)});
  Proxy flat = b.emit1(OpId::Reshape, {in(y.name)}, {{"shape", IntList{16}}});
  std::vector<Proxy> pieces =
      b.emit(OpId::Unpack, {in(flat.name)}, {{"shapes", IntLists{{2, 2}, {12}}}});
  BoundSymbol del;
  del.op = OpId::Del;
  del.inputs = {in(full.name), in(ninf.name), in("x")};
  t.bsyms.push_back(del);
  t.returns = ReturnTree::tuple(
      {ReturnTree::leaf(part.name),
       ReturnTree::tuple({ReturnTree::leaf(pieces[0].name), ReturnTree::leaf(bne.name)}),
       ReturnTree::tuple({ReturnTree::leaf(ihalf.name), ReturnTree::leaf(hh.name)})});
  return t;
}

}  // namespace

TEST_CASE("mlp prints as builtin and fsdpc ops with trace names", "[mlir]") {
  Trace t = capture(*make_model("mlp"));
  const std::string mlir = trace_to_mlir(t);
  CHECK(mlir.find("func.func @computation(%x: tensor<64x64xf32>, %t_0_weight: "
                  "tensor<64x64xf32> {fsdpc.param = \"0.weight\"}, %t_2_weight: "
                  "tensor<64x64xf32> {fsdpc.param = \"2.weight\"}) -> tensor<64x64xf32> {\n") !=
        std::string::npos);
  CHECK(mlir.find("  %t0 = \"fsdpc.linear\"(%x, %t_0_weight) : (tensor<64x64xf32>, "
                  "tensor<64x64xf32>) -> tensor<64x64xf32>\n") != std::string::npos);
  CHECK(mlir.find("  %t3 = math.tanh %t0 : tensor<64x64xf32>\n") != std::string::npos);
  CHECK(mlir.find("  func.return %t4 : tensor<64x64xf32>\n}\n") != std::string::npos);
  check_parses(mlir, "mlp");
}

TEST_CASE("gpt2-tiny, with and without dels, parses in mlir-opt", "[mlir]") {
  Trace t = capture(*make_model("gpt2-tiny"));
  const std::string mlir = trace_to_mlir(t);
  CHECK(mlir.find("%t0 = \"fsdpc.iota\"() {length = 64 : i64, dtype = \"i64\", device = "
                  "\"cpu\"} : () -> tensor<64xi64>") != std::string::npos);
  CHECK(mlir.find("{eps = 1.0e-05 : f64}") != std::string::npos);
  check_parses(mlir, "gpt2_tiny");
  const std::string with_dels = trace_to_mlir(insert_dels(t));
  CHECK(with_dels.find("\"fsdpc.del\"(") != std::string::npos);
  check_parses(with_dels, "gpt2_tiny_del");
}

TEST_CASE("collectives, futures, del and literals print as MLIR accepts them", "[mlir]") {
  Trace t = hand_built();
  REQUIRE_NOTHROW(verify(t));
  const std::string mlir = trace_to_mlir(t);
  auto has = [&](const std::string& s) {
    INFO(s);
    INFO(mlir);
    CHECK(mlir.find(s) != std::string::npos);
  };
  has("// fsdpc trace 'forward', constructed by hand\n");
  has("func.func @forward(%t_h_0_w: tensor<2x4xf32> {fsdpc.param = \"h.0.w\", fsdpc.frozen, "
      "fsdpc.dist = \"fully_sharded\"}, %x: tensor<4x4xf32>, %idx: tensor<4xi64>, %h: "
      "tensor<bf16>) -> (");
  has("%ft0 = \"fsdpc.all_gather\"(%t_h_0_w) {group = \"dp\", size = 2 : i64, dim = 0 : i64} "
      ": (tensor<2x4xf32>) -> !fsdpc.future<tensor<4x4xf32>>\n");
  has("%t1 = \"fsdpc.wait\"(%ft0) : (!fsdpc.future<tensor<4x4xf32>>) -> tensor<4x4xf32>\n");
  has("%t3.c1 = arith.constant dense<0xFF800000> : tensor<4x4xf32>\n");
  has("%t3 = arith.maxf %t2, %t3.c1 : tensor<4x4xf32>\n");
  has("%t4 = arith.cmpf ogt, %t3, %t4.c1 : tensor<4x4xf32>\n");
  has("%t5.c2 = arith.constant dense<1.0e-05> : tensor<4x4xf32>\n");
  has("%t5 = arith.select %t4, %t2, %t5.c2 : tensor<4x4xi1>, tensor<4x4xf32>\n");
  has("%t6 = arith.cmpi eq, %idx, %t6.c1 : tensor<4xi64>\n");
  has("%t7.c1 = arith.constant dense<true> : tensor<4xi1>\n");
  // 0.5 does not fit i64: the literal stays f64 and the op generic.
  has("%t8.c1 = arith.constant dense<0.5> : tensor<4xf64>\n");
  has("%t8 = \"fsdpc.add\"(%idx, %t8.c1) : (tensor<4xi64>, tensor<4xf64>) -> tensor<4xi64>\n");
  has("%t9 = arith.mulf %h, %t9.c1 : tensor<bf16>\n");
  has("%t13, %t14 = \"fsdpc.unpack\"(%t12) {shapes = [[2 : i64, 2 : i64], [12 : i64]]} : "
      "(tensor<16xf32>) -> (tensor<2x2xf32>, tensor<12xf32>)\n");
  has("  \"fsdpc.del\"(%t1, %t3, %x) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) "
      "-> ()\n");
  has("  func.return %t11, %t13, %t7, %t8, %t9 : tensor<2x4xf32>, tensor<2x2xf32>, tensor<4xi1>, "
      "tensor<4xi64>, tensor<bf16>\n}\n");
  check_parses(mlir, "hand_built");
}

TEST_CASE("names MLIR cannot spell are renamed; undefined names are an error", "[mlir]") {
  Trace t;
  t.name = "my trace";
  t.args = {arg("x", {2})};
  t.args[0].type.device = Device{DeviceKind::cuda, 1};
  BoundSymbol neg;
  neg.op = OpId::Neg;
  neg.inputs = {in("x")};
  neg.outputs = {arg("1st", {2})};
  neg.outputs[0].type.device = t.args[0].type.device;
  t.bsyms.push_back(neg);
  t.returns = ReturnTree::leaf("1st");
  const std::string mlir = trace_to_mlir(t);
  CHECK(mlir.find("func.func @\"my trace\"(%x: tensor<2xf32> {fsdpc.device = \"cuda:1\"}) -> "
                  "tensor<2xf32> {\n  %v.0 = arith.negf %x : tensor<2xf32>\n  func.return %v.0 "
                  ": tensor<2xf32>\n}\n") != std::string::npos);
  check_parses(mlir, "renamed");
  t.returns = ReturnTree::leaf("nowhere");
  CHECK_THROWS_WITH(trace_to_mlir(t), Catch::Contains("nowhere is used but not defined"));
}

TEST_CASE("forward and backward traces of every strategy parse in mlir-opt", "[mlir]") {
  for (Strategy s : {Strategy::zero3, Strategy::zero2, Strategy::no_shard, Strategy::hybrid}) {
    PipelineOptions o;
    o.strategy = s;
    o.mesh = is_hybrid(s) ? Mesh{2, 2} : flat_mesh(3);
    o.bucketing = s == Strategy::zero3;
    std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny")), o);
    for (const Trace& t : stages.back().traces)
      check_parses(trace_to_mlir(t), std::string(strategy_name(s)) + "-" + t.name);
  }
}

TEST_CASE("sin and cos print as math ops, silu and rms_norm as fsdpc ops", "[mlir]") {
  Trace t;
  t.name = "computation";
  TraceBuilder b(t);
  b.add_arg(arg("x", {3, 8}));
  b.add_arg(arg("w", {8}));
  auto in = [](const std::string& n) { return Operand::of(n); };
  Proxy s = b.emit1(OpId::Sin, {in("x")});
  Proxy c = b.emit1(OpId::Cos, {in(s.name)});
  Proxy u = b.emit1(OpId::Silu, {in(c.name)});
  Proxy r = b.emit1(OpId::RmsNorm, {in(u.name), in("w")}, {{"eps", 1e-6}});
  t.returns = ReturnTree::leaf(r.name);
  const std::string mlir = trace_to_mlir(t);
  INFO(mlir);
  CHECK(mlir.find("= math.sin %x : tensor<3x8xf32>\n") != std::string::npos);
  CHECK(mlir.find("= math.cos %" + s.name + " : tensor<3x8xf32>\n") != std::string::npos);
  CHECK(mlir.find("= \"fsdpc.silu\"(%" + c.name + ")") != std::string::npos);
  CHECK(mlir.find("= \"fsdpc.rms_norm\"(%" + u.name + ", %w) {eps = 1.0e-06 : f64}") != std::string::npos);
  check_parses(mlir, "llama_ops");
}
