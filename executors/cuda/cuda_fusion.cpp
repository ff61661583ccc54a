// fusion_kernel(): describe the region, find its CUBIN for this device's
// architecture, load it once per process (a cudaLibrary_t is not tied to a
// device: the runtime loads it into each device's context as it is used),
// and launch it with the pointers of the statement's inputs and outputs.
#include "executors/cuda/cuda_fusion.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <unordered_map>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/fusion/nvrtc_compiler.h"
#include "executors/fusion/region.h"
#include "ir/error.h"
#include "ir/scalar_expr.h"

namespace fsdpc::cuda {

namespace {

// sm_<major><minor> of `device`, asked once.
int arch_of(int device) {
  static std::mutex mu;
  static std::unordered_map<int, int> arch;
  std::lock_guard<std::mutex> lock(mu);
  auto it = arch.find(device);
  if (it != arch.end()) return it->second;
  int major = 0, minor = 0;
  FSDPC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FSDPC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return arch.emplace(device, major * 10 + minor).first->second;
}

// The binary's kernel, its library loaded on first use and kept for the
// life of the process (the binary itself lives as long).
cudaKernel_t kernel_of(const fusion::CudaBinary& bin) {
  static std::mutex mu;
  static std::unordered_map<const fusion::CudaBinary*, cudaKernel_t> kernels;
  std::lock_guard<std::mutex> lock(mu);
  auto it = kernels.find(&bin);
  if (it != kernels.end()) return it->second;
  cudaLibrary_t lib = nullptr;
  FSDPC_CUDA_CHECK(cudaLibraryLoadData(&lib, bin.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t k = nullptr;
  FSDPC_CUDA_CHECK(cudaLibraryGetKernel(&k, lib, bin.kernel.c_str()));
  return kernels.emplace(&bin, k).first->second;
}

}  // namespace

void fusion_kernel(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                   const std::vector<TensorView>& out) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].type) fail("cuda_fusion: input ", i, " of a region is a scalar literal; literals stay inside");
    types.push_back(*in[i].type);
  }
  const fusion::Region region = fusion::describe_region(b, types);
  if (region.rows() == 0) return;
  CudaContext& c = cuda_context(ctx);
  const fusion::CudaBinary& bin = fusion::cuda_binary(region, arch_of(c.device()));
  if (bin.grid == 0) return;  // no elements and no row values
  FSDPC_CHECK(static_cast<size_t>(bin.inputs) <= in.size() && region.outputs.size() == out.size())
      << "cuda_fusion: the kernel's parameters do not match the statement";
  // cudaLaunchKernel takes the address of each parameter's value.
  std::vector<const void*> ptrs;
  for (int i = 0; i < bin.inputs; ++i) ptrs.push_back(in[static_cast<size_t>(i)].data);
  for (const TensorView& v : out) ptrs.push_back(v.data);
  std::vector<void*> args;
  for (const void*& p : ptrs) args.push_back(&p);
  // A cudaKernel_t passed as the function is used as is (cudaLaunchKernel's docs).
  FSDPC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_of(bin)),
                                    dim3(static_cast<unsigned>(bin.grid)), dim3(static_cast<unsigned>(bin.block)),
                                    args.data(), 0, c.compute()));
}

void expr_kernel(KernelContext& ctx, const BoundSymbol& b, const std::vector<TensorView>& in,
                 const std::vector<TensorView>& out) {
  std::vector<const TensorType*> types;
  for (const TensorView& v : in) types.push_back(v.type);
  const fusion::FlatStatement flat = fusion::flat_statement(b, types);
  std::vector<TensorView> views;
  for (size_t k = 0; k < flat.tensor_inputs.size(); ++k) views.push_back({in[flat.tensor_inputs[k]].data, &flat.input_types[k]});
  std::vector<TensorView> outs = {{out[0].data, &flat.fusion.outputs[0].type}};
  fusion_kernel(ctx, flat.fusion, views, outs);
}

}  // namespace fsdpc::cuda
