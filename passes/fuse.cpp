// fuse(): each statement that fits an empty region begins one, which grows
// with the later statements that fit it (also past statements it leaves in
// place, up to the next collective); each region of two statements or more
// becomes its `fusion` statement, where its first statement was. bf16 is a
// storage dtype in a region: only converts and broadcasts read or define it
// (see fusible_dtype), so a region loads and stores bf16 but computes in f32.
#include "passes/fuse.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <unordered_map>
#include <unordered_set>

#include "ir/scalar_expr.h"
#include "passes/del.h"

namespace fsdpc {

namespace {

// The dtypes a region holds (the fusion executors lower them: llvm_lowering.cpp,
// cuda_codegen.cpp). bf16 is storage only: a region widens a bf16 load to
// f32 and rounds to bf16 (nearest even, as executors/bf16.h) where a value
// is bf16, and computes everything else in f32. So only a statement that
// moves data may read or define bf16: convert_element_type (autocast's casts
// around each matmul: a store-rounding or a widening) and broadcast_in_dim.
// bf16 arithmetic (add, mul of bf16) would need the unfused kernels' own
// rounding points (after each op? each prim?) and stays out.
bool fusible_dtype(DType d) { return d == DType::f32 || d == DType::boolean || d == DType::bf16; }

bool moves_data(OpId op) { return op == OpId::ConvertElementType || op == OpId::BroadcastInDim; }

// Whether `b` may read or define a value of dtype d in a region.
bool fusible_dtype(const BoundSymbol& b, DType d) { return fusible_dtype(d) && (d != DType::bf16 || moves_data(b.op)); }

// A sum or amax over the innermost dim into an f32 row value (the lowerings
// accumulate in f64 or f32); a bf16 operand is read through its convert.
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
  if (out.future || !fusible_dtype(b, out.dtype)) return false;
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
  std::unordered_set<size_t> at;  // the statements' places in the body
};

class Fuser {
 public:
  // Owns the trace: its statements move into the body, then into the output.
  Fuser(Trace trace, Target target) : trace_(std::move(trace)), executor_(target_name(target)) {
    for (const Proxy& a : trace_.args) types_[a.name] = a.type;
  }

  Trace run() {
    std::vector<BoundSymbol> body;
    body.reserve(trace_.bsyms.size());
    for (BoundSymbol& b : trace_.bsyms) {
      if (b.op == OpId::Del) continue;
      if (!inlinable(b, executor_)) {
        body.push_back(std::move(b));
        continue;
      }
      // The decomposition is shared with other traces: its statements are copied.
      for (const BoundSymbol& s : std::as_const(b.subsymbols)) {
        body.push_back(s);
        body.back().executor = executor_;
        inlined_.insert(body.size() - 1);
      }
    }
    trace_.bsyms.clear();
    count_uses(body);
    types_.reserve(types_.size() + body.size());
    for (const BoundSymbol& b : body)
      for (const Proxy& o : b.outputs) types_[o.name] = o.type;
    Trace out = std::move(trace_);  // its statements moved into the body
    out.bsyms.reserve(body.size());
    std::vector<bool> taken(body.size(), false);
    for (size_t i = 0; i < body.size(); ++i) {
      if (taken[i]) continue;
      Region region;
      // A statement is read here for the last time when it is emitted:
      // growth looks only at later statements, and taken ones never again.
      if (!fits(body[i], region)) {
        out.bsyms.push_back(std::move(body[i]));
        continue;
      }
      add(body[i], region);
      region.at.insert(i);
      grow(body, i, region, taken);
      close(region, body, out.bsyms);
    }
    Trace placed = insert_dels(out);
    placed.provenance = "fusion";
    return placed;
  }

 private:
  // An all_gather, reduce_scatter, all_reduce, broadcast, send or recv. (The
  // other collectives: wait, which does not stop a region, and synchronize,
  // which claiming refuses before fusion runs.)
  static bool issues_collective(const BoundSymbol& b) { return op_info(b.op).has(OpTrait::issue); }

  // Grows `r` (begun at statement `first`) with the later statements that fit
  // it, also past statements that stay where they are (a column sum, a
  // matmul, a wait) when they read nothing those define. Joining
  // statements move earlier, to the region: so the growth stops at the first
  // all_gather/reduce_scatter/all_reduce/broadcast (moving compute before
  // it would issue it later than the schedule put it); a wait only moves
  // later relative to the compute, never earlier.
  void grow(const std::vector<BoundSymbol>& body, size_t first, Region& r, std::vector<bool>& taken) const {
    constexpr size_t kLookahead = 64;  // statements passed over, at most
    std::unordered_set<std::string> blocked;  // defined by statements passed over
    std::vector<size_t> floating;  // joined past a statement without reading the region
    std::unordered_set<std::string> anchored;  // defined by the others
    for (const BoundSymbol* b : r.bsyms) anchored.insert(b->outputs[0].name);
    size_t passed = 0;
    for (size_t j = first + 1; j < body.size(); ++j) {
      if (taken[j]) continue;
      const BoundSymbol& b = body[j];
      bool free = true, reads_region = false;
      for (const Operand& in : b.inputs) {
        if (in.is_scalar()) continue;
        if (blocked.count(in.name)) free = false;
        if (anchored.count(in.name)) reads_region = true;
      }
      // A composite's statements join past a statement only all together,
      // which they then do as their own region: joined in part, a
      // layer_norm would hand its centred input over in f32 memory.
      if (free && (passed == 0 || !inlined_.count(j)) && fits(b, r)) {
        add(b, r);
        r.at.insert(j);
        taken[j] = true;
        if (passed > 0 && !reads_region) floating.push_back(j);
        else anchored.insert(b.outputs[0].name);
        continue;
      }
      if (issues_collective(b) || ++passed > kLookahead) break;
      for (const Proxy& o : b.outputs) blocked.insert(o.name);
    }
    // Past a statement, what does not read the region joins it only for a
    // statement of the region that reads it (the broadcast of a layer_norm
    // weight): anything else (a broadcast for a later layer) would become an
    // output, allocated, instead of fusing with its own neighbours.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (size_t f : floating) {
        if (!taken[f] || !r.at.count(f)) continue;
        const std::string& name = body[f].outputs[0].name;
        bool read = false;
        for (size_t u : users_.count(name) ? users_.at(name) : std::vector<size_t>{})
          read = read || r.at.count(u);
        if (read) continue;
        r.at.erase(f);
        taken[f] = false;
        r.defined.erase(name);
        r.bsyms.erase(std::find(r.bsyms.begin(), r.bsyms.end(), &body[f]));
        dropped = true;
      }
    }
  }

  void count_uses(const std::vector<BoundSymbol>& body) {
    users_.reserve(body.size());
    for (size_t i = 0; i < body.size(); ++i)
      for (const Operand& in : body[i].inputs)
        if (!in.is_scalar()) users_[in.name].push_back(i);
    std::vector<std::string> names;
    trace_.returns.collect_names(names);
    returned_.insert(names.begin(), names.end());
  }

  // Whether a value `r` defines is read outside it (later statements, the returns).
  bool read_outside(const std::string& name, const Region& r) const {
    if (returned_.count(name)) return true;
    auto it = users_.find(name);
    if (it == users_.end()) return false;
    for (size_t u : it->second)
      if (!r.at.count(u)) return true;
    return false;
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
      if (t == types_.end() || t->second.future || !fusible_dtype(b, t->second.dtype)) return std::nullopt;
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

  // Emits the region, or its one statement as it is, moving the statements
  // out of `body` (they are not read again).
  void close(Region& r, std::vector<BoundSymbol>& body, std::vector<BoundSymbol>& out) const {
    if (r.bsyms.size() < 2) {
      for (const BoundSymbol* b : r.bsyms) out.push_back(std::move(body[static_cast<size_t>(b - body.data())]));
    } else {
      out.push_back(region_statement(r, body));
    }
  }

  BoundSymbol region_statement(const Region& r, std::vector<BoundSymbol>& body) const {
    BoundSymbol f;
    f.op = OpId::Fusion;
    f.executor = executor_;
    std::unordered_set<std::string> seen;
    std::vector<BoundSymbol> subs;
    subs.reserve(r.bsyms.size());
    for (const BoundSymbol* b : r.bsyms) {
      for (const Operand& in : b->inputs)
        if (!in.is_scalar() && !r.defined.count(in.name) && seen.insert(in.name).second)
          f.inputs.push_back(in);
      if (read_outside(b->outputs[0].name, r)) f.outputs.push_back(b->outputs[0]);
      BoundSymbol s = std::move(body[static_cast<size_t>(b - body.data())]);
      s.executor.clear();
      subs.push_back(std::move(s));
    }
    f.subsymbols = SubSymbols(std::move(subs));
    return f;
  }

  Trace trace_;
  // The target's compute executor, as claim wrote it on each statement.
  std::string executor_;
  std::unordered_map<std::string, TensorType> types_;
  std::unordered_map<std::string, std::vector<size_t>> users_;  // statements reading each value
  std::unordered_set<std::string> returned_;
  std::unordered_set<size_t> inlined_;  // body statements from a composite's decomposition
};

}  // namespace

Trace fuse(Trace trace, Target target) { return Fuser(std::move(trace), target).run(); }

bool has_fusion_executor(Target target) {
  switch (target) {
    case Target::cpu: return true;   // LLVM (executors/fusion/llvm_jit.h)
    case Target::cuda: return true;  // NVRTC (executors/cuda/cuda_fusion.h)
  }
  return false;
}

}  // namespace fsdpc
