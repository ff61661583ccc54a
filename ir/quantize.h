// The int8 format of quantize and dequantize (ir/ops.def), the one place it
// is defined. Each row (the last dimension) of n values is cut into blocks
// of `block` values, the last possibly shorter; a block's scale s is
// max|x| / 127 rounded toward zero to f32 (so that 127 s never exceeds
// max|x|: no code times its scale overflows, even at f32's largest value),
// and each value becomes the integer code nearest x / s (ties to even),
// clamped to [-127, 127], so that code * s is within s / 2 of x. A
// quantized row is its n codes followed by its ceil(n / block) scales, each
// an f32 as four little-endian bytes: codes and scales travel as one i8
// buffer, so one collective moves a quantized tensor and every pass that
// counts, buckets or schedules collectives sees it as any other value.
// The range is symmetric (no -128) so that 0 is exact and -x codes as
// -code(x). A block of zeros has scale 0 and codes 0. Non-finite values
// have no code: the kernels refuse them.
#pragma once

#include <cstdint>
#include <optional>

namespace fsdpc {

inline constexpr int kQuantLevels = 127;

// The block the compiler's passes quantize with (outer_step, quantize_gathers):
// 256 values per f32 scale, 1.6% of an int8 row's bytes, as bitsandbytes'
// blockwise quantization uses; a smaller block follows outliers more closely
// at more bytes, a larger one the reverse.
inline constexpr int64_t kQuantBlock = 256;

// A block's scale from its largest magnitude (finite, >= 0).
float quantize_scale(float amax);

// Bytes of a quantized row of n values: n + 4 * ceil(n / block).
int64_t quantized_row_bytes(int64_t n, int64_t block);

// The n whose quantized row has `bytes` bytes, if one does.
std::optional<int64_t> dequantized_row_size(int64_t bytes, int64_t block);

// The largest error |dequantize(quantize(x)) - x| over a block whose largest
// magnitude is `amax`: half a step of the scale, plus the f32 rounding of
// the scale and of code * scale (a few units in the last place of amax),
// plus 127 smallest normal f32s, for a block so small that its scale is
// subnormal (or flushed to zero, where the CPU flushes subnormals).
double quantize_error_bound(double amax);

}  // namespace fsdpc
