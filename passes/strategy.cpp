// Strategy names and properties.
#include "passes/strategy.h"

#include <array>
#include <string_view>

namespace fsdpc {

namespace {
constexpr std::array<std::string_view, 5> kNames = {"zero3", "zero2", "no_shard", "hybrid", "hybrid_zero2"};
}

std::string_view strategy_name(Strategy s) { return kNames[static_cast<size_t>(s)]; }

std::optional<Strategy> parse_strategy(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<Strategy>(i);
  return std::nullopt;
}

bool is_hybrid(Strategy s) { return s == Strategy::hybrid || s == Strategy::hybrid_zero2; }

bool regathers_in_backward(Strategy s) { return s == Strategy::zero3 || s == Strategy::hybrid; }

}  // namespace fsdpc
