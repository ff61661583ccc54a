// main() of the tests that need a GPU (CTest label `gpu`): without a visible
// CUDA device they print why and exit with 77, which CTest reports as
// skipped (SKIP_RETURN_CODE), never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "executors/cuda/device.h"

int main(int argc, char** argv) {
  const fsdpc::cuda::DeviceQuery q = fsdpc::cuda::query_devices();
  if (q.count == 0) {
    std::printf("SKIPPED: this test needs a CUDA device, and none is visible: %s\n", q.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
