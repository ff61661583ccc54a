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

#include "ir/ops.def"

#define FSDPC_OP_ENUMERATOR(e, ...) e,
enum class OpId : uint16_t { FSDPC_OPS(FSDPC_OP_ENUMERATOR) };
#undef FSDPC_OP_ENUMERATOR

// Case labels for every op of one section of the table, for a switch over
// OpId that treats the section alike: `FSDPC_SHAPE_CASES return 0;`. The
// switches have no default:, so -Wswitch still names an op no case covers,
// and a row added to a section reaches every such switch without an edit.
#define FSDPC_OP_CASE(e, ...) case OpId::e:
#define FSDPC_ELEMENTWISE_CASES FSDPC_ELEMENTWISE_OPS(FSDPC_OP_CASE)
#define FSDPC_REDUCTION_CASES FSDPC_REDUCTION_OPS(FSDPC_OP_CASE)
#define FSDPC_SHAPE_CASES FSDPC_SHAPE_OPS(FSDPC_OP_CASE)
#define FSDPC_INDEXING_CASES FSDPC_INDEXING_OPS(FSDPC_OP_CASE)
#define FSDPC_MATMUL_CASES FSDPC_MATMUL_OPS(FSDPC_OP_CASE)
#define FSDPC_CREATION_CASES FSDPC_CREATION_OPS(FSDPC_OP_CASE)
#define FSDPC_COMPOSITE_CASES FSDPC_COMPOSITE_OPS(FSDPC_OP_CASE)
#define FSDPC_COLLECTIVE_CASES FSDPC_COLLECTIVE_OPS(FSDPC_OP_CASE)
#define FSDPC_BUFFER_CASES FSDPC_BUFFER_OPS(FSDPC_OP_CASE)
#define FSDPC_FUSION_CASES FSDPC_FUSION_OPS(FSDPC_OP_CASE)
#define FSDPC_MEMORY_CASES FSDPC_MEMORY_OPS(FSDPC_OP_CASE)

// Every section but one: the ops a switch that dispatches within a section
// (its rules, one case per op) does not handle.
#define FSDPC_CASES_EXCEPT_ELEMENTWISE \
  FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES FSDPC_MATMUL_CASES \
  FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_REDUCTION \
  FSDPC_ELEMENTWISE_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES FSDPC_MATMUL_CASES \
  FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_SHAPE \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_INDEXING_CASES FSDPC_MATMUL_CASES \
  FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_INDEXING \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_MATMUL_CASES \
  FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_MATMUL \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_CREATION \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_COMPOSITE \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_CREATION_CASES FSDPC_COLLECTIVE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_COLLECTIVE \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_BUFFER_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_BUFFER \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES \
  FSDPC_FUSION_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_FUSION \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES \
  FSDPC_BUFFER_CASES FSDPC_MEMORY_CASES
#define FSDPC_CASES_EXCEPT_MEMORY \
  FSDPC_ELEMENTWISE_CASES FSDPC_REDUCTION_CASES FSDPC_SHAPE_CASES FSDPC_INDEXING_CASES \
  FSDPC_MATMUL_CASES FSDPC_CREATION_CASES FSDPC_COMPOSITE_CASES FSDPC_COLLECTIVE_CASES \
  FSDPC_BUFFER_CASES FSDPC_FUSION_CASES

// What passes and the runtime ask of an op, one flag each: the traits column
// of ir/ops.def, whose header says what each means. Ask with
// op_info(op).has(OpTrait::issue).
enum class OpTrait : uint8_t {
  none = 0,
  issue = 1 << 0,          // returns a future that a wait completes
  p2p = 1 << 1,            // a message to or from one peer (send, recv)
  cheap = 1 << 2,          // recomputed in the backward rather than saved (split)
  takes_sharded = 1 << 3,  // takes fully_sharded inputs as they are (verifier)
  reduces = 1 << 4,        // combines the ranks' values by its `op` (collective executors' dtypes)
};

constexpr OpTrait operator|(OpTrait a, OpTrait b) {
  return static_cast<OpTrait>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}

struct OpInfo {
  OpId id;
  std::string_view name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  // -1: variadic
  int outputs;     // -1: decided by attributes
  bool composite;
  OpTrait traits;

  // Whether the op has every flag of `t`.
  constexpr bool has(OpTrait t) const {
    const auto want = static_cast<uint8_t>(t);
    return want != 0 && (static_cast<uint8_t>(traits) & want) == want;
  }
};

extern const int kNumOps;

const OpInfo& op_info(OpId op);
std::string_view op_name(OpId op);
std::optional<OpId> find_op(std::string_view name);

// Aborts: `op` is no row of the table. Ends a function whose switch over
// every OpId returns (the switches have no default:, so -Wswitch names a
// missing op; this is where a value outside the enum would land).
[[noreturn]] void op_outside_table(OpId op);

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
