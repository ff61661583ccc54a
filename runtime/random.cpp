// Counter-based random numbers (see runtime/random.h).
#include "runtime/random.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fsdpc {

uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return splitmix64(h);
}

namespace {
// Radius and angle of Box–Muller pair k; u1 is taken in (0, 1] so log(u1)
// is finite.
void box_muller_pair(uint64_t key, int64_t k, double& radius, double& angle) {
  uint64_t c = 2 * static_cast<uint64_t>(k);
  double u1 = static_cast<double>((random_bits(key, c) >> 11) + 1) * 0x1.0p-53;
  double u2 = uniform01(random_bits(key, c + 1));
  radius = std::sqrt(-2.0 * std::log(u1));
  angle = 2.0 * std::numbers::pi * u2;
}

// Values are made a group of kPairs pairs (2 * kPairs positions) at a time,
// groups aligned on pair index 0, so a position's value is computed the same
// way whatever slice asks for it.
constexpr int64_t kPairs = 8;

// Positions 2*kPairs*g .. +2*kPairs of the stream, times std, with glibc's
// scalar log, cos and sin.
void group_scalar(uint64_t key, int64_t g, double std, double* out) {
  for (int64_t l = 0; l < kPairs; ++l) {
    double radius = 0, angle = 0;
    box_muller_pair(key, g * kPairs + l, radius, angle);
    out[2 * l] = std * radius * std::cos(angle);
    out[2 * l + 1] = std * radius * std::sin(angle);
  }
}

#if defined(__x86_64__)
// glibc's vector math library (libmvec, which libm's linker script pulls
// in): the AVX2 variants of log, cos and sin, 4 doubles a call, within 4 ulp
// of the exact value where the scalar functions are within 1. After the
// rounding to f32, 124M values checked against the scalar path were equal
// (init_test allows a rare one-ulp difference).
// Declared with their target, as clang requires of a function that takes a
// vector argument (the ABI differs without it).
extern "C" __attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_log(__m256d);
extern "C" __attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_cos(__m256d);
extern "C" __attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_sin(__m256d);

__attribute__((target("avx2,fma"))) void group_avx2(uint64_t key, int64_t g, double std, double* out) {
  alignas(32) double u1[kPairs], u2[kPairs], c[kPairs], s[kPairs];
  for (int64_t l = 0; l < kPairs; ++l) {
    const uint64_t k = 2 * static_cast<uint64_t>(g * kPairs + l);
    u1[l] = static_cast<double>(static_cast<int64_t>((random_bits(key, k) >> 11) + 1)) * 0x1.0p-53;
    u2[l] = static_cast<double>(static_cast<int64_t>(random_bits(key, k + 1) >> 11)) * 0x1.0p-53;
  }
  // The scalar path's operations in its order: sqrt(-2 log u1), (2 pi) u2,
  // (std * radius) * cos.
  for (int64_t h = 0; h < kPairs; h += 4) {
    const __m256d radius =
        _mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), _ZGVdN4v_log(_mm256_load_pd(u1 + h))));
    const __m256d angle = _mm256_mul_pd(_mm256_set1_pd(2.0 * std::numbers::pi), _mm256_load_pd(u2 + h));
    const __m256d scaled = _mm256_mul_pd(_mm256_set1_pd(std), radius);
    _mm256_store_pd(c + h, _mm256_mul_pd(scaled, _ZGVdN4v_cos(angle)));
    _mm256_store_pd(s + h, _mm256_mul_pd(scaled, _ZGVdN4v_sin(angle)));
  }
  for (int64_t l = 0; l < kPairs; ++l) {
    out[2 * l] = c[l];
    out[2 * l + 1] = s[l];
  }
}

// AVX-512: the eight pairs' counters hashed together too (splitmix64 needs
// 64-bit multiplies, which AVX-512DQ has), then libmvec's 8-wide functions.
extern "C" __attribute__((target("avx512f,avx512dq"))) __m512d _ZGVeN8v_log(__m512d);
extern "C" __attribute__((target("avx512f,avx512dq"))) __m512d _ZGVeN8v_cos(__m512d);
extern "C" __attribute__((target("avx512f,avx512dq"))) __m512d _ZGVeN8v_sin(__m512d);

// GCC 12 warns that its own AVX-512 shift intrinsics read an uninitialised
// pass-through operand (GCC bug 105593); the masks are all ones, so no lane
// reads it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512dq"))) __m512i splitmix64_x8(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<int64_t>(0x9e3779b97f4a7c15ULL)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ULL)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebULL)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// random_bits(key, counter) for eight counters.
__attribute__((target("avx512f,avx512dq"))) __m512i random_bits_x8(uint64_t key, __m512i counter) {
  const __m512i mixed = _mm512_mullo_epi64(counter, _mm512_set1_epi64(static_cast<int64_t>(0xd1b54a32d192ed03ULL)));
  return splitmix64_x8(_mm512_xor_si512(_mm512_set1_epi64(static_cast<int64_t>(key)), mixed));
}

__attribute__((target("avx512f,avx512dq"))) void group_avx512(uint64_t key, int64_t g, double std, double* out) {
  static_assert(kPairs == 8);
  const __m512i lanes = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i even = _mm512_add_epi64(_mm512_set1_epi64(2 * g * kPairs), lanes);  // counter 2k of pair k
  const __m512d two53 = _mm512_set1_pd(0x1.0p-53);
  const __m512i b1 = _mm512_add_epi64(_mm512_srli_epi64(random_bits_x8(key, even), 11), _mm512_set1_epi64(1));
  const __m512i b2 = _mm512_srli_epi64(random_bits_x8(key, _mm512_add_epi64(even, _mm512_set1_epi64(1))), 11);
  const __m512d u1 = _mm512_mul_pd(_mm512_cvtepi64_pd(b1), two53), u2 = _mm512_mul_pd(_mm512_cvtepi64_pd(b2), two53);
  const __m512d radius = _mm512_sqrt_pd(_mm512_mul_pd(_mm512_set1_pd(-2.0), _ZGVeN8v_log(u1)));
  const __m512d angle = _mm512_mul_pd(_mm512_set1_pd(2.0 * std::numbers::pi), u2);
  const __m512d scaled = _mm512_mul_pd(_mm512_set1_pd(std), radius);
  const __m512d c = _mm512_mul_pd(scaled, _ZGVeN8v_cos(angle)), s = _mm512_mul_pd(scaled, _ZGVeN8v_sin(angle));
  // Interleave: c0 s0 c1 s1 ...
  _mm512_storeu_pd(out, _mm512_permutex2var_pd(c, _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), s));
  _mm512_storeu_pd(out + 8, _mm512_permutex2var_pd(c, _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4), s));
}
#pragma GCC diagnostic pop

using GroupFn = void (*)(uint64_t, int64_t, double, double*);
GroupFn group_fn() {
  static const GroupFn fn = [] {
    if (const char* e = std::getenv("FSDPC_SCALAR_INIT"); e && std::string_view(e) == "1") return &group_scalar;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return &group_avx512;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &group_avx2 : &group_scalar;
  }();
  return fn;
}
#else
using GroupFn = void (*)(uint64_t, int64_t, double, double*);
GroupFn group_fn() { return &group_scalar; }
#endif
}  // namespace

// Half of the initialisation of a GPT-2 was glibc's scalar log and sincos
// and the counter hash around them; computed eight pairs at a time it takes
// a fraction of that.
void fill_normal(uint64_t key, int64_t begin, int64_t end, double std, float* out) {
  if (begin >= end) return;
  constexpr int64_t kSpan = 2 * kPairs;  // positions per group
  const GroupFn group = group_fn();
  double values[kSpan];
  for (int64_t g = begin / kSpan; g * kSpan < end; ++g) {
    group(key, g, std, values);
    const int64_t first = std::max(begin, g * kSpan), last = std::min(end, (g + 1) * kSpan);
    for (int64_t i = first; i < last; ++i) out[i - begin] = static_cast<float>(values[i - g * kSpan]);
  }
}

}  // namespace fsdpc
