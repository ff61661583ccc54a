// fuse(): one scan grows the current region while statements fit it and
// closes it at the first that does not; a second step turns each closed
// region of two statements or more into its `fusion` statement.
#include "passes/fuse.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/scalar_expr.h"
#include "passes/del.h"

namespace fsdpc {

namespace {

bool fusible_dtype(DType d) { return d == DType::f32 || d == DType::boolean; }

bool fusible(const BoundSymbol& b, const std::string& executor) {
  if (b.executor != executor || b.outputs.size() != 1 || !b.subsymbols.empty()) return false;
  const TensorType& out = b.outputs[0].type;
  if (out.future || !fusible_dtype(out.dtype)) return false;
  if (b.op != OpId::BroadcastInDim && !scalar_expr(b.op)) return false;
  // Operand dtypes are not on the statement; the region builder checks
  // them against the defining statements (see dtype_of below).
  return true;
}

struct Region {
  std::vector<const BoundSymbol*> bsyms;
  std::unordered_set<std::string> defined;
  Shape shape;
};

class Fuser {
 public:
  Fuser(const Trace& trace, const std::string& executor) : trace_(trace), executor_(executor) {
    for (const Proxy& a : trace.args) dtypes_[a.name] = a.type.dtype;
  }

  Trace run() {
    std::vector<BoundSymbol> body;
    for (const BoundSymbol& b : trace_.bsyms)
      if (b.op != OpId::Del) body.push_back(b);
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
      for (const Proxy& o : b.outputs) dtypes_[o.name] = o.type.dtype;
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

  bool fits(const BoundSymbol& b, const Region& r) const {
    if (!fusible(b, executor_)) return false;
    for (const Operand& in : b.inputs) {
      if (in.is_scalar()) continue;
      auto d = dtypes_.find(in.name);
      if (d == dtypes_.end() || !fusible_dtype(d->second)) return false;
      // A loop indexes a broadcast only from memory: its input must come
      // from outside the region.
      if (b.op == OpId::BroadcastInDim && r.defined.count(in.name)) return false;
    }
    return r.bsyms.empty() || b.outputs[0].type.shape == r.shape;
  }

  static void add(const BoundSymbol& b, Region& r) {
    if (r.bsyms.empty()) r.shape = b.outputs[0].type.shape;
    r.bsyms.push_back(&b);
    r.defined.insert(b.outputs[0].name);
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
  std::unordered_map<std::string, DType> dtypes_;
  std::unordered_map<std::string, int64_t> last_use_;
};

}  // namespace

Trace fuse(const Trace& trace, const std::string& executor) { return Fuser(trace, executor).run(); }

bool has_fusion_executor(const std::string& executor) { return executor == "cpu"; }

}  // namespace fsdpc
