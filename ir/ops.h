// The op enum and its metadata, expanded from the one table in ir/ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpc {

enum class OpCategory : uint8_t {
  elementwise,
  reduction,
  shape,
  indexing,
  matmul,
  creation,
  nn,
  collective,
  buffer,
  fusion,
  memory
};

enum class OpId : uint16_t {
#define FSDPC_OP(e, name, cat, min_in, max_in, outs, composite) e,
#include "ir/ops.def"
#undef FSDPC_OP
};

struct OpInfo {
  OpId id;
  std::string_view name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  // -1: variadic
  int outputs;     // -1: decided by attributes
  bool composite;
};

extern const int kNumOps;

const OpInfo& op_info(OpId op);
std::string_view op_name(OpId op);
std::optional<OpId> find_op(std::string_view name);

// Executors known to the IR's text form; a bound symbol claimed by one
// prints as "<executor>_<op>" (cpu_linear, mpi_all_gather).
const std::vector<std::string_view>& executor_names();
std::string symbol_name(OpId op, std::string_view executor);
struct SymbolName {
  OpId op;
  std::string executor;  // empty: not claimed
};
// Resolves a printed name: an op name, or "<executor>_<op>".
std::optional<SymbolName> resolve_symbol_name(std::string_view name);

}  // namespace fsdpc
