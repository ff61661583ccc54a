// The step simulator (runtime/planner/step_simulator.h) on traces small enough to
// time by hand, its cost model's formulas, and the hardware profiles it
// reads (hardware/*.json).
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "executors/claim.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "passes/stats.h"
#include "runtime/planner/hardware_profile.h"
#include "runtime/planner/step_simulator.h"

using namespace fsdpc;

namespace {

// Round numbers: a 256x256x256 matmul (2^25 FLOPs) takes 1 ms; an f32
// [256, 256] all_gather over 2 ranks moves half of 256 KiB, 0.5 ms on the
// intra-node link; memory moves 1 GB/s; inter-node is 4x slower.
HardwareProfile toy_profile() {
  HardwareProfile hw;
  hw.name = "toy";
  const Figure one{1, "test"};
  hw.gpus_per_node = {2, "test"};
  hw.peak_flops_f32 = {33554432e3, "test"};
  hw.peak_flops_bf16 = {2 * 33554432e3, "test"};
  hw.matmul_sustained_fraction = one;
  hw.memory_bandwidth = {1e9, "test"};
  hw.memory_sustained_fraction = one;
  hw.intra_node = {{262144e3, "test"}, {1e-12, "test"}, one, {}, {}, {}, {}};
  hw.inter_node = {{65536e3, "test"}, {1e-12, "test"}, one, {}, {}, {}, {}};
  return hw;
}

const char* kHeader =
    "# Constructed by exec\n"
    "def forward(x, y, w):\n"
    "  # x: \"cpu f32[256, 256]\"\n"
    "  # y: \"cpu f32[256, 256]\"\n"
    "  # w: \"cpu f32[128, 256]\" fully_sharded param=w\n";
const char* kGather = "  ft1 = mpi_all_gather(w, group=dp, size=2, dim=0)  # ft1: \"FUTURE cpu f32[256, 256]\" replicated\n";
const char* kMatmul = "  t2 = cpu_matmul(x, y)  # t2: \"cpu f32[256, 256]\"\n";
const char* kWait = "  t3 = mpi_wait(ft1)  # t3: \"cpu f32[256, 256]\" replicated\n";
const char* kReturn = "  return (t2, t3)\n";

StepSimulation simulate(const std::string& body, const HardwareProfile& hw, const Mesh& mesh = flat_mesh(2)) {
  const Trace t = parse_trace(std::string(kHeader) + body + kReturn);
  return simulate_step({&t}, mesh, hw);
}

}  // namespace

TEST_CASE("a gather issued before a longer matmul is hidden entirely") {
  const StepSimulation s = simulate(std::string(kGather) + kMatmul + kWait, toy_profile());
  CHECK(s.seconds == Approx(1e-3));
  CHECK(s.blocked == Approx(0).margin(1e-12));
  CHECK(s.matmul == Approx(1e-3));
  CHECK(s.flops == 2.0 * 256 * 256 * 256);
  REQUIRE(s.streams.size() == 1);
  CHECK(s.streams[0].group == "dp");
  CHECK(s.streams[0].busy == Approx(0.5e-3));
  CHECK(s.streams[0].bytes == 131072);
  CHECK_FALSE(s.streams[0].inter_node);
}

TEST_CASE("a gather longer than the matmul it overlaps blocks the wait for the difference") {
  HardwareProfile hw = toy_profile();
  hw.intra_node.bandwidth.value /= 3;  // 1.5 ms
  const StepSimulation s = simulate(std::string(kGather) + kMatmul + kWait, hw);
  CHECK(s.seconds == Approx(1.5e-3));
  CHECK(s.blocked == Approx(0.5e-3));
}

TEST_CASE("a gather issued after the matmul is exposed in full") {
  const StepSimulation s = simulate(std::string(kMatmul) + kGather + kWait, toy_profile());
  CHECK(s.seconds == Approx(1.5e-3));
  CHECK(s.blocked == Approx(0.5e-3));
}

TEST_CASE("collectives of one group queue on its stream; compute by bytes at the memory bandwidth") {
  const std::string body = std::string(kGather) +
                           "  ft4 = mpi_all_gather(w, group=dp, size=2, dim=0)  # ft4: \"FUTURE cpu f32[256, 256]\" replicated\n" +
                           "  t5 = cpu_add(x, 1.0)  # t5: \"cpu f32[256, 256]\"\n" + kWait +
                           "  t6 = mpi_wait(ft4)  # t6: \"cpu f32[256, 256]\" replicated\n" + kMatmul;
  const StepSimulation s = simulate(body, toy_profile());
  const double add = 2 * 262144 / 1e9;  // reads x, writes t5; the literal is no tensor
  CHECK(s.compute == Approx(add + 1e-3));
  // The second gather starts when the first ends: both done at 1 ms.
  CHECK(s.blocked == Approx(1e-3 - add));
  CHECK(s.seconds == Approx(2e-3));
  CHECK(s.streams.at(0).count == 2);
}

TEST_CASE("each compute statement pays the profile's kernel overhead; a reshape is a view and pays nothing") {
  HardwareProfile hw = toy_profile();
  hw.kernel_overhead = {0.1e-3, "test"};
  const StepSimulation s = simulate(std::string(kGather) + kMatmul + "  t4 = cpu_reshape(x, shape=[65536])  # t4: \"cpu f32[65536]\"\n" +
                                        kWait + "  t5 = cpu_neg(t3)  # t5: \"cpu f32[256, 256]\"\n",
                                    hw);
  const double neg = 2 * 262144 / 1e9;
  CHECK(s.compute == Approx(1.1e-3 + 0.1e-3 + neg));
  CHECK(s.seconds == Approx(1.1e-3 + 0.1e-3 + neg));
}

TEST_CASE("launches are charged by kind; a region's arithmetic at its rate when slower than its bytes") {
  HardwareProfile hw = toy_profile();
  hw.kernel_overhead = {1e-6, "test"};
  hw.region_overhead = {2e-6, "test"};
  hw.matmul_overhead = {3e-6, "test"};
  TensorType t;
  t.shape = {256, 256};  // 256 KiB
  auto statement = [&](OpId op) {
    BoundSymbol b;
    b.op = op;
    b.inputs = {Operand::of("x")};
    b.outputs = {Proxy{"y", t, "", true}};
    return b;
  };
  const InputTypes in{&t};
  const double bytes = 2 * 262144 / 1e9;
  CHECK(compute_seconds(statement(OpId::Neg), in, hw) == Approx(1e-6 + bytes));
  // A region of four elementwise statements: 4 x 65536 element-operations.
  BoundSymbol region = statement(OpId::Fusion);
  std::vector<BoundSymbol> subs;
  for (OpId op : {OpId::Neg, OpId::Exp, OpId::Neg, OpId::Tanh}) subs.push_back(statement(op));
  region.subsymbols = SubSymbols(subs);
  CHECK(region_element_ops(region) == 4 * 65536);
  CHECK(compute_seconds(region, in, hw) == Approx(2e-6 + bytes));  // no rate: its bytes
  hw.elementwise_rate = {4 * 65536 / 1e-3, "test"};                 // 1 ms of arithmetic
  CHECK(compute_seconds(region, in, hw) == Approx(2e-6 + 1e-3));
  hw.elementwise_rate = {1e15, "test"};  // faster than its bytes: the bytes
  CHECK(compute_seconds(region, in, hw) == Approx(2e-6 + bytes));
  // A row reduction in it: the row rate.
  subs.push_back(statement(OpId::Sum));
  region.subsymbols = SubSymbols(subs);
  hw.row_region_rate = {5 * 65536 / 2e-3, "test"};
  CHECK(compute_seconds(region, in, hw) == Approx(2e-6 + 2e-3));
  // A matmul's launch; a profile without the kinds falls back to kernel_overhead.
  BoundSymbol mm = statement(OpId::Matmul);
  mm.inputs = {Operand::of("x"), Operand::of("x")};
  const InputTypes mm_in{&t, &t};
  const double flops = 2.0 * 256 * 256 * 256;
  CHECK(compute_seconds(mm, mm_in, hw) == Approx(3e-6 + 1e-3));
  CHECK(launch_seconds(mm, flops, hw) == 3e-6);
  hw.region_overhead = hw.matmul_overhead = Figure{};
  CHECK(launch_seconds(mm, flops, hw) == 1e-6);
  CHECK(launch_seconds(region, 0, hw) == 1e-6);
  CHECK(launch_seconds(statement(OpId::Reshape), 0, hw) == 0);
}

TEST_CASE("bf16 operands run at the bf16 rate") {
  const Trace t = parse_trace(
      "# Constructed by exec\ndef forward(x, y):\n  # x: \"cuda:0 bf16[256, 256]\"\n  # y: \"cuda:0 bf16[256, 256]\"\n"
      "  t2 = cuda_matmul(x, y)  # t2: \"cuda:0 bf16[256, 256]\"\n  return t2\n");
  CHECK(simulate_step({&t}, flat_mesh(1), toy_profile()).seconds == Approx(0.5e-3));
}

TEST_CASE("a matmul the profile measured on its shapes takes that time; other shapes the sustained rate") {
  const Trace t = parse_trace(std::string(kHeader) +
                              "  t2 = cpu_matmul(x, y)  # t2: \"cpu f32[256, 256]\"\n"
                              "  t4 = cpu_linear(x, w)  # t4: \"cpu f32[256, 128]\"\n"
                              "  return (t2, t4)\n");
  const BoundSymbol& mm = t.bsyms.at(0);
  const BoundSymbol& lin = t.bsyms.at(1);
  const TensorType& x = t.args.at(0).type;
  const TensorType& w = t.args.at(2).type;
  const std::string mm_key = matmul_signature(mm, {&x, &x});
  const std::string lin_key = matmul_signature(lin, {&x, &w});
  CHECK(mm_key == "matmul | cpu f32[256, 256] cpu f32[256, 256]");
  CHECK(lin_key == "linear | cpu f32[256, 256] cpu f32[128, 256]");
  // The key tells shapes apart, and has nothing for a statement without FLOPs.
  CHECK(matmul_signature(mm, {&x, &w}) != mm_key);
  const Trace neg = parse_trace(std::string(kHeader) + "  t2 = cpu_neg(x)  # t2: \"cpu f32[256, 256]\"\n  return t2\n");
  CHECK(matmul_signature(neg.bsyms.at(0), {&x}).empty());

  HardwareProfile hw = toy_profile();
  hw.matmul_overhead = {1e-6, "test"};
  // Unmeasured: 1 ms and 0.5 ms at the peak rate, plus each launch.
  CHECK(simulate_step({&t}, flat_mesh(1), hw).matmul == Approx(1.5e-3 + 2e-6));
  hw.matmul_seconds[mm_key] = 4e-3;  // measured: four times slower than the peak rate says
  const StepSimulation s = simulate_step({&t}, flat_mesh(1), hw);
  CHECK(s.matmul == Approx(4e-3 + 0.5e-3 + 2e-6));
  CHECK(s.flops == 2.0 * 256 * 256 * 256 + 2.0 * 256 * 128 * 256);  // FLOPs are the statement's, however timed
}

TEST_CASE("each collective costs the compute stream its link's host time; reductions run at their own rates") {
  HardwareProfile hw = toy_profile();
  hw.intra_node.host_overhead = {0.1e-3, "test"};
  // Issued before the matmul: the gather starts after its 0.1 ms of host
  // time and ends at 0.6 ms, hidden; the matmul ends at 1.1 ms.
  StepSimulation s = simulate(std::string(kGather) + kMatmul + kWait, hw);
  CHECK(s.seconds == Approx(1.1e-3));
  CHECK(s.comm_host == Approx(0.1e-3));
  CHECK(s.compute == Approx(1.1e-3));
  CHECK(s.blocked == Approx(0).margin(1e-12));
  // Each of two collectives pays it; a group of one issues nothing and pays none.
  const std::string two = std::string(kGather) +
                          "  ft4 = mpi_all_gather(w, group=dp, size=2, dim=0)  # ft4: \"FUTURE cpu f32[256, 256]\" replicated\n" +
                          kWait + "  t6 = mpi_wait(ft4)  # t6: \"cpu f32[256, 256]\" replicated\n";
  s = simulate(two, hw);
  CHECK(s.comm_host == Approx(0.2e-3));
  // The first starts after its 0.1 ms; the second, issued at 0.2 ms,
  // queues behind it on the stream: 0.1 + 0.5 + 0.5.
  CHECK(s.seconds == Approx(1.1e-3));
  // A reduce_scatter at the link's reduce_scatter rate, half the gather's:
  // its 256 KiB input moves half of itself in 1 ms.
  hw.intra_node.host_overhead = {};
  const std::string scatter =
      "  ft1 = mpi_reduce_scatter(x, group=dp, size=2, dim=0, op=sum)  # ft1: \"FUTURE cpu f32[128, 256]\"\n"
      "  t3 = mpi_wait(ft1)  # t3: \"cpu f32[128, 256]\"\n";
  const std::string scatter_trace = std::string(kHeader) + scatter + "  return t3\n";
  const Trace t = parse_trace(scatter_trace);
  CHECK(simulate_step({&t}, flat_mesh(2), hw).seconds == Approx(0.5e-3));
  hw.intra_node.reduce_scatter_bandwidth = {131072e3, "test"};
  CHECK(simulate_step({&t}, flat_mesh(2), hw).seconds == Approx(1e-3));
  hw.intra_node.all_reduce_bandwidth = {1, "test"};  // not this collective's
  CHECK(simulate_step({&t}, flat_mesh(2), hw).seconds == Approx(1e-3));
  CHECK(hw.intra_node.effective_bandwidth(OpId::AllGather) == 262144e3);
  CHECK(hw.intra_node.effective_bandwidth(OpId::AllReduce) == 1);
}

TEST_CASE("the alpha-beta ring model") {
  CHECK(collective_seconds(OpId::AllGather, 1000, 4, 1e-6, 1e3) == Approx(3e-6 + 0.75));
  CHECK(collective_seconds(OpId::ReduceScatter, 1000, 4, 1e-6, 1e3) == Approx(3e-6 + 0.75));
  CHECK(collective_seconds(OpId::AllReduce, 1000, 4, 1e-6, 1e3) == Approx(2 * (3e-6 + 0.75)));
  CHECK(collective_seconds(OpId::AllReduce, 1000, 1, 1e-6, 1e3) == 0);
  CHECK(collective_rank_bytes(OpId::AllReduce, 1000, 4) == 1500);
}

TEST_CASE("which groups cross nodes: consecutive ranks share a node") {
  const Mesh m{2, 2};  // ranks 0,1 | 2,3 on nodes of two
  CHECK_FALSE(group_crosses_nodes(m, "shard", 2));
  CHECK(group_crosses_nodes(m, "replicate", 2));
  CHECK(group_crosses_nodes(m, "dp", 2));
  CHECK_FALSE(group_crosses_nodes(m, "replicate", 4));
  CHECK_FALSE(group_crosses_nodes(flat_mesh(8), "dp", 8));
  CHECK(group_crosses_nodes(flat_mesh(16), "dp", 8));
}

TEST_CASE("a hybrid step runs shard and replicate collectives on their own streams and links") {
  const Trace t = parse_trace(
      "# Constructed by exec\ndef backward(g):\n  # g: \"cpu f32[256, 256]\"\n"
      "  ft1 = mpi_reduce_scatter(g, group=shard, size=2, dim=0, op=sum)  # ft1: \"FUTURE cpu f32[128, 256]\" fully_sharded\n"
      "  ft2 = mpi_all_reduce(g, group=replicate, size=2, op=sum)  # ft2: \"FUTURE cpu f32[256, 256]\"\n"
      "  t3 = mpi_wait(ft1)  # t3: \"cpu f32[128, 256]\" fully_sharded\n"
      "  t4 = mpi_wait(ft2)  # t4: \"cpu f32[256, 256]\"\n"
      "  return (t3, t4)\n");
  const StepSimulation s = simulate_step({&t}, Mesh{2, 2}, toy_profile());
  REQUIRE(s.streams.size() == 2);
  CHECK(s.streams[0].group == "shard");
  CHECK_FALSE(s.streams[0].inter_node);
  CHECK(s.streams[0].busy == Approx(0.5e-3));  // 128 KiB at the intra-node rate
  CHECK(s.streams[1].group == "replicate");
  CHECK(s.streams[1].inter_node);
  CHECK(s.streams[1].busy == Approx(2 * 2e-3));  // all_reduce: twice 128 KiB at the 4x slower link
  CHECK(s.seconds == Approx(4e-3));              // concurrent: the longer one
  CHECK(s.comm_bytes() == 131072 + 262144);
}

TEST_CASE("the simulator counts the bytes trace_stats counts, on a compiled hybrid step") {
  PipelineOptions o;
  o.strategy = Strategy::hybrid;
  o.mesh = Mesh{2, 2};
  o.bucketing = true;
  o.verify = false;
  const std::vector<Stage> stages = compile(capture(*make_model("gpt2-tiny")), o);
  const Trace fwd = execution_trace(stages.back().traces[0], Target::cpu), bwd = execution_trace(stages.back().traces[1], Target::cpu);
  const StepSimulation s = simulate_step({&fwd, &bwd}, o.mesh, toy_profile(), 0.25);
  CHECK(s.comm_bytes() == Approx(trace_stats(fwd).collective_bytes + trace_stats(bwd).collective_bytes));
  CHECK(s.streams.size() == 2);
  CHECK(s.flops > 0);
  CHECK(s.seconds >= s.compute);  // the optimizer's 0.25 s is compute, after every collective
  CHECK(s.seconds > 0.25);
  // Deterministic: the same traces, the same answer.
  CHECK(simulate_step({&fwd, &bwd}, o.mesh, toy_profile(), 0.25).seconds == s.seconds);
}

TEST_CASE("hardware profiles: the shipped ones parse, a bad field is named") {
  for (const char* name : {"h100-sxm-nvlink-ib", "a100-sxm-nvlink-ib"}) {
    const std::string file = std::string(FSDPC_SOURCE_DIR) + "/hardware/" + name + ".json";
    std::ifstream in(file);
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    const HardwareProfile p = parse_hardware_profile(text.str(), file);
    CHECK(p.name == name);
    CHECK(p.gpus_per_node.value == 8);
    CHECK(p.memory_capacity.value == 80e9);
    CHECK(p.kernel_overhead.value > 0);
    CHECK(p.inter_node.effective_bandwidth() < p.intra_node.effective_bandwidth());
    // Written and read back, the same figures.
    const HardwareProfile back = parse_hardware_profile(hardware_profile_json(p), "again");
    CHECK(back.peak_flops_bf16.value == p.peak_flops_bf16.value);
    CHECK(back.inter_node.latency.source == p.inter_node.latency.source);
    CHECK(back.kernel_overhead.value == p.kernel_overhead.value);
  }
  {  // The optional launch overheads and region rates survive a round trip.
    HardwareProfile p = toy_profile();
    p.region_overhead = {2e-6, "measured: test"};
    p.matmul_overhead = {3e-6, "measured: test"};
    p.elementwise_rate = {1e10, "measured: test"};
    p.row_region_rate = {1e9, "measured: test"};
    const HardwareProfile back = parse_hardware_profile(hardware_profile_json(p), "again");
    CHECK(back.region_overhead.value == 2e-6);
    CHECK(back.matmul_overhead.source == "measured: test");
    CHECK(back.elementwise_rate.value == 1e10);
    CHECK(back.row_region_rate.value == 1e9);
    CHECK(back.kernel_overhead.value == 0);  // absent stays absent
    CHECK(back.matmul_seconds.empty());
    CHECK(back.intra_node.host_overhead.value == 0);
    CHECK(back.intra_node.reduce_scatter_bandwidth.value == 0);
  }
  {  // A link's measured host time and reduction rates survive a round trip; a bad one is named.
    HardwareProfile p = toy_profile();
    p.intra_node.host_overhead = {3e-6, "measured: host"};
    p.intra_node.reduce_scatter_bandwidth = {1e9, "measured: scatter"};
    p.intra_node.all_reduce_bandwidth = {2e9, "measured: reduce"};
    const std::string text = hardware_profile_json(p);
    const HardwareProfile back = parse_hardware_profile(text, "again");
    CHECK(back.intra_node.host_overhead.value == 3e-6);
    CHECK(back.intra_node.host_overhead.source == "measured: host");
    CHECK(back.intra_node.reduce_scatter_bandwidth.value == 1e9);
    CHECK(back.intra_node.all_reduce_bandwidth.source == "measured: reduce");
    CHECK(back.inter_node.host_overhead.value == 0);
    std::string bad = text;
    bad.replace(bad.find("3e-06"), 5, "-3e-06");
    CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"),
                      "f.json: intra_node.host_overhead.value: expected a number above 0");
  }
  {  // Measured matmul shapes survive a round trip; a bad one is named.
    HardwareProfile p = toy_profile();
    p.matmul_seconds["matmul | cpu f32[8, 8] cpu f32[8, 8]"] = 0;
    p.matmul_seconds["linear | cpu f32[256, 256] cpu f32[128, 256]"] = 0.25;
    p.matmul_seconds_source = "measured: test";
    const std::string text = hardware_profile_json(p);
    const HardwareProfile back = parse_hardware_profile(text, "again");
    CHECK(back.matmul_seconds == p.matmul_seconds);
    CHECK(back.matmul_seconds_source == "measured: test");
    std::string bad = text;
    bad.replace(bad.find("0.25"), 4, "-1.0");
    CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"),
                      "f.json: compute.matmul_shapes.seconds[\"linear | cpu f32[256, 256] cpu f32[128, 256]\"]: "
                      "expected a number of seconds, at least 0");
    bad = text;
    bad.replace(bad.find("\"source\": \"measured: test\""), 26, "\"sauce\": \"measured: test\"");
    CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"), "f.json: compute.matmul_shapes.source: missing");
  }
  const std::string good = hardware_profile_json(toy_profile());
  CHECK_THROWS_WITH(parse_hardware_profile("{", "f.json"), Catch::StartsWith("f.json: not JSON"));
  std::string bad = good;
  bad.replace(bad.find("\"intra_node\""), 12, "\"intra_nodes\"");
  CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"), "f.json: intra_node: missing");
  bad = good;
  bad.replace(bad.find("\"executor\": \"cpu\""), 17, "\"executor\": \"tpu\"");
  CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"), "f.json: executor: 'tpu' is not cpu or cuda");
  bad = good;
  const size_t at = bad.find("\"value\"", bad.find("memory_sustained_fraction"));
  bad.replace(at, bad.find(',', at) - at, "\"value\": 1.5");
  CHECK_THROWS_WITH(parse_hardware_profile(bad, "f.json"),
                    "f.json: compute.memory_sustained_fraction.value: expected a number above 0 and at most 1");
}
