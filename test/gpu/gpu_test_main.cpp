// main() of the tests that need a GPU (CTest label `gpu`): without the
// FSDPC_GPU_TEST_DEVICES (default 1) CUDA devices a test needs, or without
// any NVIDIA driver, they print why and exit with 77, which CTest reports
// as skipped (SKIP_RETURN_CODE), never as passed. Any other start-up failure
// (a driver too old for this CUDA runtime) fails with the driver's error
// (gpu_test_verdict, executors/cuda/device.h). A run of every case must also have compared every op
// the executable declared (kernel_harness.h's ComparesOps).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "executors/cuda/device.h"
#include "ir/ops.h"
#include "kernel_harness.h"

#ifndef FSDPC_GPU_TEST_DEVICES
#define FSDPC_GPU_TEST_DEVICES 1
#endif

namespace {

// Fails (1) when an op was declared but not compared, or compared but not declared.
int check_kernel_coverage() {
  const fsdpc::gpu_test::CoverageGap gap = fsdpc::gpu_test::coverage_gap();
  for (fsdpc::OpId op : gap.uncompared)
    std::printf("kernel coverage: %s is declared (kernel_coverage.h) but no case compared it on the GPU\n",
                std::string(fsdpc::op_name(op)).c_str());
  for (fsdpc::OpId op : gap.undeclared)
    std::printf("kernel coverage: %s was compared but is not in this test's kernel_coverage.h list\n",
                std::string(fsdpc::op_name(op)).c_str());
  return gap.uncompared.empty() && gap.undeclared.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv)) return rc;
  const Catch::ConfigData& c = session.configData();
  const bool listing = c.listTests || c.listTags || c.listReporters || c.listTestNamesOnly || c.showHelp;
  const int needed = FSDPC_GPU_TEST_DEVICES;
  const fsdpc::cuda::GpuTestVerdict v = fsdpc::cuda::gpu_test_verdict(fsdpc::cuda::query_devices(), needed);
  if (!listing && v.kind != fsdpc::cuda::GpuTestVerdict::run) {
    std::printf("%s\n", v.message.c_str());
    return v.kind == fsdpc::cuda::GpuTestVerdict::skip ? 77 : 1;
  }
  const int rc = session.run();
  return rc == 0 && !listing && c.testsOrTags.empty() ? check_kernel_coverage() : rc;
}
