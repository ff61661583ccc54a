// The CUDA fusion executor's code generator: a Region (region.h) as CUDA C++
// source for NVRTC (nvrtc_compiler.h), one __global__ function per region.
// Host-only string building: it needs no CUDA toolkit, so it is built and
// tested everywhere.
//
// A region with a reduction (a sum or amax over the row) runs one row per
// block (a grid-stride loop over rows): each thread folds a strided slice of
// the row, the block combines the slices with warp shuffles and one shared
// word per warp, in a fixed order, so results do not depend on timing. Row
// values are computed by every thread (they are uniform), element outputs
// by a last loop over the row; element steps are recomputed in each loop
// that needs them, as the CPU lowering does. A region without row values is
// one grid-stride loop over its elements. Sums accumulate in f64 and f32
// arithmetic on a value derived from one stays in f64 until it is stored,
// the formulation of the CPU lowering (llvm_lowering.cpp) and of the CUDA
// executor's reduce and layer_norm kernels. Each step's arithmetic is its
// op's scalar expression (ir/scalar_exprs.def), translated prim by prim.
#pragma once

#include <cstdint>
#include <string>

#include "executors/fusion/region.h"

namespace fsdpc::fusion {

struct CudaKernelSource {
  std::string name;    // the extern "C" kernel's name, from the signature's hash
  std::string source;  // the whole translation unit (no #include)
  int inputs = 0;      // input pointer parameters (the statement's inputs up to the last one loaded)
  int block = 0;       // threads per block (a multiple of 32)
  int64_t grid = 0;    // blocks (0 for an empty region: nothing to launch)
};

// The kernel takes the fusion statement's inputs, in order, as `const T*`,
// then its outputs as `T*` (bool as one byte per element, bf16 as its 16
// bits, `unsigned short`); shapes are compiled in.
CudaKernelSource cuda_source(const Region& region);

// What the generated code depends on besides the region: bump it when the
// generator changes, so cached CUBINs of the old generator are not reused.
inline constexpr const char* kCudaCodegenVersion = "fsdpc-cuda-fusion-2";  // 2: bf16 loads and stores

}  // namespace fsdpc::fusion
