// bucketing: the per-parameter collectives of one FSDP unit become one
// collective over a flat buffer (as PyTorch FSDP's FlatParameter), and DDP's
// gradient all_reduces are grouped into buckets of at most bucket_mb MiB.
//
// Pre:  a forward or backward trace from split. Chains are found by
//       structure: all_gather(param shard) -> wait [-> slice off padding];
//       [div/pad ->] reduce_scatter -> wait [-> all_reduce(replicate) -> wait]
//       or (no_shard) all_reduce -> wait, ending in a returned gradient.
//       Mixed precision (autocast) adds a cast before a gather
//       (convert(param shard) -> all_gather) and after a reduction (-> convert
//       to f32): a bucket then packs the f32 shards and casts the flat buffer
//       once, and casts the reduced flat shard back once before unpacking.
// Post: FSDP with unit_buckets: one pack -> all_gather -> wait per unit where
//       its first parameter was gathered, each parameter cut out of the
//       gathered [N*total] buffer under its old name; one reduce_scatter per
//       unit over an interleaved [N*total] buffer (rank r's slice holds its
//       shard of every gradient) where the unit's last gradient is ready,
//       unpacked under the old names; a gradient all_reduce standing alone
//       (hybrid with one shard per replica, after elide) likewise, one
//       all_reduce per unit. no_shard: pack -> all_reduce -> wait ->
//       unpack per bucket, filled in the order gradients become ready. A unit
//       or bucket of one parameter is left as it was. Otherwise the identity.
//
//   ft1 = all_gather(t_a, size=2); t2 = wait(ft1)    # t_a: [4, 16] shard
//   ft3 = all_gather(t_b, size=2); t4 = wait(ft3)    # t_b: [2, 16] shard
// becomes
//   t5 = pack(t_a, t_b); ft6 = all_gather(t5, size=2); t7 = wait(ft6); t8 = reshape(t7, shape=[2, 96])
//   t9 = slice(t8, starts=[0, 0], ends=[2, 64]); t2 = reshape(t9, shape=[8, 16])
//   t10 = slice(t8, starts=[0, 64], ends=[2, 96]); t4 = reshape(t10, shape=[4, 16])
#include "passes/bucketing.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/quantize.h"

namespace fsdpc {

namespace {

// One per-parameter collective chain, as the rest of the trace sees it.
struct Chain {
  std::string param;             // the parameter it gathers or reduces ("" for DDP)
  std::vector<size_t> stmts;     // the statements the bucket replaces
  std::string input;             // the shard (gather) or the padded gradient (reduce)
  std::string result;            // the name later statements and returns read
  Shape shape;                   // result's shape
  Attrs attrs;                   // the collective's
  std::optional<Attrs> replicate;  // hybrid: the all_reduce over replicas
  // Mixed precision: the dtype a gather's shard is cast to before it is
  // gathered, or a reduced gradient is cast to after its reduction.
  std::optional<DType> cast;
};

struct Bucket {
  std::vector<Chain> chains;
  size_t anchor = 0;  // the statement the bucket is emitted at
};

struct Index {
  const Trace& trace;
  std::unordered_map<std::string, std::vector<size_t>> users;
  std::unordered_map<std::string, const Proxy*> args;
  std::unordered_map<std::string, const TensorType*> types;  // into the trace
  std::unordered_map<std::string, size_t> returned;  // name -> position in the returns
  std::unordered_map<std::string, size_t> def;       // name -> defining statement
};

Index index_of(const Trace& t) {
  Index ix{t, {}, {}, {}, {}, {}};
  ix.users.reserve(t.bsyms.size());
  ix.types.reserve(t.args.size() + t.bsyms.size());
  ix.def.reserve(t.bsyms.size());
  for (const Proxy& a : t.args) ix.types[a.name] = &a.type;
  for (size_t i = 0; i < t.bsyms.size(); ++i) {
    for (const Operand& in : t.bsyms[i].inputs)
      if (!in.is_scalar()) ix.users[in.name].push_back(i);
    for (const Proxy& o : t.bsyms[i].outputs) {
      ix.types[o.name] = &o.type;
      ix.def[o.name] = i;
    }
  }
  for (const Proxy& a : t.args) ix.args[a.name] = &a;
  std::vector<std::string> names;
  t.returns.collect_names(names);
  for (size_t i = 0; i < names.size(); ++i) ix.returned.emplace(names[i], i);
  return ix;
}

// The one statement reading `name`, when it is `op` and nothing else reads it.
std::optional<size_t> sole_user(const Index& ix, const std::string& name, OpId op) {
  auto it = ix.users.find(name);
  if (it == ix.users.end() || it->second.size() != 1 || ix.returned.count(name)) return std::nullopt;
  if (ix.trace.bsyms[it->second[0]].op != op) return std::nullopt;
  return it->second[0];
}

bool used_by_statements(const Index& ix, const std::string& name) { return ix.users.count(name) > 0; }

// A slice that only drops trailing rows of dim 0 (the last rank's padding).
bool drops_padding(const BoundSymbol& s, const Shape& in) {
  const IntList& starts = s.attrs.get_ints("starts");
  const IntList& ends = s.attrs.get_ints("ends");
  const IntList& strides = s.attrs.get_ints("strides");
  for (size_t d = 0; d < in.size(); ++d) {
    if (starts[d] != 0 || strides[d] != 1) return false;
    if (d > 0 && ends[d] != in[d]) return false;
  }
  return true;
}

// all_gather(param shard, dim=0) -> wait [-> slice off padding].
std::optional<Chain> gather_chain(const Index& ix, size_t i) {
  const BoundSymbol& ag = ix.trace.bsyms[i];
  std::string shard = ag.inputs[0].name;
  std::optional<size_t> cast;  // convert(param shard), read by this gather only
  if (!ix.args.count(shard)) {
    auto def = ix.def.find(shard);
    if (def == ix.def.end()) return std::nullopt;
    const BoundSymbol& cv = ix.trace.bsyms[def->second];
    if (cv.op != OpId::ConvertElementType || !sole_user(ix, shard, OpId::AllGather)) return std::nullopt;
    cast = def->second;
    shard = cv.inputs[0].name;
  }
  auto arg = ix.args.find(shard);
  if (arg == ix.args.end() || !arg->second->is_param() || ag.attrs.get_int_or("dim", -1) != 0)
    return std::nullopt;
  if (arg->second->type.dist != DistType::fully_sharded) return std::nullopt;
  auto w = sole_user(ix, ag.output().name, OpId::Wait);
  if (!w) return std::nullopt;
  Chain c{arg->first, {i, *w}, arg->first, "", {}, ag.attrs, std::nullopt, std::nullopt};
  if (cast) {
    c.stmts.push_back(*cast);
    c.cast = ag.output().type.dtype;
  }
  const Proxy& full = ix.trace.bsyms[*w].output();
  c.result = full.name;
  c.shape = full.type.shape;
  if (auto s = sole_user(ix, full.name, OpId::Slice); s && drops_padding(ix.trace.bsyms[*s], c.shape)) {
    c.stmts.push_back(*s);
    c.result = ix.trace.bsyms[*s].output().name;
    c.shape = ix.trace.bsyms[*s].output().type.shape;
  }
  return c;
}

// collective -> wait [-> all_reduce(replicate) -> wait], ending in a value
// only the returns read: a gradient.
std::optional<Chain> reduce_chain(const Index& ix, size_t i, bool follow_replicate) {
  const BoundSymbol& coll = ix.trace.bsyms[i];
  if (coll.op == OpId::ReduceScatter && coll.attrs.get_int_or("dim", -1) != 0) return std::nullopt;
  auto w = sole_user(ix, coll.output().name, OpId::Wait);
  if (!w) return std::nullopt;
  Chain c{"", {i, *w}, coll.inputs[0].name, "", {}, coll.attrs, std::nullopt, std::nullopt};
  const Proxy* out = &ix.trace.bsyms[*w].output();
  if (follow_replicate) {
    if (auto ar = sole_user(ix, out->name, OpId::AllReduce)) {
      auto w2 = sole_user(ix, ix.trace.bsyms[*ar].output().name, OpId::Wait);
      if (!w2) return std::nullopt;
      c.stmts.insert(c.stmts.end(), {*ar, *w2});
      c.replicate = ix.trace.bsyms[*ar].attrs;
      out = &ix.trace.bsyms[*w2].output();
    }
  }
  if (auto cv = sole_user(ix, out->name, OpId::ConvertElementType)) {  // autocast's cast back
    c.stmts.push_back(*cv);
    c.cast = ix.trace.bsyms[*cv].output().type.dtype;
    out = &ix.trace.bsyms[*cv].output();
  }
  if (used_by_statements(ix, out->name) || !ix.returned.count(out->name)) return std::nullopt;
  c.result = out->name;
  c.shape = out->type.shape;
  return c;
}

// What chains must share to travel in one buffer: unit, group, size,
// element type, device, replicate group, and the cast (if any).
using BucketKey = std::tuple<size_t, std::string, int64_t, DType, std::string, std::string, int>;

BucketKey key_of(const Index& ix, const Chain& c, size_t unit) {
  const TensorType& t = *ix.types.at(c.input);
  return {unit, c.attrs.get_str("group"), c.attrs.get_int("size"), t.dtype, device_name(t.device),
          c.replicate ? c.replicate->get_str("group") : "", c.cast ? static_cast<int>(*c.cast) : -1};
}

// Where each parameter sits: its unit and its place in the unit.
using UnitMap = std::unordered_map<std::string, std::pair<size_t, size_t>>;

// FSDP: chains grouped by unit, buckets in order of first appearance; a
// gather bucket sits at its first chain, a gradient bucket at its last
// (`at_last`), where every gradient in it is ready. Inside a bucket the
// parameters keep their unit's (argument) order, so the gathered buffer and
// the gradient shard share one layout, as FSDP's FlatParameter does.
std::vector<Bucket> by_unit(const Index& ix, std::vector<Chain> chains, const UnitMap& unit_of, bool at_last) {
  std::vector<Bucket> buckets;
  std::map<BucketKey, size_t> open;
  for (Chain& c : chains) {
    auto [it, added] = open.emplace(key_of(ix, c, unit_of.at(c.param).first), buckets.size());
    if (added) buckets.push_back({{}, c.stmts[0]});
    Bucket& b = buckets[it->second];
    if (at_last) b.anchor = c.stmts[0];
    b.chains.push_back(std::move(c));
  }
  for (Bucket& b : buckets)
    std::sort(b.chains.begin(), b.chains.end(), [&](const Chain& x, const Chain& y) {
      return unit_of.at(x.param).second < unit_of.at(y.param).second;
    });
  return buckets;
}

std::vector<Bucket> fsdp_buckets(const Index& ix, const BucketingOptions& o) {
  UnitMap unit_of;
  for (size_t u = 0; u < o.units.size(); ++u)
    for (size_t i = 0; i < o.units[u].params.size(); ++i) unit_of.emplace(o.units[u].params[i], std::make_pair(u, i));
  std::vector<Chain> gathers, grads;
  std::unordered_set<std::string> gathered;  // a parameter gathered again: that chain stays as it is
  std::unordered_set<size_t> in_chain;        // a reduce_scatter chain's replica all_reduce
  for (size_t i = 0; i < ix.trace.bsyms.size(); ++i) {
    const OpId op = ix.trace.bsyms[i].op;
    if (op == OpId::AllGather) {
      std::optional<Chain> c = gather_chain(ix, i);
      if (c && unit_of.count(c->param) && gathered.insert(c->param).second) gathers.push_back(*c);
    } else if (op == OpId::ReduceScatter || (op == OpId::AllReduce && !in_chain.count(i))) {
      // A gradient all_reduce of its own is hybrid sharding's replica
      // reduction where elide dropped a one-rank reduce_scatter (--mesh R,1):
      // per unit, as the reduce_scatters it stands for would be, rather than
      // one small collective per parameter.
      std::optional<Chain> c = reduce_chain(ix, i, op == OpId::ReduceScatter);
      if (!c) continue;
      in_chain.insert(c->stmts.begin(), c->stmts.end());
      const size_t pos = ix.returned.at(c->result);
      if (pos >= o.grad_params.size() || !unit_of.count(o.grad_params[pos])) continue;
      c->param = o.grad_params[pos];
      grads.push_back(*c);
    }
  }
  std::vector<Bucket> buckets = by_unit(ix, std::move(gathers), unit_of, false);
  for (Bucket& b : by_unit(ix, std::move(grads), unit_of, true)) buckets.push_back(std::move(b));
  return buckets;
}

// DDP: consecutive gradients in the order they become ready (the order of
// their all_reduces), at most bucket_mb MiB per bucket, at least one.
std::vector<Bucket> ddp_buckets(const Index& ix, const BucketingOptions& o) {
  const double cap_bytes = o.bucket_mb * 1024.0 * 1024.0;
  std::vector<Bucket> buckets;
  std::optional<BucketKey> open_key;
  double held = 0;
  for (size_t i = 0; i < ix.trace.bsyms.size(); ++i) {
    if (ix.trace.bsyms[i].op != OpId::AllReduce) continue;
    std::optional<Chain> c = reduce_chain(ix, i, false);
    if (!c) continue;
    const BucketKey key = key_of(ix, *c, 0);
    const double bytes = static_cast<double>(numel(c->shape) * dtype_size(std::get<3>(key)));
    if (!open_key || *open_key != key || held + bytes > cap_bytes) {
      buckets.push_back({});
      open_key = key;
      held = 0;
    }
    held += bytes;
    buckets.back().anchor = i;
    buckets.back().chains.push_back(std::move(*c));
  }
  return buckets;
}

Operand use(const Proxy& p) { return Operand::of(p.name); }

// Whether int8 can code every shard of a gather bucket (f32 or bf16).
bool quantizable(TraceBuilder& b, const Bucket& bucket) {
  for (const Chain& c : bucket.chains)
    if (const DType d = b.type_of(c.input).dtype; d != DType::f32 && d != DType::bf16) return false;
  return true;
}

Proxy reshape(TraceBuilder& b, const std::string& x, Shape shape, const std::string& name = "") {
  return b.emit_named(OpId::Reshape, {Operand::of(x)}, Attrs{{"shape", std::move(shape)}}, {name})[0];
}

Proxy slice(TraceBuilder& b, const std::string& x, IntList starts, IntList ends, const std::string& name = "") {
  IntList strides(starts.size(), 1);
  return b.emit_named(OpId::Slice, {Operand::of(x)},
                      Attrs{{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"strides", std::move(strides)}},
                      {name})[0];
}

// pack(shards) -> all_gather -> wait -> [N, total]; each parameter is the
// column block of its shard, reshaped to the padded full shape, unpadded.
// With int8 gathers each shard is quantized before the pack (its rows in
// blocks of their own, ir/quantize.h), and each column block of codes is
// dequantized into the dtype the parameter is computed in.
void emit_gather(TraceBuilder& b, const Bucket& bucket, bool int8) {
  const int64_t n = bucket.chains[0].attrs.get_int("size");
  const Attrs block{{"block", kQuantBlock}};
  std::vector<Operand> shards;
  std::vector<Shape> packed;  // each chain's part of a rank's buffer
  int64_t total = 0;
  for (const Chain& c : bucket.chains) {
    const std::string part = int8 ? b.emit1(OpId::Quantize, {Operand::of(c.input)}, block).name : c.input;
    shards.push_back(Operand::of(part));
    packed.push_back(b.type_of(part).shape);
    total += numel(packed.back());
  }
  Proxy buf = b.emit1(OpId::Pack, std::move(shards));
  if (const auto& cast = bucket.chains[0].cast; cast && !int8)  // one cast of the flat buffer
    buf = b.emit1(OpId::ConvertElementType, {use(buf)}, Attrs{{"dtype", std::string(dtype_name(*cast))}});
  Proxy gathered = b.emit1(OpId::Wait, {use(b.emit1(OpId::AllGather, {use(buf)}, bucket.chains[0].attrs))});
  Proxy rows = reshape(b, gathered.name, {n, total});
  int64_t offset = 0;
  for (size_t i = 0; i < bucket.chains.size(); ++i) {
    const Chain& c = bucket.chains[i];
    Shape padded = b.type_of(c.input).shape;
    const int64_t len = numel(packed[i]);
    Proxy column = slice(b, rows.name, {0, offset}, {n, offset + len});
    offset += len;
    padded[0] *= n;
    const std::string name = padded == c.shape ? c.result : "";  // no padding to drop: the result itself
    Proxy full;
    if (!int8) {
      full = reshape(b, column.name, padded, name);
    } else {
      const DType dtype = c.cast ? *c.cast : b.type_of(c.input).dtype;
      const Attrs a = Attrs(block).set("dtype", std::string(dtype_name(dtype)));
      if (padded.size() == 1) {  // [N, codes] rows: dequantized, then flattened
        Proxy values = b.emit1(OpId::Dequantize, {use(column)}, a);
        full = reshape(b, values.name, padded, name);
      } else {  // [N * rows, ..., codes]
        Shape codes = packed[i];
        codes[0] *= n;
        full = b.emit_named(OpId::Dequantize, {use(reshape(b, column.name, codes))}, a, {name})[0];
      }
    }
    if (name.empty()) slice(b, full.name, IntList(padded.size(), 0), c.shape, c.result);
  }
}

// Each padded gradient [N*rows, ...] as [N, shard numel], side by side:
// row r of the [N, total] buffer is what rank r keeps of every gradient.
void emit_reduce_scatter(TraceBuilder& b, const Bucket& bucket) {
  const Chain& first = bucket.chains[0];
  const int64_t n = first.attrs.get_int("size");
  std::vector<Operand> columns;
  IntLists shapes;
  std::vector<std::string> names;
  int64_t total = 0;
  for (const Chain& c : bucket.chains) {
    const int64_t len = numel(c.shape);
    columns.push_back(use(reshape(b, c.input, {n, len})));
    total += len;
    shapes.push_back(c.shape);
    names.push_back(c.result);
  }
  Proxy side_by_side = b.emit1(OpId::Cat, std::move(columns), Attrs{{"dim", int64_t{1}}});
  Proxy flat = reshape(b, side_by_side.name, {n * total});
  Proxy shard = b.emit1(OpId::Wait, {use(b.emit1(OpId::ReduceScatter, {use(flat)}, first.attrs))});
  if (first.replicate)
    shard = b.emit1(OpId::Wait, {use(b.emit1(OpId::AllReduce, {use(shard)}, *first.replicate))});
  if (first.cast)  // one cast of the reduced flat shard
    shard = b.emit1(OpId::ConvertElementType, {use(shard)}, Attrs{{"dtype", std::string(dtype_name(*first.cast))}});
  b.emit_named(OpId::Unpack, {use(shard)}, Attrs{{"shapes", std::move(shapes)}}, names);
}

// DDP: pack -> all_reduce -> wait -> unpack.
void emit_all_reduce(TraceBuilder& b, const Bucket& bucket) {
  std::vector<Operand> grads;
  IntLists shapes;
  std::vector<std::string> names;
  for (const Chain& c : bucket.chains) {
    grads.push_back(Operand::of(c.input));
    shapes.push_back(c.shape);
    names.push_back(c.result);
  }
  Proxy buf = b.emit1(OpId::Pack, std::move(grads));
  Proxy sum = b.emit1(OpId::Wait, {use(b.emit1(OpId::AllReduce, {use(buf)}, bucket.chains[0].attrs))});
  if (const auto& cast = bucket.chains[0].cast)
    sum = b.emit1(OpId::ConvertElementType, {use(sum)}, Attrs{{"dtype", std::string(dtype_name(*cast))}});
  b.emit_named(OpId::Unpack, {use(sum)}, Attrs{{"shapes", std::move(shapes)}}, names);
}

}  // namespace

std::vector<std::string> gradient_params(const Trace& trace) {
  std::vector<std::string> out;
  for (const Proxy& a : trace.args)
    if (a.is_param() && a.requires_grad) out.push_back(a.name);
  return out;
}

Trace bucketing(const Trace& trace, const BucketingOptions& o) {
  const bool ddp = o.strategy == Strategy::no_shard;
  Trace out = without_statements(trace, "bucketing");  // the statements are appended one by one below
  if (!ddp && !o.unit_buckets) {
    out.bsyms = trace.bsyms;
    return out;
  }
  if (ddp && !(o.bucket_mb > 0)) fail("bucketing: bucket_mb must be positive, got ", o.bucket_mb);

  const Index ix = index_of(trace);
  std::vector<Bucket> buckets = ddp ? ddp_buckets(ix, o) : fsdp_buckets(ix, o);
  std::unordered_map<size_t, const Bucket*> anchored;
  std::unordered_set<size_t> replaced;
  for (const Bucket& bucket : buckets) {
    if (bucket.chains.size() < 2) continue;  // one collective already
    anchored[bucket.anchor] = &bucket;
    for (const Chain& c : bucket.chains) replaced.insert(c.stmts.begin(), c.stmts.end());
  }

  out.bsyms.reserve(trace.bsyms.size() + 8 * buckets.size());
  TraceBuilder b(out);
  for (size_t i = 0; i < trace.bsyms.size(); ++i) {
    if (auto it = anchored.find(i); it != anchored.end()) {
      const Bucket& bucket = *it->second;
      const OpId op = trace.bsyms[i].op;
      if (op == OpId::AllGather) emit_gather(b, bucket, o.int8_gathers && quantizable(b, bucket));
      else if (op == OpId::ReduceScatter) emit_reduce_scatter(b, bucket);
      else emit_all_reduce(b, bucket);
    }
    if (!replaced.count(i)) b.append(trace.bsyms[i]);
  }
  return out;
}

}  // namespace fsdpc
