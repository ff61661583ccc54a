// TraceBuilder appends bound symbols to a trace: it names outputs from the
// trace's counter, runs the meta function (so every recorded symbol is
// shape-checked) and records the decomposition of composites as sub-symbols.
// The frontend's Tracer and every pass that creates symbols use it.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

class TraceBuilder {
 public:
  struct Options {
    bool record_decompositions = true;
  };

  // Appends to `trace`, which must outlive the builder. Types of the trace's
  // existing args and bound symbols are known to the builder.
  explicit TraceBuilder(Trace& trace);
  TraceBuilder(Trace& trace, Options options);

  // Adds a trace argument.
  const Proxy& add_arg(Proxy p);

  // Records `op` and returns its outputs.
  std::vector<Proxy> emit(OpId op, std::vector<Operand> inputs, Attrs attrs = {});
  // Same, for ops with exactly one output.
  Proxy emit1(OpId op, std::vector<Operand> inputs, Attrs attrs = {});
  // Same, the outputs named `names` ("" keeps the fresh name; a composite's
  // decomposition defines them under the same names): a pass replacing
  // statements gives its results the names the rest of the trace already
  // reads.
  std::vector<Proxy> emit_named(OpId op, std::vector<Operand> inputs, Attrs attrs,
                                const std::vector<std::string>& names);

  // Appends an already-built symbol as it is (a pass copying statements);
  // its recorded types are trusted here and checked by the verifier.
  void append(BoundSymbol b);

  const TensorType& type_of(const std::string& name) const;
  Trace& trace() { return trace_; }

 private:
  Trace& trace_;
  Options options_;
  std::vector<BoundSymbol>* sink_;  // where emit appends: the trace or a composite
  std::unordered_map<std::string, TensorType> types_;
};

}  // namespace fsdpc
