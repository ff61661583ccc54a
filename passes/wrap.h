// FSDP units: which parameters are gathered and reduced together (PyTorch
// FSDP's auto_wrap_policy). See passes/wrap.cpp.
#pragma once

#include <string>
#include <vector>

#include "ir/trace.h"

namespace fsdpc {

struct Unit {
  std::string name;                 // "root", "h.3", "unit0", ...
  std::vector<std::string> params;  // proxy names, argument order
};

// Groups the parameter arguments of `trace` into units by `policy`:
//   block   one unit per numbered block ("h.3.attn.qkv.weight" -> "h.3"),
//           every other parameter in the unit "root";
//   size:N  consecutive parameters (argument order) until a unit holds at
//           least N elements (unsharded numel);
//   none    one unit "root" with every parameter.
// Units come root first, then in argument order of their first parameter;
// empty units are left out. Throws fsdpc::Error on a malformed policy.
std::vector<Unit> wrap_units(const Trace& trace, const std::string& policy);

// "h.3.attn.qkv.weight" -> "h.3": the block a parameter belongs to; ""
// outside a numbered block (the root unit). Pipeline stages split by it too.
std::string block_of(const std::string& param_path);

}  // namespace fsdpc
