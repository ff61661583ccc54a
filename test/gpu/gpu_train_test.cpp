// gpt2-tiny trained on one GPU against the same run on the CPU: the CUDA
// kernels, cuBLASLt, the device backend (optimizer, clipping) and the
// runtime on a device give the CPU's losses to 1e-4 relative over 10 AdamW
// steps (f32, TF32 off). Two ranks over NCCL: gpu_nccl_train_test.cpp.
#include <catch2/catch.hpp>
#include <vector>

#include "train_losses.h"

using namespace fsdpc::gpu_test;

TEST_CASE("gpt2-tiny on one GPU matches the CPU's losses to 1e-4", "[gpu][train]") {
  const std::vector<double> cpu = train("", "--executor cpu", "cpu");
  const std::vector<double> gpu = train("", "--executor cuda", "cuda");
  CHECK(cpu.back() < cpu.front());
  check_losses(gpu, cpu, 1e-4);
}
