// Expands ir/ops.def's FSDPC_OPS into the metadata table and the name lookup.
#include "ir/ops.h"

#include <array>

#include "ir/error.h"

namespace fsdpc {

namespace {
#define FSDPC_OP_COUNT(...) +1
constexpr int kCount = 0 FSDPC_OPS(FSDPC_OP_COUNT);
#undef FSDPC_OP_COUNT

// The traits column names its flags bare: `issue | takes_sharded`.
using enum OpTrait;

constexpr std::array<OpInfo, kCount> kOps = {{
#define FSDPC_OP_INFO(e, name, cat, min_in, max_in, outs, composite, traits) \
  {OpId::e, name, OpCategory::cat, min_in, max_in, outs, composite, traits},
    FSDPC_OPS(FSDPC_OP_INFO)
#undef FSDPC_OP_INFO
}};

constexpr bool table_is_ordered() {
  for (int i = 0; i < kCount; ++i)
    if (static_cast<int>(kOps[i].id) != i) return false;
  return true;
}
static_assert(table_is_ordered(), "op table rows must follow the enum order");

// The traits that imply others: a point-to-point message is issued and
// waited like a collective, only communication ops issue, and a reduction
// is a group collective's.
constexpr bool traits_are_consistent() {
  for (const OpInfo& op : kOps) {
    if (op.has(p2p) && !op.has(issue)) return false;
    if (op.has(issue) && op.category != OpCategory::collective) return false;
    if (op.has(reduces) && (!op.has(issue) || op.has(p2p))) return false;
  }
  return true;
}
static_assert(traits_are_consistent(), "op table: p2p ops must also issue, only collectives issue, and only group collectives reduce");
}  // namespace

const int kNumOps = kCount;

const OpInfo& op_info(OpId op) { return kOps[static_cast<size_t>(op)]; }

std::string_view op_name(OpId op) { return op_info(op).name; }

void op_outside_table(OpId op) {
  FSDPC_CHECK(false) << "op id " << static_cast<int>(op) << " outside ir/ops.def";
  __builtin_unreachable();  // ~CheckFailure aborts
}

std::optional<OpId> find_op(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return info.id;
  return std::nullopt;
}

const std::vector<std::string_view>& executor_names() {
  static const std::vector<std::string_view> kNames = {"cpu", "cuda", "mpi", "nccl", "reference"};
  return kNames;
}

std::string symbol_name(OpId op, std::string_view executor) {
  std::string name(executor);
  if (!name.empty()) name += '_';
  return name += op_name(op);
}

namespace {
// "fusion3" -> fusion: a region prints its number in the trace after the
// op's name (Thunder's nvFusion3); the number is the region's place, not data.
std::optional<OpId> find_numbered_op(std::string_view name) {
  if (auto op = find_op(name)) return op;
  const size_t end = name.find_last_not_of("0123456789");
  if (end == std::string_view::npos || end + 1 == name.size()) return std::nullopt;
  if (auto op = find_op(name.substr(0, end + 1)); op && *op == OpId::Fusion) return op;
  return std::nullopt;
}
}  // namespace

std::optional<SymbolName> resolve_symbol_name(std::string_view name) {
  if (auto op = find_numbered_op(name)) return SymbolName{*op, ""};
  size_t us = name.find('_');
  if (us == std::string_view::npos) return std::nullopt;
  std::string_view prefix = name.substr(0, us);
  for (std::string_view e : executor_names())
    if (e == prefix)
      if (auto op = find_numbered_op(name.substr(us + 1))) return SymbolName{*op, std::string(e)};
  return std::nullopt;
}

}  // namespace fsdpc
