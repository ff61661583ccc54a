// use_counts(): one walk over every statement at every depth, then the returns.
#include "ir/uses.h"

#include <vector>

namespace fsdpc {

std::unordered_map<std::string, int> use_counts(const Trace& trace) {
  std::unordered_map<std::string, int> uses;
  for_each_bsym(trace.bsyms, [&](const BoundSymbol& b) {
    for (const Operand& in : b.inputs)
      if (!in.is_scalar()) ++uses[in.name];
  });
  std::vector<std::string> returned;
  trace.returns.collect_names(returned);
  for (const std::string& r : returned) ++uses[r];
  return uses;
}

}  // namespace fsdpc
