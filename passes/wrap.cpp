// wrap: the FSDP auto-wrap policy. Not a trace pass: it reads a trace's
// parameter arguments and names the units that bucketing and schedule
// gather and reduce as one.
//
// Pre:  a trace whose parameter arguments carry their module paths.
// Post: every parameter argument in exactly one unit; units root first, then
//       in argument order of their first parameter.
//
//   args: embed.weight, h.0.ln_1.weight, h.0.attn.qkv.weight, h.1.ln_1.weight, ln_f.bias
//   block -> root [embed.weight, ln_f.bias], h.0 [h.0.ln_1.weight, h.0.attn.qkv.weight],
//            h.1 [h.1.ln_1.weight]
//   size:5000 -> consecutive runs of at least 5000 elements each (the last may hold fewer)
#include "passes/wrap.h"

#include <cctype>
#include <charconv>
#include <map>

#include "ir/error.h"

namespace fsdpc {

namespace {

constexpr const char* kRoot = "root";
constexpr const char* kForms = "block, size:N (N a positive number of elements) or none";

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::vector<Unit> by_block(const std::vector<const Proxy*>& params) {
  std::vector<Unit> units{{kRoot, {}}};
  std::map<std::string, size_t> index;  // block name -> position in units
  for (const Proxy* p : params) {
    const std::string block = block_of(p->param_path);
    if (block.empty()) {
      units[0].params.push_back(p->name);
      continue;
    }
    auto [it, added] = index.emplace(block, units.size());
    if (added) units.push_back({block, {}});
    units[it->second].params.push_back(p->name);
  }
  if (units[0].params.empty()) units.erase(units.begin());
  return units;
}

// Unsharded element counts: a sharded argument holds ceil(d0/size) padded
// rows; its synchronize records the full shape.
std::map<std::string, int64_t> full_numels(const Trace& trace) {
  std::map<std::string, int64_t> out;
  for (const Proxy& a : trace.args) out[a.name] = numel(a.type.shape);
  for (const BoundSymbol& b : trace.bsyms)
    if (b.op == OpId::Synchronize && b.attrs.has("shape") && !b.inputs.empty())
      out[b.inputs[0].name] = numel(b.attrs.get_ints("shape"));
  return out;
}

std::vector<Unit> by_size(const Trace& trace, const std::vector<const Proxy*>& params, int64_t min_numel) {
  const std::map<std::string, int64_t> numels = full_numels(trace);
  std::vector<Unit> units;
  int64_t held = min_numel;  // the last unit is full: open a new one
  for (const Proxy* p : params) {
    if (held >= min_numel) {
      units.push_back({"unit" + std::to_string(units.size()), {}});
      held = 0;
    }
    units.back().params.push_back(p->name);
    held += numels.at(p->name);
  }
  return units;
}

int64_t parse_size(const std::string& policy) {
  const std::string digits = policy.substr(5);
  int64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 1)
    fail("wrap policy '", policy, "' is malformed: N must be a positive integer; expected ", kForms);
  return n;
}

}  // namespace

// "h.3.attn.qkv.weight" -> "h.3": the path up to its first numeric
// component that has a non-empty prefix; "" when there is none ("0.weight",
// "embed.weight"), so a Sequential's own layers fall into the root unit.
std::string block_of(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('.', start);
    if (end == std::string::npos) end = path.size();
    if (start > 0 && is_number(path.substr(start, end - start))) return path.substr(0, end);
    start = end + 1;
  }
  return "";
}

std::vector<Unit> wrap_units(const Trace& trace, const std::string& policy) {
  std::vector<const Proxy*> params;
  for (const Proxy& a : trace.args)
    if (a.is_param()) params.push_back(&a);
  if (policy == "block") return by_block(params);
  if (policy == "none") {
    std::vector<Unit> units{{kRoot, {}}};
    for (const Proxy* p : params) units[0].params.push_back(p->name);
    if (params.empty()) units.clear();
    return units;
  }
  if (policy.rfind("size:", 0) == 0) return by_size(trace, params, parse_size(policy));
  fail("unknown wrap policy '", policy, "'; expected ", kForms);
}

}  // namespace fsdpc
