// NVRTC for the CUDA fusion executor: a region's CUDA source
// (cuda_codegen.h) compiled at run time to a CUBIN for one GPU architecture.
// NVRTC needs no GPU, so the CUBINs of every region are compile-checked on
// any machine with the CUDA toolkit (test/cuda_fusion_nvrtc_test.cpp).
// Built only with the CUDA executor (FSDPC_HAVE_CUDA): it links libnvrtc.
//
// Compiled code is cached per region signature and architecture in the
// process and, with FSDPC_JIT_CACHE=DIR, on disk (<kernel>_sm<arch>.cubin
// beside its .key: the generator's version, NVRTC's, the options and the
// signature), as the CPU JIT caches its objects (jit_cache.h).
#pragma once

#include <cstdint>
#include <string>

#include "executors/fusion/region.h"

namespace fsdpc::fusion {

struct CudaBinary {
  std::string kernel;  // the extern "C" function to launch
  std::string cubin;   // the image, for cuModuleLoadData
  int arch = 0;        // 80 for sm_80
  int inputs = 0;      // input pointers it takes before the outputs'
  int block = 0;       // threads per block it was generated for
  int64_t grid = 0;    // blocks
};

// The region's binary for sm_<arch>: from the process cache, the disk
// cache, or NVRTC. Thread-safe; the reference stays valid for the life of
// the process. An NVRTC failure is an fsdpc::Error that holds the call,
// NVRTC's message and the compile log.
const CudaBinary& cuda_binary(const Region& region, int arch);

// NVRTC alone: `source` compiled to a CUBIN for sm_<arch>.
std::string nvrtc_cubin(const std::string& source, const std::string& name, int arch);

// "13.0": the NVRTC library this process loaded (part of the cache key).
std::string nvrtc_version();

struct NvrtcStats {
  int64_t compiled = 0;   // distinct (signature, arch) pairs compiled or loaded
  int64_t from_disk = 0;  // of those, loaded from FSDPC_JIT_CACHE
  int64_t hits = 0;       // lookups that found their binary in the process
  double compile_s = 0;   // wall time spent generating and compiling
};
NvrtcStats nvrtc_stats();

}  // namespace fsdpc::fusion
