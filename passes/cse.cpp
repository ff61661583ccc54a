// cse(): a forward walk with a table from "what a statement computes" to the
// statement that first computed it, and a renaming of the duplicates' outputs.
#include "passes/cse.h"

#include <bit>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace fsdpc {

namespace {

bool mergeable(OpId op) {
  const OpCategory c = op_info(op).category;
  return c != OpCategory::collective && c != OpCategory::memory;
}

std::string int_list_key(const IntList& l) {
  std::string out = "[";
  for (int64_t v : l) out += std::to_string(v) + ",";
  return out + "]";
}

// An unambiguous spelling of one attribute value, its kind included, so 2
// and 2.0 differ. Doubles by bit pattern: -0.0 and 0.0 are not merged.
std::string attr_key(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return "i" + std::to_string(i); }
    std::string operator()(double d) const {
      return "d" + std::to_string(std::bit_cast<uint64_t>(d));
    }
    std::string operator()(bool b) const { return b ? "bT" : "bF"; }
    std::string operator()(const std::string& s) const {
      return "s" + std::to_string(s.size()) + ":" + s;
    }
    std::string operator()(const IntList& l) const { return "l" + int_list_key(l); }
    std::string operator()(const IntLists& ls) const {
      std::string out = "L[";
      for (const IntList& l : ls) out += int_list_key(l);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, v);
}

// What `b` computes, with inputs already renamed. Output types are part of
// the key so two statements that differ only in a recorded type stay apart.
std::string statement_key(const BoundSymbol& b) {
  std::string key(op_name(b.op));
  key += "(";
  for (const Operand& in : b.inputs)
    key += in.is_scalar() ? "#" + std::to_string(std::bit_cast<uint64_t>(*in.scalar)) + ","
                          : "%" + in.name + ",";
  key += "){";
  for (const auto& [name, value] : b.attrs.items())
    key += std::to_string(name.size()) + ":" + name + "=" + attr_key(value) + ",";
  key += "}->";
  for (const Proxy& out : b.outputs)
    key += type_str(out.type) + " " + std::string(dist_name(out.type.dist)) + ",";
  return key;
}




}  // namespace

Trace cse(Trace trace) {
  // The statements move from the input into the output.
  std::vector<BoundSymbol> in = std::move(trace.bsyms);
  trace.bsyms.clear();
  Trace out = std::move(trace);
  out.provenance = "cse";
  out.bsyms.reserve(in.size());
  std::unordered_map<std::string, std::string> renamed;   // duplicate -> kept
  std::unordered_map<std::string, size_t> first;          // key -> index in out.bsyms
  std::unordered_map<std::string, std::string> key_of;    // output name -> its key
  std::unordered_set<std::string> merged;                 // both sides of every merge
  first.reserve(in.size());
  key_of.reserve(in.size());
  for (BoundSymbol& original : in) {
    BoundSymbol b = std::move(original);
    rename_uses(b, renamed);
    if (b.op == OpId::Del) {
      // A freed value cannot stand in for a later duplicate.
      for (const Operand& in : b.inputs)
        if (auto k = key_of.find(in.name); k != key_of.end()) first.erase(k->second);
      out.bsyms.push_back(std::move(b));
      continue;
    }
    if (!mergeable(b.op) || b.outputs.empty()) {
      out.bsyms.push_back(std::move(b));
      continue;
    }
    const std::string key = statement_key(b);
    auto hit = first.find(key);
    if (hit == first.end()) {
      first.emplace(key, out.bsyms.size());
      for (const Proxy& o : b.outputs) key_of[o.name] = key;
      out.bsyms.push_back(std::move(b));
      continue;
    }
    const BoundSymbol& kept = out.bsyms[hit->second];
    for (size_t i = 0; i < b.outputs.size(); ++i) {
      renamed[b.outputs[i].name] = kept.outputs[i].name;
      merged.insert(b.outputs[i].name);
      merged.insert(kept.outputs[i].name);
    }
  }
  rename_returns(out.returns, renamed);
  // The kept value now lives as long as both did, so neither side's free
  // is right any more (see cse.h).
  for (BoundSymbol& b : out.bsyms)
    if (b.op == OpId::Del)
      std::erase_if(b.inputs, [&](const Operand& in) { return merged.count(in.name) > 0; });
  std::erase_if(out.bsyms,
                [](const BoundSymbol& b) { return b.op == OpId::Del && b.inputs.empty(); });
  return out;
}

}  // namespace fsdpc
