// Counter-based random numbers: every value is a pure function of a key and a
// counter, so any rank can produce any slice of a stream without the rest.
// Used by parameter initialisation (runtime/init.h) and synthetic data (runtime/data.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace fsdpc {

// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit
// mix whose outputs pass BigCrush when fed a counter.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes, then mixed: names that differ in one character give
// unrelated keys.
uint64_t hash_string(std::string_view s);

// A child key of `key` for sub-stream `v` (a step, a row, a parameter).
// Mixing `key` before xor-ing keeps derive_key(k, a) and derive_key(k', b)
// apart when k ^ a == k' ^ b.
constexpr uint64_t derive_key(uint64_t key, uint64_t v) { return splitmix64(splitmix64(key) ^ v); }

// The `counter`-th 64 random bits of stream `key`.
constexpr uint64_t random_bits(uint64_t key, uint64_t counter) {
  return splitmix64(key ^ (counter * 0xd1b54a32d192ed03ULL));
}

// Uniform in [0, 1) with 53 bits.
constexpr double uniform01(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// Fills out[0, end - begin) with normal(0, std) values for stream positions
// [begin, end). Box–Muller: positions 2k and 2k+1 are the cosine and sine
// halves of pair k, drawn from counters 2k and 2k+1, so the value at a
// position does not depend on where a slice starts.
void fill_normal(uint64_t key, int64_t begin, int64_t end, double std, float* out);

}  // namespace fsdpc
