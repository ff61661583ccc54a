// zero3 over NCCL, two ranks under mpirun with one GPU each, against one
// GPU: the same losses to 1e-4 over 10 AdamW steps of gpt2-tiny. Needs two
// devices (built with FSDPC_GPU_TEST_DEVICES=2; gpu_test_main.cpp skips otherwise).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "train_losses.h"

using namespace fsdpc::gpu_test;

TEST_CASE("zero3 over NCCL on two GPUs matches one GPU", "[gpu][train][nccl][mpi]") {
  const std::string mpirun = mpiexec() + " -n 2 --allow-run-as-root ";
  const std::vector<double> one = train("", "--executor cuda", "one");
  const std::vector<double> two = train(mpirun, "--executor cuda --strategy zero3", "two");
  check_losses(two, one, 1e-4);
}
