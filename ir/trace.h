// The IR's data: proxies, bound symbols and traces (docs/design.md "The IR").
// Traces are values: passes take a const Trace& and return a new one.
#pragma once

#include <cstdint>
#include <memory>
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

struct BoundSymbol;

// A composite's decomposition, shared copy-on-write: every pass copies the
// trace it rewrites, and the decompositions (three quarters of a captured
// GPT-2's symbols) are almost never changed, so copies share them and only a
// mutation clones. Reads behave like a const std::vector<BoundSymbol>;
// non-const access clones first when shared.
class SubSymbols {
 public:
  using Vec = std::vector<BoundSymbol>;
  SubSymbols() = default;
  SubSymbols(Vec v);
  SubSymbols(std::initializer_list<BoundSymbol> init);

  const Vec& get() const;
  operator const Vec&() const { return get(); }
  Vec& mut();  // unshares, then gives the vector to change

  // Defined below BoundSymbol: a vector's members may be used only once its
  // element type is complete (clang instantiates them where they are written).
  size_t size() const;
  bool empty() const { return size() == 0; }
  Vec::const_iterator begin() const;
  Vec::const_iterator end() const;
  Vec::const_reverse_iterator rbegin() const;
  Vec::const_reverse_iterator rend() const;
  const BoundSymbol& operator[](size_t i) const;
  const BoundSymbol& back() const;
  Vec::iterator begin();
  Vec::iterator end();
  Vec::reverse_iterator rbegin();
  Vec::reverse_iterator rend();
  BoundSymbol& operator[](size_t i);
  BoundSymbol& back();
  void push_back(BoundSymbol b);
  void pop_back();
  void clear() { p_.reset(); }
  bool operator==(const SubSymbols& o) const;

 private:
  std::shared_ptr<Vec> p_;  // null: no decomposition
};

// op + inputs + attributes + outputs, plus an optional decomposition: the
// sub-symbols compute the same outputs from the same inputs using prims.
struct BoundSymbol {
  OpId op{};
  std::vector<Operand> inputs;
  Attrs attrs;
  std::vector<Proxy> outputs;
  SubSymbols subsymbols;
  // The executor that runs this symbol as it is (set by the claim pass);
  // empty before claiming. Printed as the name's prefix: cpu_linear.
  std::string executor;

  const Proxy& output() const;  // the single output; checks there is one
  bool operator==(const BoundSymbol&) const = default;
};

inline size_t SubSymbols::size() const { return p_ ? p_->size() : 0; }
inline SubSymbols::Vec::const_iterator SubSymbols::begin() const { return get().begin(); }
inline SubSymbols::Vec::const_iterator SubSymbols::end() const { return get().end(); }
inline SubSymbols::Vec::const_reverse_iterator SubSymbols::rbegin() const { return get().rbegin(); }
inline SubSymbols::Vec::const_reverse_iterator SubSymbols::rend() const { return get().rend(); }
inline const BoundSymbol& SubSymbols::operator[](size_t i) const { return get()[i]; }
inline const BoundSymbol& SubSymbols::back() const { return get().back(); }
inline SubSymbols::Vec::iterator SubSymbols::begin() { return mut().begin(); }
inline SubSymbols::Vec::iterator SubSymbols::end() { return mut().end(); }
inline SubSymbols::Vec::reverse_iterator SubSymbols::rbegin() { return mut().rbegin(); }
inline SubSymbols::Vec::reverse_iterator SubSymbols::rend() { return mut().rend(); }
inline BoundSymbol& SubSymbols::operator[](size_t i) { return mut()[i]; }
inline BoundSymbol& SubSymbols::back() { return mut().back(); }
inline void SubSymbols::pop_back() { mut().pop_back(); }

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

// A pass's output before its statements: `t`'s name, arguments, returns and
// name counter, the given provenance, no statements (room reserved for as
// many as `t` has).
Trace without_statements(const Trace& t, std::string provenance);

// Parameter path -> proxy name: "h.3.attn.c_attn.weight" -> "t_h_3_attn_c_attn_weight".
std::string param_proxy_name(const std::string& path);

// Renames the inputs of `b` (and of its sub-symbols) found in `names`.
void rename_uses(BoundSymbol& b, const std::unordered_map<std::string, std::string>& names);
// Renames the leaves of `r` found in `names`.
void rename_returns(ReturnTree& r, const std::unordered_map<std::string, std::string>& names);

// Calls f(bsym) for every bound symbol, sub-symbols after their parent.
template <class F>
void for_each_bsym(const std::vector<BoundSymbol>& bsyms, F&& f) {
  for (const BoundSymbol& b : bsyms) {
    f(b);
    for_each_bsym(b.subsymbols, f);
  }
}

}  // namespace fsdpc
