// The sharding strategies, in the words PyTorch FSDP and DeepSpeed users know.
#pragma once

#include <optional>
#include <string_view>

namespace fsdpc {

enum class Strategy {
  zero3,        // FULL_SHARD: params, grads, optimizer state sharded; re-gathered in backward
  zero2,        // SHARD_GRAD_OP: gathered params kept from forward to backward
  no_shard,     // NO_SHARD / DDP: replicated params, all_reduce of grads
  hybrid,       // HYBRID_SHARD: zero3 in a shard group, replicated across groups
  hybrid_zero2  // _HYBRID_SHARD_ZERO2: zero2 in a shard group, replicated across groups
};

std::string_view strategy_name(Strategy s);
std::optional<Strategy> parse_strategy(std::string_view name);
bool is_hybrid(Strategy s);
// zero3 and hybrid drop gathered parameters after the forward and re-gather them.
bool regathers_in_backward(Strategy s);

}  // namespace fsdpc
