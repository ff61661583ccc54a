// all_gather and reduce_scatter along dims 0, 1 and 2 over NCCL on two
// GPUs under mpirun: the device's staging (cudaMemcpy2DAsync from
// nccl_staging.h's plans, scratch from CudaContext::scratch) gives what the
// host emulation gives, which test/nccl_staging_test.cpp checks against the
// collectives' definitions and the MPI executor on the CPU. Needs two
// devices (built with FSDPC_GPU_TEST_DEVICES=2; gpu_test_main.cpp skips
// otherwise).
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_paths.h"
#include "executors/comm/mpi_world.h"
#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_check.h"
#include "executors/cuda/device.h"
#include "test/collective_samples.h"
#include "test/nccl_staging_samples.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

int local_rank_from_launcher() {
  const char* r = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!r) r = std::getenv("MPI_LOCALRANKID");
  return r ? std::atoi(r) : 0;
}

// One staged case on this rank's GPU: issue, wait into a separate buffer,
// copy back (through the context's polling wait).
Floats run_case(NcclContext& ctx, const StagedCase& k, int rank) {
  Attrs attrs = collective_attrs(k.op);
  attrs.set("dim", k.dim);
  const Trace t = collective_trace(k.op, tensor_on(k.shape, DType::f32, DeviceKind::cuda), attrs);
  const BoundSymbol& issue = t.bsyms[0];
  const BoundSymbol& wait = t.bsyms[1];
  const Floats x = input_of(rank, prod(k.shape, 0, k.shape.size()));
  const size_t in_bytes = x.size() * sizeof(float);
  const size_t out_bytes = static_cast<size_t>(numel(issue.output().type.shape)) * sizeof(float);
  void *dx = nullptr, *future = nullptr, *result = nullptr;
  FSDPC_CUDA_CHECK(cudaMalloc(&dx, in_bytes));
  FSDPC_CUDA_CHECK(cudaMalloc(&future, out_bytes));
  FSDPC_CUDA_CHECK(cudaMalloc(&result, out_bytes));
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(dx, x.data(), in_bytes, cudaMemcpyHostToDevice, ctx.compute()));
  const Executor& nccl = nccl_executor();
  nccl.kernel(issue.op)(ctx, issue, {{dx, &t.args[0].type}}, {{future, &issue.output().type}});
  nccl.kernel(wait.op)(ctx, wait, {{future, &issue.output().type}}, {{result, &wait.output().type}});
  Floats out(out_bytes / sizeof(float));
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(out.data(), result, out_bytes, cudaMemcpyDeviceToHost, ctx.compute()));
  ctx.synchronize_with_timeout(60);
  for (void* p : {dx, future, result}) {
    ctx.before_free();
    FSDPC_CUDA_CHECK(cudaFree(p));
  }
  return out;
}

}  // namespace

// Run by the next case under mpirun (hidden from the suite). Checks use
// CHECK, never REQUIRE, so every rank makes the same NCCL calls.
TEST_CASE("NCCL gathers and reduce-scatters along every dim on this rank", "[.nccl_dim_helper]") {
  mpi_init();
  const int rank = mpi_world_rank();
  const cuda::DeviceChoice device = cuda::select_device(cuda::query_devices().count, local_rank_from_launcher(), 2);
  REQUIRE(device.device >= 0);
  cuda::CudaOptions options;
  options.device = device.device;
  NcclContext ctx(flat_mesh(2), options);
  for (const StagedCase& k : kStagedCases) {
    const std::vector<Floats> xs = {input_of(0, prod(k.shape, 0, 3)), input_of(1, prod(k.shape, 0, 3))};
    const Floats want = k.op == OpId::AllGather ? nccl_all_gather(xs, k.shape, static_cast<size_t>(k.dim))
                                                : nccl_reduce_scatter(xs, k.shape, static_cast<size_t>(k.dim), rank);
    INFO("rank " << rank << ": " << op_name(k.op) << " of " << shape_str(k.shape) << " along dim " << k.dim);
    CHECK(run_case(ctx, k, rank) == want);
  }
  ctx.check_async_errors();
}

TEST_CASE("all_gather and reduce_scatter along dims 0, 1 and 2 on two GPUs over NCCL", "[gpu][nccl][mpi]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = fsdpc::gpu_test::mpiexec() + " -n 2 --allow-run-as-root '" + self +
                              "' '[.nccl_dim_helper]' --use-colour no 2>&1";
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  INFO(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
