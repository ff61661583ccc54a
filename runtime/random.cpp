// Counter-based random numbers (see runtime/random.h).
#include "runtime/random.h"

#include <cmath>
#include <numbers>

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
}  // namespace

void fill_normal(uint64_t key, int64_t begin, int64_t end, double std, float* out) {
  int64_t i = begin;
  double radius = 0, angle = 0;
  if (i < end && i % 2 == 1) {  // the slice starts at a pair's second half
    box_muller_pair(key, i / 2, radius, angle);
    out[i - begin] = static_cast<float>(std * radius * std::sin(angle));
    ++i;
  }
  for (; i < end; i += 2) {
    box_muller_pair(key, i / 2, radius, angle);
    out[i - begin] = static_cast<float>(std * radius * std::cos(angle));
    if (i + 1 < end) out[i + 1 - begin] = static_cast<float>(std * radius * std::sin(angle));
  }
}

}  // namespace fsdpc
