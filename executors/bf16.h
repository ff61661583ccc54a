// bfloat16 on the host: the upper 16 bits of an IEEE f32, held as uint16_t.
// What every host-side user of bf16 shares (the CPU kernels, the LLVM
// fusion lowering's semantics, MPI's bf16 reductions, the tests), so the
// rounding is written once: f32 -> bf16 rounds to nearest, ties to even
// (as PyTorch, oneDNN and CUDA's __float2bfloat16 do); a NaN stays a quiet
// NaN of the same sign; bf16 -> f32 is exact.
#pragma once

#include <bit>
#include <cstdint>

namespace fsdpc {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: keep it quiet
  // Adding 0x7fff, plus one when the kept part is odd, carries into bit 16
  // exactly when the dropped half is above the halfway point, or at it with
  // an odd kept part; a carry out of the mantissa rounds up to the next
  // binade (or to infinity), as IEEE rounding does.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f32 rounded through bf16: what storing a value in bf16 does to it.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

}  // namespace fsdpc
