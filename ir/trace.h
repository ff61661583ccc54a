// The IR's data: proxies, bound symbols and traces (DESIGN.md "The IR").
// Traces are values: passes take a const Trace& and return a new one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attr.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace fsdpc {

// A named tensor value. Parameters carry their module path ("h.0.ln_1.weight")
// so checkpoints and state dicts can name them; the proxy name is derived
// from it (t_h_0_ln_1_weight).
struct Proxy {
  std::string name;
  TensorType type;
  std::string param_path;     // empty: not a parameter
  bool requires_grad = true;  // meaningful for parameters only
  bool is_param() const { return !param_path.empty(); }
  bool operator==(const Proxy&) const = default;
};

// An input of a bound symbol: a proxy name, or a scalar literal (elementwise
// ops only; its dtype follows the tensor operand, as Python numbers do).
struct Operand {
  std::string name;
  std::optional<double> scalar;

  static Operand of(std::string n) { return Operand{std::move(n), std::nullopt}; }
  static Operand lit(double v) { return Operand{"", v}; }
  bool is_scalar() const { return scalar.has_value(); }
  bool operator==(const Operand& o) const;
};

// op + inputs + attributes + outputs, plus an optional decomposition: the
// sub-symbols compute the same outputs from the same inputs using prims.
struct BoundSymbol {
  OpId op{};
  std::vector<Operand> inputs;
  Attrs attrs;
  std::vector<Proxy> outputs;
  std::vector<BoundSymbol> subsymbols;

  const Proxy& output() const;  // the single output; checks there is one
  bool operator==(const BoundSymbol&) const = default;
};

// What a trace returns: a name, or a (possibly nested) tuple of them.
struct ReturnTree {
  std::string name;                // set for a leaf
  std::vector<ReturnTree> items;   // set for a tuple
  bool is_tuple = false;

  static ReturnTree leaf(std::string n);
  static ReturnTree tuple(std::vector<ReturnTree> items);
  void collect_names(std::vector<std::string>& out) const;
  bool operator==(const ReturnTree&) const = default;
};

struct Trace {
  std::string name = "computation";  // printed as `def <name>(...)`
  std::string provenance;            // printed as `# Constructed by <provenance>`
  std::vector<Proxy> args;
  std::vector<BoundSymbol> bsyms;
  ReturnTree returns = ReturnTree::tuple({});
  int64_t next_id = 0;  // one counter per trace: t<N> and ft<N> share it

  // A fresh name: "t<N>", or "ft<N>" for futures.
  std::string fresh_name(bool future = false);
  // Sets next_id past every t<N>/ft<N> name in use (after parsing).
  void resync_counter();
  // Compares what a trace means and prints; next_id is bookkeeping (a parsed
  // trace resyncs it) and is left out.
  bool operator==(const Trace& o) const;
};

// Parameter path -> proxy name: "h.3.attn.c_attn.weight" -> "t_h_3_attn_c_attn_weight".
std::string param_proxy_name(const std::string& path);

// Renames the inputs of `b` (and of its sub-symbols) found in `names`.
void rename_uses(BoundSymbol& b, const std::unordered_map<std::string, std::string>& names);

// Calls f(bsym) for every bound symbol, sub-symbols after their parent.
template <class F>
void for_each_bsym(const std::vector<BoundSymbol>& bsyms, F&& f) {
  for (const BoundSymbol& b : bsyms) {
    f(b);
    for_each_bsym(b.subsymbols, f);
  }
}

}  // namespace fsdpc
