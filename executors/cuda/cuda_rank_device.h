// The CUDA RankDevice (executors/rank_device.h): the rank's GPU, its NCCL
// context and its backend.
#pragma once

#include <memory>

#include "executors/rank_device.h"
#include "ir/mesh.h"

namespace fsdpc::cuda {

// The GPU is the rank's local rank on its node (MPI_COMM_TYPE_SHARED), as
// torchrun's LOCAL_RANK is used; more ranks on a node than visible GPUs is
// an fsdpc::Error. FSDPC_CUDA_TF32=1 allows TF32 matmuls. Collective over
// the world.
std::unique_ptr<RankDevice> open_cuda_rank_device(const Mesh& mesh);

}  // namespace fsdpc::cuda
