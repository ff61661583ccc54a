// open_rank_device: the CPU's here, the CUDA one in executors/cuda/.
#include "executors/rank_device.h"

#include "executors/comm/mpi_executor.h"
#include "ir/error.h"
#ifdef FSDPC_HAVE_CUDA
#include "executors/cuda/cuda_rank_device.h"
#endif

namespace fsdpc {

namespace {

class CpuRankDevice final : public RankDevice {
 public:
  explicit CpuRankDevice(MpiContext& mpi) : mpi_(mpi) {}
  KernelContext& kernels() override { return mpi_; }
  DeviceBackend& backend() override { return cpu_backend(); }
  void progress() override { mpi_.progress(); }

 private:
  MpiContext& mpi_;
};

}  // namespace

std::unique_ptr<RankDevice> open_rank_device(Target target, MpiContext& mpi) {
  switch (target) {
    case Target::cpu: return std::make_unique<CpuRankDevice>(mpi);
    case Target::cuda:
#ifdef FSDPC_HAVE_CUDA
      return cuda::open_cuda_rank_device(mpi.groups().mesh());
#else
      fail("--executor cuda: no such device in this build (cpu; built without CUDA)");
#endif
  }
  fail("open_rank_device: target ", static_cast<int>(target), " is not a Target");
}

}  // namespace fsdpc
