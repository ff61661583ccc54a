// The fused language-model head's chunk machinery, shared by its kernels:
// linear_cross_entropy and its gradient (cpu_linear_cross_entropy.cpp, the
// whole vocabulary) and linear_cross_entropy_stats and its gradient
// (cpu_linear_cross_entropy_stats.cpp, one tensor-parallel rank's slice).
// Each holds one [chunk, V] block of f32 logits at a time, h[r0:r0+n] wᵀ
// by one oneDNN gemm; the backwards turn the block into the logits'
// cotangent in place and add its products into dh and dw.
//
// Their scratch is one block (head_scratch), taken from
// KernelContext::scratch_pool, the rank's allocator, so that the memory plan
// counts it: CpuExecutor::scratch_bytes sizes it with the same function.
// Private to executors/cpu/.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "executors/cpu/cpu_dnnl.h"
#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

// The products' dtype: bf16 where h and w are bf16 and oneDNN has bf16
// kernels, else f32 (bf16 operands widened first, run_in_f32).
DType head_product_dtype(DType h);

// Where the scratch's parts lie (bytes from its start, each 64-byte
// aligned): the [chunk, V] f32 logits; for a backward with bf16 products
// their bf16 copy (the cotangent the products read) and, when dw is
// narrower than f32, dw's f32 accumulator.
struct HeadScratch {
  int64_t chunk = 0;  // rows of logits a block holds
  int64_t zb_at = 0, dw_at = 0, bytes = 0;
};

// For the head op `b` over h [..., C] and w [V, C]: `chunk` rows when the
// attribute is set, else as many as 32 MiB of f32 logits hold.
HeadScratch head_scratch(const BoundSymbol& b, const TensorType& h, const TensorType& w);

// The block itself: from the pool while the runtime runs the kernel,
// else (kernel tests) a per-thread buffer.
class ScratchBlock {
 public:
  ScratchBlock(const KernelContext& ctx, int64_t bytes);
  char* data() const { return data_; }

 private:
  std::shared_ptr<void> held_;
  char* data_ = nullptr;
};

// The head's operands as the kernels read them: h [rows, C] and w [V, C],
// both f32 or both bf16 (`dt`); `bf16_values`: round what the decomposition
// holds in bf16 (true for bf16, also when widened to f32 here); targets
// checked against `classes`.
struct HeadOperands {
  const char* h;
  const void* w;
  int64_t rows, c, v;
  DType dt;
  bool bf16_values;
  std::vector<int64_t> targets;

  HeadOperands(const BoundSymbol& b, const Views& in, bool bf16, int64_t classes);
  const void* h_rows(int64_t r0) const { return h + r0 * c * static_cast<int64_t>(dtype_size(dt)); }
  // z [n, V] = h[r0:r0+n] wᵀ in f32, rounded as bf16 logits when they are.
  void logits(int64_t r0, int64_t n, float* z) const;
};

// Runs body(in, out, bf16_values) on views oneDNN's products take: as they
// are (f32, or bf16 where oneDNN has bf16 kernels), else widened to f32.
template <class Body>
void with_products(const BoundSymbol& b, const Views& in, const Views& out, Body&& body) {
  const DType d = product_dtype(b, {{in[0], "h"}, {in[1], "w"}});
  if (d == DType::bf16 && !bf16_products_native())
    return run_in_f32(in, out, [&](const Views& in32, const Views& out32) { body(in32, out32, true); });
  body(in, out, d == DType::bf16);
}

// Per row of a block z [n, stride] over its first `real` columns: m, the
// max; rest, sum(exp(z - m)) - 1 (m's own term, exp(0), exact: log1p(rest)
// keeps a small loss to f32 precision, as cross_entropy's row_losses); the
// logit at column cols[r] (0 where cols[r] < 0). z is left holding
// exp(z - m) there and 0 past `real`. With no real column, m is -inf and
// rest -1, so m + log1p(rest) is -inf.
struct RowStats {
  float max;
  double rest;
  float picked;
};
void row_stats(float* z, int64_t n, int64_t stride, int64_t real, const int64_t* cols, RowStats* out);

// The backward over the chunks: each block of logits (f32) is made the
// logits' cotangent in place by to_dz(z, r0, n), then dh's rows = dz w and
// dw (+)= dzᵀ h's rows, in the products' dtype (the bf16 cotangent linear's
// rule multiplies), dw accumulated in f32.
void head_backward(const HeadOperands& hd, const HeadScratch& s, char* scratch, const TensorView& dh,
                   const TensorView& dw, const std::function<void(float* z, int64_t r0, int64_t n)>& to_dz);

}  // namespace fsdpc::cpu
