// fuse(): one scan grows the current region while statements fit it and
// closes it at the first that does not; a second step turns each closed
// region of two statements or more into its `fusion` statement.
#include "passes/fuse.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/scalar_expr.h"
#include "passes/del.h"

namespace fsdpc {

namespace {

bool fusible_dtype(DType d) { return d == DType::f32 || d == DType::boolean; }

bool is_row_reduction(const BoundSymbol& b) {
  if (b.op != OpId::Sum && b.op != OpId::Amax) return false;
  const IntList dims = b.attrs.get_ints("dims");
  const size_t rank = b.output().type.shape.size() + 1;
  return dims.size() == 1 && dims[0] + 1 == static_cast<int64_t>(rank) && b.output().type.dtype == DType::f32;
}

// Whether `b` is a statement a region may hold, looking at it alone.
bool fusible_op(const BoundSymbol& b) {
  if (b.outputs.size() != 1 || !b.subsymbols.empty()) return false;
  const TensorType& out = b.outputs[0].type;
  if (out.future || !fusible_dtype(out.dtype)) return false;
  return b.op == OpId::BroadcastInDim || scalar_expr(b.op) || is_row_reduction(b);
}

bool fusible(const BoundSymbol& b, const std::string& executor) {
  // Operand dtypes are not on the statement; the region builder checks
  // them against the defining statements (see dtypes_ below).
  return b.executor == executor && fusible_op(b);
}

// A composite (layer_norm, softmax, gelu) whose decomposition a region can
// hold whole: its statements join regions instead of running as the
// executor's kernel, so the op keeps one definition, its decomposition.
bool inlinable(const BoundSymbol& b, const std::string& executor) {
  if (b.executor != executor || b.subsymbols.empty() || b.op == OpId::Fusion) return false;
  for (const BoundSymbol& s : b.subsymbols)
    if (!fusible_op(s)) return false;
  return true;
}

bool dims_are_iota(const IntList& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Shape drop_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

// A region's statements and their level: per element of `shape`, or per
// row (shape without its innermost dim). Until a statement fixes the shape
// (a reduction, a broadcast back or a second level), a region of one shape
// may still become the row level of a region one rank larger.
struct Region {
  std::vector<const BoundSymbol*> bsyms;
  std::unordered_map<std::string, bool> defined;  // name -> is a row value
  Shape shape;
  bool fixed = false;
};

class Fuser {
 public:
  Fuser(const Trace& trace, const std::string& executor) : trace_(trace), executor_(executor) {
    for (const Proxy& a : trace.args) types_[a.name] = a.type;
  }

  Trace run() {
    std::vector<BoundSymbol> body;
    for (const BoundSymbol& b : trace_.bsyms) {
      if (b.op == OpId::Del) continue;
      if (!inlinable(b, executor_)) {
        body.push_back(b);
        continue;
      }
      for (const BoundSymbol& s : b.subsymbols) {
        body.push_back(s);
        body.back().executor = executor_;
      }
    }
    count_uses(body);
    Trace out = trace_;
    out.bsyms.clear();
    Region region;
    for (size_t i = 0; i < body.size(); ++i) {
      const BoundSymbol& b = body[i];
      if (!fits(b, region)) {
        close(region, i, out.bsyms);
        if (fits(b, region)) {
          add(b, region);
        } else {
          out.bsyms.push_back(b);
        }
      } else {
        add(b, region);
      }
      for (const Proxy& o : b.outputs) types_[o.name] = o.type;
    }
    close(region, body.size(), out.bsyms);
    Trace placed = insert_dels(out);
    placed.provenance = "fusion";
    return placed;
  }

 private:
  void count_uses(const std::vector<BoundSymbol>& body) {
    for (size_t i = 0; i < body.size(); ++i)
      for (const Operand& in : body[i].inputs)
        if (!in.is_scalar()) last_use_[in.name] = static_cast<int64_t>(i);
    std::vector<std::string> names;
    trace_.returns.collect_names(names);
    for (const std::string& n : names) last_use_[n] = static_cast<int64_t>(body.size());
  }

  // Where `b` would sit in `r`: element (false) or row (true) level, and
  // the region's shape after it; nullopt when it does not fit.
  struct Placement {
    bool row = false;
    Shape shape;
    bool fixes = false;   // the shape can no longer grow a row level
    bool rebase = false;  // r's statements become its row level
  };

  std::optional<Placement> place(const BoundSymbol& b, const Region& r) const {
    if (!fusible(b, executor_)) return std::nullopt;
    for (const Operand& in : b.inputs) {
      if (in.is_scalar()) continue;
      auto t = types_.find(in.name);
      if (t == types_.end() || t->second.future || !fusible_dtype(t->second.dtype)) return std::nullopt;
    }
    const Shape& out = b.output().type.shape;
    const bool reduction = b.op == OpId::Sum || b.op == OpId::Amax;
    // The shape this statement iterates over at its own level.
    const Shape own = reduction ? types_.at(b.inputs[0].name).shape : out;
    Placement p;
    if (r.bsyms.empty()) {
      p.shape = own;
      p.row = reduction;
      p.fixes = reduction;
    } else if (own == r.shape) {
      p.shape = r.shape;
      p.row = reduction;
      p.fixes = reduction;
    } else if (!reduction && !r.shape.empty() && own == drop_last(r.shape)) {
      p.shape = r.shape;
      p.row = true;
      p.fixes = true;
    } else if (!r.fixed && !own.empty() && drop_last(own) == r.shape) {
      p.shape = own;
      p.row = reduction;
      p.fixes = true;
      p.rebase = true;
    } else {
      return std::nullopt;
    }
    // After a rebase every value of r is a row value.
    auto level_of = [&](const std::string& name) -> std::optional<bool> {
      auto it = r.defined.find(name);
      if (it == r.defined.end()) return std::nullopt;
      return p.rebase ? true : it->second;
    };
    const Shape row_shape = p.shape.empty() ? Shape{} : drop_last(p.shape);
    if (b.op == OpId::BroadcastInDim) {
      const std::optional<bool> in = level_of(b.inputs[0].name);
      if (!in) return p;  // from memory: any broadcast a loop can index
      // Inside the region only a row value broadcast back along its row.
      if (!*in || p.row || !dims_are_iota(b.attrs.get_ints("broadcast_dims")) ||
          types_.at(b.inputs[0].name).shape != row_shape)
        return std::nullopt;
      p.fixes = true;
      return p;
    }
    if (reduction) {
      const std::optional<bool> in = level_of(b.inputs[0].name);
      if (in && *in) return std::nullopt;
      return p;
    }
    const Shape& level_shape = p.row ? row_shape : p.shape;
    for (const Operand& in : b.inputs) {
      if (in.is_scalar()) continue;
      const std::optional<bool> lv = level_of(in.name);
      if (lv ? *lv != p.row : types_.at(in.name).shape != level_shape) return std::nullopt;
    }
    return p;
  }

  bool fits(const BoundSymbol& b, const Region& r) const { return place(b, r).has_value(); }

  void add(const BoundSymbol& b, Region& r) const {
    const Placement p = *place(b, r);
    if (p.rebase)
      for (auto& [name, row] : r.defined) row = true;
    r.shape = p.shape;
    r.fixed = r.fixed || p.fixes;
    r.bsyms.push_back(&b);
    r.defined[b.outputs[0].name] = p.row;
  }

  // Emits the region ending before statement `end` and empties it.
  void close(Region& r, size_t end, std::vector<BoundSymbol>& out) {
    if (r.bsyms.size() < 2) {
      for (const BoundSymbol* b : r.bsyms) out.push_back(*b);
    } else {
      out.push_back(region_statement(r, static_cast<int64_t>(end)));
    }
    r = Region{};
  }

  BoundSymbol region_statement(const Region& r, int64_t end) const {
    BoundSymbol f;
    f.op = OpId::Fusion;
    f.executor = executor_;
    std::unordered_set<std::string> seen;
    std::vector<BoundSymbol> subs;
    for (const BoundSymbol* b : r.bsyms) {
      for (const Operand& in : b->inputs)
        if (!in.is_scalar() && !r.defined.count(in.name) && seen.insert(in.name).second)
          f.inputs.push_back(in);
      auto use = last_use_.find(b->outputs[0].name);
      if (use != last_use_.end() && use->second >= end) f.outputs.push_back(b->outputs[0]);
      BoundSymbol s = *b;
      s.executor.clear();
      subs.push_back(std::move(s));
    }
    f.subsymbols = SubSymbols(std::move(subs));
    return f;
  }

  const Trace& trace_;
  const std::string& executor_;
  std::unordered_map<std::string, TensorType> types_;
  std::unordered_map<std::string, int64_t> last_use_;
};

}  // namespace

Trace fuse(const Trace& trace, const std::string& executor) { return Fuser(trace, executor).run(); }

bool has_fusion_executor(const std::string& executor) { return executor == "cpu"; }

}  // namespace fsdpc
