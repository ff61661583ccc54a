// The NCCL executor's kernels in a world of one on cuda:0: every collective
// issued and waited on the device, and a group size the communicator does not
// have refused. Its host-side logic is checked without a GPU in
// test/nccl_executor_test.cpp. Needs a device (gpu_test_main.cpp skips without one).
#include <catch2/catch.hpp>

#include <vector>

#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_check.h"
#include "ir/builder.h"
#include "test/collective_samples.h"

using namespace fsdpc;
using Catch::Contains;
using test::collective_attrs;
using test::collective_trace;

namespace {

TensorType f32_on_gpu(Shape shape) { return test::tensor_on(std::move(shape), DType::f32, DeviceKind::cuda); }

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

// Runs op(x) -> wait on the device, the wait into a separate buffer, and
// returns what the wait wrote.
std::vector<float> run_one(NcclContext& ctx, OpId op, const Shape& shape, Attrs attrs) {
  const Trace t = collective_trace(op, f32_on_gpu(shape), std::move(attrs));
  const std::vector<float> host = iota_floats(numel(shape));
  const size_t bytes = host.size() * sizeof(float);
  void *x = nullptr, *future = nullptr, *result = nullptr;
  FSDPC_CUDA_CHECK(cudaMalloc(&x, bytes));
  FSDPC_CUDA_CHECK(cudaMalloc(&future, bytes));
  FSDPC_CUDA_CHECK(cudaMalloc(&result, bytes));
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(x, host.data(), bytes, cudaMemcpyHostToDevice, ctx.compute()));
  const Executor& nccl = nccl_executor();
  const BoundSymbol& issue = t.bsyms[0];
  const BoundSymbol& wait = t.bsyms[1];
  nccl.kernel(issue.op)(ctx, issue, {{x, &t.args[0].type}}, {{future, &issue.output().type}});
  CHECK(ctx.pending() == 1);
  nccl.kernel(wait.op)(ctx, wait, {{future, &issue.output().type}}, {{result, &wait.output().type}});
  CHECK(ctx.pending() == 0);
  std::vector<float> out(host.size());
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(out.data(), result, bytes, cudaMemcpyDeviceToHost, ctx.compute()));
  ctx.synchronize_with_timeout(60);
  for (void* p : {x, future, result}) FSDPC_CUDA_CHECK(cudaFree(p));
  return out;
}

}  // namespace

TEST_CASE("nccl: a world of one runs every collective on the device", "[gpu][nccl]") {
  NcclContext ctx(flat_mesh(1));
  const std::vector<float> want = iota_floats(12);
  auto with_size = [](OpId op, int64_t dim) {
    Attrs a = collective_attrs(op);
    a.set("size", int64_t{1});
    if (a.has("dim")) a.set("dim", dim);
    return a;
  };
  CHECK(run_one(ctx, OpId::AllGather, {3, 4}, with_size(OpId::AllGather, 0)) == want);
  CHECK(run_one(ctx, OpId::AllGather, {3, 4}, with_size(OpId::AllGather, 1)) == want);  // via scratch
  CHECK(run_one(ctx, OpId::ReduceScatter, {3, 4}, with_size(OpId::ReduceScatter, 1)) == want);
  CHECK(run_one(ctx, OpId::AllReduce, {3, 4}, with_size(OpId::AllReduce, 0)) == want);
  CHECK(run_one(ctx, OpId::Broadcast, {3, 4}, with_size(OpId::Broadcast, 0)) == want);
  CHECK_THROWS_WITH(run_one(ctx, OpId::AllReduce, {3, 4}, collective_attrs(OpId::AllReduce)),
                    Contains("size=2") && Contains("1 ranks"));
  ctx.check_async_errors();
}
