// The fused head's row kernels (linear_cross_entropy.h): per row of a chunk
// of f32 logits, the log-sum-exp statistics of max_rest.cuh (as
// cross_entropy.cu keeps them), then the row's loss, its slice statistics,
// or its cotangent written in place. A warp per short row when there are
// many, else a block (nn_plan.h). No float atomics: every sum has a fixed
// order, so a loss and its gradients are the same run to run.
//
// Rounding matches the decomposition: with bf16 operands each logit is
// rounded to bf16 as it is read (the bf16 linear's output), the statistics
// and the cotangent are f32 (the loss's dtype), and a bf16 cotangent is
// rounded once as written (the cast linear's rule reads).
#include "executors/cuda/kernels/linear_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/kernels/device_util.cuh"
#include "executors/cuda/kernels/max_rest.cuh"
#include "executors/cuda/kernels/ordered_mean.cuh"
#include "executors/cuda/launch.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

__device__ __forceinline__ int64_t index_at(const HeadIndex& ix, int64_t i) {
  return ix.i64 ? static_cast<const int64_t*>(ix.data)[i] : static_cast<const int32_t*>(ix.data)[i];
}

// Logit j of a row, as the decomposition holds it.
__device__ __forceinline__ float logit(const float* z, int64_t j, bool round_bf16) {
  const float x = z[j];
  return round_bf16 ? to_f32(from_f32<__nv_bfloat16>(x)) : x;
}

__device__ __forceinline__ void store(const HeadOut& o, int64_t i, float x) {
  if (o.bf16)
    static_cast<__nv_bfloat16*>(o.data)[i] = from_f32<__nv_bfloat16>(x);
  else
    static_cast<float*>(o.data)[i] = x;
}

// The row's statistics over its columns [0, real), which every member of
// the row's group gets. The group reads them all before the reduction
// returns, so a caller may then overwrite the row (in place).
template <bool kWarpRows>
__device__ MaxRest row_max_rest(const float* z, int64_t real, bool round_bf16, const RowCursor& cur) {
  MaxRest acc{-INFINITY, 0.0f};
  for (int64_t j = cur.rank; j < real; j += cur.size) acc = push_max_rest(acc, logit(z, j, round_bf16));
  if constexpr (kWarpRows)
    return warp_reduce(acc, MergeMaxRest{});
  else
    return block_reduce(acc, MergeMaxRest{}, MaxRest{-INFINITY, 0.0f});
}

// The slice's real columns: those of classes below vocab, from the
// device's offset (uniform over the launch).
__device__ __forceinline__ int64_t real_columns(const HeadSlice& s, int64_t v) {
  const int64_t real = s.vocab - index_at(s.offset, 0);
  return real < 0 ? 0 : real > v ? v : real;
}

template <bool kWarpRows>
__global__ void losses_kernel(HeadChunk c, double* __restrict__ losses) {
  const RowCursor cur = row_cursor<kWarpRows>();
  for (int64_t r = cur.first; r < c.n; r += cur.step) {
    const float* z = c.z + r * c.v;
    const MaxRest s = row_max_rest<kWarpRows>(z, c.v, c.round_bf16, cur);
    if (cur.rank == 0) {
      const int64_t t = index_at(c.targets, r);
      // In f64 as the CPU adds them: log1p(rest) + (max - picked).
      losses[r] = t >= 0 && t < c.v ? log1p(static_cast<double>(s.r)) +
                                          (static_cast<double>(s.m) - logit(z, t, c.round_bf16))
                                    : NAN;
    }
  }
}

// dz may be z itself: a thread writes only the elements it read, after the
// reduction that ends every read of the first pass.
template <bool kWarpRows>
__global__ void softmax_grad_kernel(HeadChunk c, const float* __restrict__ g, int64_t rows, HeadOut dz) {
  // The decomposition's g / rows, an f32 division.
  const float scale = g[0] / static_cast<float>(rows);
  const RowCursor cur = row_cursor<kWarpRows>();
  for (int64_t r = cur.first; r < c.n; r += cur.step) {
    const float* z = c.z + r * c.v;
    const MaxRest s = row_max_rest<kWarpRows>(z, c.v, c.round_bf16, cur);
    const int64_t t = index_at(c.targets, r);
    const bool valid = t >= 0 && t < c.v;
    const float sum = 1.0f + s.r;
    for (int64_t j = cur.rank; j < c.v; j += cur.size) {
      const float p = expf(logit(z, j, c.round_bf16) - s.m) / sum;
      store(dz, r * c.v + j, valid ? (j == t ? p - 1.0f : p) * scale : NAN);
    }
  }
}

template <bool kWarpRows>
__global__ void slice_stats_kernel(HeadChunk c, HeadSlice sl, float* __restrict__ lse, float* __restrict__ tl) {
  const int64_t real = real_columns(sl, c.v);
  const int64_t offset = index_at(sl.offset, 0);
  const RowCursor cur = row_cursor<kWarpRows>();
  for (int64_t r = cur.first; r < c.n; r += cur.step) {
    const float* z = c.z + r * c.v;
    // No real column: m = -inf, rest 0, so lse = -inf.
    const MaxRest s = row_max_rest<kWarpRows>(z, real, c.round_bf16, cur);
    if (cur.rank == 0) {
      const int64_t t = index_at(c.targets, r), col = t - offset;
      const bool valid = t >= 0 && t < sl.vocab;
      lse[r] = valid ? static_cast<float>(static_cast<double>(s.m) + log1p(static_cast<double>(s.r))) : NAN;
      tl[r] = !valid ? NAN : col >= 0 && col < c.v ? logit(z, col, c.round_bf16) : 0.0f;
    }
  }
}

// No reduction: each row's members write their columns. dz may be z.
template <bool kWarpRows>
__global__ void slice_grad_kernel(HeadChunk c, HeadSlice sl, const float* __restrict__ lse,
                                  const float* __restrict__ dlse, const float* __restrict__ dtl, HeadOut dz) {
  const int64_t real = real_columns(sl, c.v);
  const int64_t offset = index_at(sl.offset, 0);
  const RowCursor cur = row_cursor<kWarpRows>();
  for (int64_t r = cur.first; r < c.n; r += cur.step) {
    const float* z = c.z + r * c.v;
    const int64_t t = index_at(c.targets, r), col = t - offset;
    const bool valid = t >= 0 && t < sl.vocab;
    const float l = lse[r], d = dlse[r], dt = dtl[r];
    for (int64_t j = cur.rank; j < c.v; j += cur.size) {
      // The padding's 0 is not exp(z - lse) * d: with no real class lse is
      // -inf and that would be inf (or NaN).
      float x = j < real ? expf(logit(z, j, c.round_bf16) - l) * d : 0.0f;
      if (j == col) x += dt;
      store(dz, r * c.v + j, valid ? x : NAN);
    }
  }
}

// Launches kernel<true> (a warp per row) or kernel<false> (a block per row)
// over the chunk's rows, as plan_row_launch chooses.
template <class... Args>
void launch_rows_of(const HeadChunk& c, void (*warp_kernel)(HeadChunk, Args...),
                    void (*block_kernel)(HeadChunk, Args...), cudaStream_t stream, std::type_identity_t<Args>... args) {
  FSDPC_CHECK(c.n >= 0 && c.v >= 0) << "fused head: a chunk of " << c.n << "x" << c.v << " logits";
  // No classes: the kernels still visit every row (each target is out of range).
  const RowLaunch r = plan_row_launch(c.n, std::max<int64_t>(c.v, 1));
  if (r.launch.grid == 0) return;
  if (r.warp_per_row)
    warp_kernel<<<r.launch.grid, r.launch.block, 0, stream>>>(c, args...);
  else
    block_kernel<<<r.launch.grid, r.launch.block, 0, stream>>>(c, args...);
  FSDPC_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_head_losses(const HeadChunk& c, double* losses, cudaStream_t stream) {
  launch_rows_of(c, losses_kernel<true>, losses_kernel<false>, stream, losses);
}

void launch_head_mean(const double* losses, int64_t rows, float* out, cudaStream_t stream) {
  FSDPC_CHECK(rows >= 0) << "fused head: the mean of " << rows << " rows";
  ordered_mean_kernel<double, float><<<1, kOrderedMeanBlock, 0, stream>>>(losses, out, rows);
  FSDPC_CUDA_CHECK_LAUNCH();
}

void launch_head_softmax_grad(const HeadChunk& c, const float* g, int64_t rows, const HeadOut& dz,
                              cudaStream_t stream) {
  launch_rows_of(c, softmax_grad_kernel<true>, softmax_grad_kernel<false>, stream, g, rows, dz);
}

void launch_head_slice_stats(const HeadChunk& c, const HeadSlice& s, float* lse, float* tl, cudaStream_t stream) {
  launch_rows_of(c, slice_stats_kernel<true>, slice_stats_kernel<false>, stream, s, lse, tl);
}

void launch_head_slice_grad(const HeadChunk& c, const HeadSlice& s, const float* lse, const float* dlse,
                            const float* dtl, const HeadOut& dz, cudaStream_t stream) {
  launch_rows_of(c, slice_grad_kernel<true>, slice_grad_kernel<false>, stream, s, lse, dlse, dtl, dz);
}

}  // namespace fsdpc::cuda
