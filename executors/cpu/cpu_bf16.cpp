// bf16 on the CPU outside oneDNN: the vectorised f32 <-> bf16 conversions,
// and run_in_f32(), which runs a kernel that computes in f32 on operands of
// which some are bf16. Under --precision bf16 the products run in bf16 on
// oneDNN (cpu_matmul.cpp, cpu_attention.cpp) and autocast sends every other
// forward op to f32, but autodiff hands bf16 cotangents to the backward's
// elementwise ops, reductions and recomputed softmax; those widen here, or
// load and store bf16 inside a fusion region (executors/fusion/). On a core
// without AVX-512, oneDNN (2.6) has no bf16 kernel at all, and the products
// widen here too: bf16 is then a storage format, computed in f32.
#include <algorithm>
#include <bit>
#include <vector>

#include "executors/cpu/cpu_kernels.h"

namespace fsdpc::cpu {

namespace {

// The conversions of executors/bf16.h, written so the loop vectorises: the
// NaN case is a select, not a branch.
FSDPC_CPU_CLONES void narrow_span(const float* __restrict x, uint16_t* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x0040u;
    y[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

FSDPC_CPU_CLONES void widen_span(const uint16_t* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16);
}

// Runs f(begin, end) over [0, n), in equal chunks per thread when large.
template <class F>
void over_threads(int64_t n, const F& f) {
  constexpr int64_t kChunk = int64_t{1} << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  FSDPC_CPU_PARALLEL_FOR(n)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// f32 copies of bf16 operands, kept per thread and reused, so a training
// step does not fault in fresh pages on every widened kernel.
std::vector<float>& widened_buffer(size_t slot) {
  thread_local std::vector<std::vector<float>> buffers;
  if (buffers.size() <= slot) buffers.resize(slot + 1);
  return buffers[slot];
}

}  // namespace

void widen_bf16(const uint16_t* x, float* y, int64_t n) {
  over_threads(n, [&](int64_t b, int64_t e) { widen_span(x + b, y + b, e - b); });
}

void narrow_to_bf16(const float* x, uint16_t* y, int64_t n) {
  over_threads(n, [&](int64_t b, int64_t e) { narrow_span(x + b, y + b, e - b); });
}

void run_in_f32(const Views& in, const Views& out, const std::function<void(const Views&, const Views&)>& f) {
  auto is_bf16 = [](const TensorView& v) { return v.type && v.type->dtype == DType::bf16; };
  if (!any_bf16(in, out)) return f(in, out);
  // The f32 types the kernel sees; reserved so the views' pointers stay put.
  std::vector<TensorType> types;
  types.reserve(in.size() + out.size());
  auto as_f32 = [&](const TensorView& v, size_t slot) {
    types.push_back(*v.type);
    types.back().dtype = DType::f32;
    std::vector<float>& buf = widened_buffer(slot);
    const int64_t n = count_of(v);
    if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
    return TensorView{buf.data(), &types.back()};
  };
  Views in32 = in, out32 = out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_bf16(in[i])) continue;
    in32[i] = as_f32(in[i], i);
    widen_bf16(cdata<uint16_t>(in[i]), mdata<float>(in32[i]), count_of(in[i]));
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (is_bf16(out[i])) out32[i] = as_f32(out[i], in.size() + i);
  f(in32, out32);
  for (size_t i = 0; i < out.size(); ++i)
    if (is_bf16(out[i])) narrow_to_bf16(cdata<float>(out32[i]), mdata<uint16_t>(out[i]), count_of(out[i]));
}

}  // namespace fsdpc::cpu
