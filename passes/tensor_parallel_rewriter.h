// The tp pass's rewriter (passes/tensor_parallel.h), shared by its two
// halves: tensor_parallel.cpp walks the trace (f and g, column- and
// row-parallel products, sequence parallelism, the layouts through shape
// ops) and tensor_parallel_vocab.cpp holds the vocabulary-parallel ops (the
// lookup, the cross-entropy, the fused head, the padding mask and the rank's
// offsets).
// Private to passes/.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>

#include "ir/builder.h"
#include "ir/trace.h"

namespace fsdpc::tp_detail {

// dim < 0: replicated (every tp rank holds the whole value). `seq`: an
// activation of sequence parallelism, its dim 1 (the sequence) split.
// `vocab` > 0: the split dim is a padded vocabulary of that many entries
// (a padded table, its logits), each rank's part ceil(vocab / T) long, the
// entries past `vocab` padding.
struct Layout {
  int64_t dim = -1;
  int64_t blocks = 1;
  bool seq = false;
  int64_t vocab = 0;
  bool split() const { return dim >= 0; }
  bool same_cut(const Layout& o) const { return dim == o.dim && blocks == o.blocks && seq == o.seq && vocab == o.vocab; }
};
constexpr Layout kSeq{1, 1, true};

struct Local {
  std::string name;  // the value's name in the new trace
  Layout layout;
};

class TensorParallel {
 public:
  TensorParallel(Trace& out, int tp, bool sp) : b_(out), tp_(tp), sp_(sp) {}
  void param(const std::string& name, Layout l) { values_[name] = {name, l}; }
  void statement(const BoundSymbol& s);
  const std::unordered_map<std::string, std::string>& renames() const { return renamed_; }
  Layout layout_of(const std::string& old) const {
    auto it = values_.find(old);
    return it == values_.end() ? Layout{} : it->second.layout;
  }

 private:
  Local in(const BoundSymbol& s, size_t i) const;
  void define(const BoundSymbol& s, const Proxy& out, Layout l);
  std::string f(const std::string& x);
  Proxy g(const Proxy& partial);
  Proxy reduce_scatter_seq(const BoundSymbol& s, const Proxy& partial);
  std::string all_gather_seq(const std::string& x);
  Operand scatter_seq(const BoundSymbol& s, const std::string& replicated);
  void norm(const BoundSymbol& s, const Local& x);
  Operand localized(const BoundSymbol& s, size_t i, Layout want);
  void matmul(const BoundSymbol& s);
  void reshape(const BoundSymbol& s, const Local& x);
  void slice(const BoundSymbol& s, const Local& x);
  void take(const BoundSymbol& s, const Local& table);
  void cross_entropy(const BoundSymbol& s, const Local& logits);
  void linear_cross_entropy(const BoundSymbol& s);
  std::string gather_seq_split_back(const std::string& x);
  std::string mask_padding(const std::string& logits, int64_t vocab);
  Proxy rank_offset(int64_t rows, DType dtype, const Device& device);
  std::pair<Proxy, Proxy> local_ids(const std::string& ids, int64_t rows);
  Proxy emit(OpId op, std::vector<Operand> ins, Attrs a = {}) { return b_.emit1(op, std::move(ins), std::move(a)); }
  [[noreturn]] void unsupported(const BoundSymbol& s, const std::string& why) const;

  TraceBuilder b_;
  int tp_;
  bool sp_;  // sequence parallelism: the activations between tp blocks split on the sequence
  std::unordered_map<std::string, Local> values_;     // old name -> new name, layout
  std::unordered_map<std::string, std::string> renamed_;  // old name -> new, where they differ
  std::unordered_map<std::string, std::string> f_;    // new name -> its f output
  std::unordered_map<std::string, std::string> gathered_;  // new name -> its all_gather over the sequence
  std::unordered_map<std::string, const BoundSymbol*> broadcasts_;  // old name -> broadcast_in_dim
  std::unordered_map<std::string, std::string> axis_index_;  // device -> this rank's tp index
  std::unordered_map<std::string, std::string> offsets_;     // device/rows/dtype -> rank_offset's value
};

}  // namespace fsdpc::tp_detail
