// fuse_head (fuse_head.h): one walk to find the heads and count uses, one to
// rewrite.
#include "passes/fuse_head.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/meta.h"

namespace fsdpc {

namespace {

// Renames the definition of `from` in b (and, for a composite, inside its
// decomposition, where the same value is defined last) to `to`.
void rename_definition(BoundSymbol& b, const std::string& from, const std::string& to) {
  bool found = false;
  for (Proxy& o : b.outputs)
    if (o.name == from) {
      o.name = to;
      found = true;
    }
  if (found)
    for (BoundSymbol& sub : b.subsymbols.mut()) rename_definition(sub, from, to);
}

// A head found: the statements that go, and linear_cross_entropy's inputs.
struct Head {
  std::string h, w;
  std::vector<size_t> removed;  // the product, and a permute only it used
};

class Finder {
 public:
  explicit Finder(const Trace& t) : t_(t) {
    for (size_t i = 0; i < t.bsyms.size(); ++i) {
      for (const Proxy& o : t.bsyms[i].outputs) def_[o.name] = i;
      for (const Operand& in : t.bsyms[i].inputs)
        if (!in.is_scalar()) ++uses_[in.name];
    }
    std::vector<std::string> returned;
    t.returns.collect_names(returned);
    for (const std::string& n : returned) ++uses_[n];  // a returned value is used
  }

  // The head feeding cross_entropy `ce`, if it is one this pass fuses.
  std::optional<Head> head_of(const BoundSymbol& ce) const {
    if (ce.inputs.size() != 2 || ce.inputs[0].is_scalar()) return std::nullopt;
    const std::string& logits = ce.inputs[0].name;
    const BoundSymbol* p = sole_use_def(logits);
    // On any device: the CPU and the CUDA executor both have the fused
    // kernels (executors/cpu/cpu_head.h, executors/cuda/cuda_head.cpp).
    if (!p) return std::nullopt;
    // A head captured in bf16 has a bf16 loss; the fused op's is f32.
    const DType dt = p->outputs[0].type.dtype;
    if (linear_cross_entropy_loss_dtype(dt) != dt) return std::nullopt;
    Head head;
    head.removed.push_back(def_.at(logits));
    if (p->op == OpId::Linear && p->inputs.size() == 2) {
      head.h = p->inputs[0].name;
      head.w = p->inputs[1].name;
    } else if (p->op == OpId::Matmul) {
      const std::string& rhs = p->inputs[1].name;
      auto d = def_.find(rhs);
      if (d == def_.end()) return std::nullopt;
      const BoundSymbol& perm = t_.bsyms[d->second];
      if (perm.op != OpId::Permute || perm.attrs.get_ints("dims") != IntList{1, 0}) return std::nullopt;
      head.h = p->inputs[0].name;
      head.w = perm.inputs[0].name;
      if (uses_.at(rhs) == 1) head.removed.push_back(d->second);
    } else {
      return std::nullopt;
    }
    return head;
  }

 private:
  // The statement defining `name` when cross_entropy is its only use.
  const BoundSymbol* sole_use_def(const std::string& name) const {
    auto d = def_.find(name);
    if (d == def_.end() || uses_.at(name) != 1) return nullptr;
    const BoundSymbol& b = t_.bsyms[d->second];
    if (b.outputs.size() != 1 || b.inputs.size() < 2 || b.inputs[0].is_scalar() || b.inputs[1].is_scalar())
      return nullptr;
    return &b;
  }

  const Trace& t_;
  std::unordered_map<std::string, size_t> def_;
  std::unordered_map<std::string, int> uses_;
};

}  // namespace

std::string loss_chunk_name(const LossChunk& c) {
  if (!c.fuse) return "off";
  return c.rows > 0 ? std::to_string(c.rows) : "auto";
}

Trace fuse_head(const Trace& trace, const LossChunk& options) {
  if (!options.fuse) return trace;
  const Finder finder(trace);
  std::unordered_map<size_t, Head> heads;  // cross_entropy's index -> its head
  std::unordered_set<size_t> removed;
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (trace.bsyms[i].op != OpId::CrossEntropy) continue;
    if (std::optional<Head> h = finder.head_of(trace.bsyms[i])) {
      for (size_t r : h->removed) removed.insert(r);
      heads.emplace(i, std::move(*h));
    }
  }
  if (heads.empty()) return trace;

  Trace out = without_statements(trace, "fuse_head");
  TraceBuilder b(out);
  Attrs attrs;
  if (options.rows > 0) attrs.set("chunk", options.rows);
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (removed.count(i)) continue;
    auto head = heads.find(i);
    if (head == heads.end()) {
      b.append(trace.bsyms[i]);
      continue;
    }
    const BoundSymbol& ce = trace.bsyms[i];
    Proxy loss = b.emit1(OpId::LinearCrossEntropy,
                         {Operand::of(head->second.h), Operand::of(head->second.w), ce.inputs[1]}, attrs);
    rename_definition(out.bsyms.back(), loss.name, ce.output().name);
  }
  return out;
}

}  // namespace fsdpc
