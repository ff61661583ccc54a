// The NCCL executor's host-side logic, which needs no GPU: what it claims
// (collectives and waits of CUDA tensors, sums of NCCL's arithmetic types),
// the dtype mapping, its kernels, the claim pass over a CUDA trace and the
// timeout setting. The kernels themselves run on a device in
// test/gpu/gpu_nccl_test.cpp.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "executors/claim.h"
#include "executors/comm/nccl_executor.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "test/collective_samples.h"

using namespace fsdpc;
using Catch::Contains;
using test::collective_attrs;
using test::collective_trace;

namespace {

const DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                            DType::i64, DType::i32, DType::boolean};
const OpId kCollectives[] = {OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce, OpId::Broadcast};

TensorType tensor(Shape shape, DType d, DeviceKind kind = DeviceKind::cuda) {
  return test::tensor_on(std::move(shape), d, kind);
}

// Sets or clears an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("nccl: dtypes map to NCCL's types; bool has no sum", "[nccl]") {
  CHECK(nccl_dtype(DType::f32) == ncclFloat32);
  CHECK(nccl_dtype(DType::bf16) == ncclBfloat16);
  CHECK(nccl_dtype(DType::f16) == ncclFloat16);
  CHECK(nccl_dtype(DType::f64) == ncclFloat64);
  CHECK(nccl_dtype(DType::i32) == ncclInt32);
  CHECK(nccl_dtype(DType::i64) == ncclInt64);
  CHECK_FALSE(nccl_dtype(DType::boolean).has_value());
}

TEST_CASE("nccl: claims collectives and waits of CUDA tensors", "[nccl]") {
  const Executor& nccl = nccl_executor();
  CHECK(nccl.name() == "nccl");
  for (OpId op : kCollectives) {
    for (DType d : kAllDTypes) {
      INFO(op_name(op) << " " << dtype_name(d));
      const bool sums = op == OpId::AllReduce || op == OpId::ReduceScatter;
      const Trace gpu = collective_trace(op, tensor({4, 2}, d), collective_attrs(op));
      // Bool is moved as bytes, never summed.
      CHECK(nccl.claims(gpu.bsyms[0]) == (!sums || d != DType::boolean));
      CHECK(nccl.claims(gpu.bsyms[1]));  // its wait
      const Trace cpu = collective_trace(op, tensor({4, 2}, d, DeviceKind::cpu), collective_attrs(op));
      CHECK_FALSE(nccl.claims(cpu.bsyms[0]));
      CHECK_FALSE(nccl.claims(cpu.bsyms[1]));
    }
  }
}

// Reduce-scatter sums only; all_reduce also takes the max (vocab-parallel
// cross-entropy's row max, with grad=none).
TEST_CASE("nccl: reduce_scatter sums only, all_reduce sums or takes the max", "[nccl]") {
  const Executor& nccl = nccl_executor();
  for (OpId op : {OpId::AllReduce, OpId::ReduceScatter}) {
    BoundSymbol b = collective_trace(op, tensor({4, 2}, DType::f32), collective_attrs(op)).bsyms[0];
    CHECK(nccl.claims(b));
    b.attrs.set("op", "max");
    CHECK(nccl.claims(b) == (op == OpId::AllReduce));
    b.attrs.set("op", "min");
    CHECK_FALSE(nccl.claims(b));
  }
}

// A CUDA tensor's axis_index is the nccl executor's (it knows the groups);
// it runs on the compute stream like any kernel (no future).
TEST_CASE("nccl: claims axis_index on a CUDA device, not on the CPU", "[nccl]") {
  const Executor& nccl = nccl_executor();
  BoundSymbol b;
  b.op = OpId::AxisIndex;
  b.attrs = Attrs{{"group", std::string("tp")}, {"size", int64_t{2}}, {"device", std::string("cuda:0")}};
  b.outputs.push_back(Proxy{"t0", tensor({}, DType::i64), "", false});
  CHECK(nccl.claims(b));
  CHECK(nccl.kernel(OpId::AxisIndex) != nullptr);
  b.outputs[0].type = tensor({}, DType::i64, DeviceKind::cpu);
  CHECK_FALSE(nccl.claims(b));
}

// Pipeline stages' messages: ncclSend/ncclRecv of any type NCCL moves, on a
// CUDA device; a CPU trace's are the mpi executor's.
TEST_CASE("nccl: claims send and recv of CUDA tensors", "[nccl]") {
  const Executor& nccl = nccl_executor();
  const Attrs peer{{"group", "dp"}, {"size", int64_t{2}}, {"peer", int64_t{1}}};
  for (DType d : kAllDTypes) {
    INFO(dtype_name(d));
    const Trace sent = collective_trace(OpId::Send, tensor({4, 2}, d), peer);
    CHECK(nccl.claims(sent.bsyms[0]));
    CHECK(nccl.claims(sent.bsyms[1]));  // its wait
    CHECK_FALSE(nccl.claims(collective_trace(OpId::Send, tensor({4, 2}, d, DeviceKind::cpu), peer).bsyms[0]));
    Trace received;
    TraceBuilder b(received);
    Attrs attrs = peer;
    attrs.set("shape", IntList{4, 2});
    attrs.set("dtype", std::string(dtype_name(d)));
    attrs.set("device", "cuda:0");
    b.emit1(OpId::Recv, {}, attrs);
    CHECK(nccl.claims(received.bsyms[0]));
    CHECK(nccl.kernel(OpId::Recv) != nullptr);
    CHECK(nccl.kernel(OpId::Send) != nullptr);
  }
  const Trace claimed = claim(collective_trace(OpId::Send, tensor({4, 2}, DType::bf16), peer), {&nccl_executor()});
  CHECK_THAT(print_trace(claimed), Contains("= nccl_send(x, group=dp, size=2, peer=1)") && Contains("= nccl_wait("));
}

TEST_CASE("nccl: leaves compute ops and del to others", "[nccl]") {
  const Executor& nccl = nccl_executor();
  BoundSymbol b;
  b.op = OpId::Tanh;
  b.outputs.push_back(Proxy{"t0", tensor({2}, DType::f32), "", true});
  CHECK_FALSE(nccl.claims(b));
  b.op = OpId::Synchronize;
  CHECK_FALSE(nccl.claims(b));
  BoundSymbol del;
  del.op = OpId::Del;
  CHECK_FALSE(nccl.claims(del));
}

TEST_CASE("nccl: every claimed op has a kernel", "[nccl]") {
  const Executor& nccl = nccl_executor();
  for (OpId op : kCollectives) {
    const Trace t = collective_trace(op, tensor({4, 2}, DType::bf16), collective_attrs(op));
    for (const BoundSymbol& b : t.bsyms) {
      INFO(op_name(b.op));
      REQUIRE(nccl.claims(b));
      CHECK(nccl.kernel(b.op) != nullptr);
    }
  }
}

TEST_CASE("nccl: the claim pass binds a CUDA trace's collectives to nccl", "[nccl]") {
  const Trace t = collective_trace(OpId::AllGather, tensor({4, 2}, DType::f32), collective_attrs(OpId::AllGather));
  const Trace claimed = claim(t, {&nccl_executor()});
  const std::string text = print_trace(claimed);
  CHECK_THAT(text, Contains("= nccl_all_gather(x, group=dp, size=2, dim=0)") && Contains("= nccl_wait("));
  // A CPU trace is not NCCL's: with nccl alone nothing claims it.
  const Trace cpu = collective_trace(OpId::AllGather, tensor({4, 2}, DType::f32, DeviceKind::cpu),
                                     collective_attrs(OpId::AllGather));
  CHECK_THROWS_WITH(claim(cpu, {&nccl_executor()}), Contains("all_gather"));
}

TEST_CASE("nccl: the timeout comes from FSDPC_NCCL_TIMEOUT_S", "[nccl]") {
  {
    ScopedEnv env("FSDPC_NCCL_TIMEOUT_S", nullptr);
    CHECK(nccl_timeout_from_env() == 600.0);
  }
  {
    ScopedEnv env("FSDPC_NCCL_TIMEOUT_S", "2.5");
    CHECK(nccl_timeout_from_env() == 2.5);
  }
  for (const char* bad : {"0", "-1", "soon", "10s", "inf"}) {
    ScopedEnv env("FSDPC_NCCL_TIMEOUT_S", bad);
    CHECK_THROWS_AS(nccl_timeout_from_env(), Error);
    CHECK_THROWS_WITH(nccl_timeout_from_env(), Contains("FSDPC_NCCL_TIMEOUT_S") && Contains(bad));
  }
}
