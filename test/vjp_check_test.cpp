// Gradient checks of every VJP rule against central finite differences in
// float64 on the reference executor (test/vjp_check.h), with random shapes
// and inputs from fixed seeds: every op of ir/ops.def, the composites' own
// rules, the collectives over meshes of 1-4 ranks and the synchronize
// lowering (zero3 with padding, DDP, hybrid, no_sync, accumulation).
#include <catch2/catch.hpp>
#include <numeric>

#include "frontend/models/gpt2/gpt2.h"
#include "ir/error.h"
#include "test/vjp_check.h"
#include "test/op_samples.h"

using namespace fsdpc;
using namespace fsdpc::testing;

namespace {

const uint64_t kSeeds[] = {1, 2, 3};

std::string label(OpId op, uint64_t seed, const std::string& extra = "") {
  return std::string(op_name(op)) + " seed " + std::to_string(seed) + extra;
}

// A random strictly increasing subset of 0..n-1.
IntList subset(GradCheck& c, int64_t n) {
  IntList s;
  for (int64_t i = 0; i < n; ++i)
    if (c.integer(0, 1)) s.push_back(i);
  return s;
}

Attrs slice_attrs(IntList starts, IntList ends, IntList strides) {
  return Attrs{{"starts", std::move(starts)}, {"ends", std::move(ends)}, {"strides", std::move(strides)}};
}

}  // namespace

TEST_CASE("vjp: unary elementwise ops and convert_element_type", "[vjp]") {
  for (OpId id : test::elementwise_ops(ElementwiseKind::unary))
    for (uint64_t seed : kSeeds) {
      GradCheck c(seed);
      const bool positive = test::op_sample(id).domain(0) == test::Domain::positive;
      Proxy x = c.param(c.shape(c.integer(0, 3)), positive ? 0.5 : -1.5, 2.0);
      c.finish(c.emit(id, {in(x)}));
      c.check(label(id, seed));
    }
  for (DType from : {DType::f32, DType::f64}) {
    GradCheck c(7);
    const DType to = from == DType::f32 ? DType::f64 : DType::f32;
    Proxy x = c.param(c.shape(2), -1.0, 1.0, DistType::none, Tie::rank, from);
    c.finish(c.emit(OpId::ConvertElementType, {in(x)}, {{"dtype", std::string(dtype_name(to))}}));
    c.check("convert_element_type");
  }
}

TEST_CASE("vjp: binary elementwise ops with tensor and scalar operands", "[vjp]") {
  for (OpId id : test::elementwise_ops(ElementwiseKind::binary))
    for (uint64_t seed : kSeeds)
      for (int form = 0; form < 3; ++form) {  // tensor-tensor, tensor-scalar, scalar-tensor
        GradCheck c(seed * 10 + form);
        const Shape s = c.shape(c.integer(0, 3));
        const bool pos_a = test::op_sample(id).domain(0) == test::Domain::positive;
        const bool pos_b = test::op_sample(id).domain(1) == test::Domain::positive;
        const double lit = id == OpId::Pow && form == 1 ? std::vector<double>{0.0, 1.0, 2.0, 3.0, 0.5, -1.5}[seed + form]
                                                        : 1.3;
        Operand a = form == 2 ? Operand::lit(lit) : in(c.param(s, pos_a ? 0.5 : -1.0, 2.0));
        Operand b = form == 1 ? Operand::lit(lit) : in(c.param(s, pos_b ? 0.5 : -1.0, 2.0));
        c.finish(c.emit(id, {a, b}));
        c.check(label(id, seed, " form " + std::to_string(form)));
      }
}

TEST_CASE("vjp: pow's constant exponents, including 0 and 1", "[vjp]") {
  for (double p : {0.0, 1.0, 2.0, 3.0, 0.5, -1.5}) {
    GradCheck c(5);
    Proxy x = c.param(c.shape(2), 0.5, 2.0);
    c.finish(c.emit(OpId::Pow, {in(x), Operand::lit(p)}));
    c.check("pow exponent " + std::to_string(p));
  }
}

TEST_CASE("vjp: comparisons pass no gradient; where routes it", "[vjp]") {
  for (OpId id : {OpId::Eq, OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge}) {
    GradCheck c(11);
    const Shape s = c.shape(2);
    Proxy a = c.param(s), b = c.param(s);
    Proxy mask = c.emit(OpId::ConvertElementType, {in(c.emit(id, {in(a), in(b)}))},
                        {{"dtype", std::string("f32")}});
    c.finish(c.emit(OpId::Mul, {in(mask), in(a)}));
    c.check(label(id, 11));
  }
  for (uint64_t seed : kSeeds)
    for (int form = 0; form < 3; ++form) {
      GradCheck c(seed + 100 * form);
      const Shape s = c.shape(c.integer(1, 3));
      std::vector<double> bits;
      for (int64_t i = 0; i < numel(s); ++i) bits.push_back(static_cast<double>(c.integer(0, 1)));
      Proxy cond = c.input(s, DType::boolean, bits);
      Operand a = form == 2 ? Operand::lit(0.25) : in(c.param(s));
      Operand b = form == 1 ? Operand::lit(-0.5) : in(c.param(s));
      c.finish(c.emit(OpId::Where, {in(cond), a, b}));
      c.check(label(OpId::Where, seed, " form " + std::to_string(form)));
    }
}

TEST_CASE("vjp: sum and amax over random dims", "[vjp]") {
  for (OpId id : {OpId::Sum, OpId::Amax})
    for (uint64_t seed : kSeeds) {
      GradCheck c(seed);
      const Shape s = c.shape(c.integer(1, 3));
      Proxy x = c.param(s);
      c.finish(c.emit(id, {in(x)}, {{"dims", subset(c, static_cast<int64_t>(s.size()))}}));
      c.check(label(id, seed));
    }
}

TEST_CASE("vjp: maximum and amax split the gradient evenly on ties, as PyTorch", "[vjp]") {
  Trace t;
  TraceBuilder b(t);
  Proxy x;
  x.name = "t_x";
  x.param_path = "x";
  x.type.shape = {4};
  b.add_arg(x);
  Proxy m = b.emit1(OpId::Amax, {in(x)}, {{"dims", IntList{0}}});
  Proxy mx = b.emit1(OpId::Maximum, {in(x), Operand::lit(1.0)});
  Proxy s = b.emit1(OpId::Sum, {in(mx)}, {{"dims", IntList{0}}});
  t.returns = ReturnTree::leaf(b.emit1(OpId::Add, {in(m), in(s)}).name);
  Trace joint = grad(t);
  REQUIRE_NOTHROW(verify(joint));
  TensorType scalar;
  auto out = reference::run(joint, {reference::make_value(x.type, {3.0, 1.0, 3.0, 0.0}),
                                    reference::make_value(scalar, {1.0})});
  // amax: 0.5 to each 3.0; maximum(x, 1): 1 where x > 1, 0.5 at the tie x == 1.
  CHECK(out[1].data == std::vector<double>{1.5, 0.5, 1.5, 0.0});
}

TEST_CASE("vjp: reshape, permute and broadcast_in_dim", "[vjp]") {
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape s = c.shape(3);
    Proxy x = c.param(s);
    Shape target = seed == 1 ? Shape{numel(s)} : seed == 2 ? Shape{1, s[2], s[0] * s[1]} : Shape{s[2], s[1], s[0]};
    c.finish(c.emit(OpId::Reshape, {in(x)}, {{"shape", IntList(target)}}));
    c.check(label(OpId::Reshape, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 4));
    IntList perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), c.rng());
    c.finish(c.emit(OpId::Permute, {in(c.param(s))}, {{"dims", perm}}));
    c.check(label(OpId::Permute, seed));
  }
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    GradCheck c(seed);
    const Shape out = c.shape(c.integer(1, 4));
    IntList bdims = subset(c, static_cast<int64_t>(out.size()));
    Shape xs;
    for (int64_t d : bdims) xs.push_back(c.integer(0, 1) ? 1 : out[d]);
    Proxy x = c.param(xs);
    c.finish(c.emit(OpId::BroadcastInDim, {in(x)}, {{"shape", IntList(out)}, {"broadcast_dims", bdims}}));
    c.check(label(OpId::BroadcastInDim, seed));
  }
}

TEST_CASE("vjp: slice (strided: interior padding), pad (with interior) and cat", "[vjp]") {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3), 1, 6);
    IntList starts, ends, strides;
    for (int64_t d : s) {
      starts.push_back(c.integer(0, d - 1));
      ends.push_back(c.integer(starts.back(), d));
      strides.push_back(c.integer(1, 3));
    }
    c.finish(c.emit(OpId::Slice, {in(c.param(s))}, slice_attrs(starts, ends, strides)));
    c.check(label(OpId::Slice, seed));
  }
  for (uint64_t seed : {1, 2, 3, 4}) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3));
    const size_t r = s.size();
    IntList lo, hi, interior;
    for (size_t d = 0; d < r; ++d) {
      lo.push_back(c.integer(0, 2));
      hi.push_back(c.integer(0, 2));
      interior.push_back(c.integer(0, 2));
    }
    Attrs a{{"lo", lo}, {"hi", hi}};
    if (seed % 2 == 0) a.set("interior", interior);
    a.set("value", 0.5);
    c.finish(c.emit(OpId::Pad, {in(c.param(s))}, a));
    c.check(label(OpId::Pad, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    Shape s = c.shape(c.integer(1, 3));
    const int64_t dim = c.integer(0, static_cast<int64_t>(s.size()) - 1);
    std::vector<Operand> xs;
    for (int i = 0; i < 3; ++i) {
      s[dim] = c.integer(1, 3);
      xs.push_back(in(c.param(s)));
    }
    c.finish(c.emit(OpId::Cat, xs, {{"dim", dim}}));
    c.check(label(OpId::Cat, seed));
  }
}

TEST_CASE("vjp: take and index_add (repeated indices accumulate)", "[vjp]") {
  for (uint64_t seed : {1, 2, 3, 4}) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3));
    const int64_t dim = c.integer(0, static_cast<int64_t>(s.size()) - 1);
    Proxy a = c.param(s);
    Proxy idx = c.indices(c.shape(c.integer(0, 2)), s[dim], seed % 2 ? DType::i64 : DType::i32);
    c.finish(c.emit(OpId::Take, {in(a), in(idx)}, {{"dim", dim}}));
    c.check(label(OpId::Take, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3));
    const int64_t dim = c.integer(0, static_cast<int64_t>(s.size()) - 1);
    const int64_t n = c.integer(1, 5);
    Shape src = s;
    src[dim] = n;
    Proxy a = c.param(s), x = c.param(src);
    Proxy idx = c.indices({n}, s[dim]);
    c.finish(c.emit(OpId::IndexAdd, {in(a), in(idx), in(x)}, {{"dim", dim}}));
    c.check(label(OpId::IndexAdd, seed));
  }
}

TEST_CASE("vjp: matmul, batched, and a 2-D right operand against a batched left", "[vjp]") {
  for (int form = 0; form < 3; ++form) {
    GradCheck c(form + 1);
    const int64_t m = c.integer(1, 4), k = c.integer(1, 4), n = c.integer(1, 4);
    Shape batch = form == 0 ? Shape{} : c.shape(form);
    Shape as = batch, bs = form == 2 ? Shape{} : batch;
    as.insert(as.end(), {m, k});
    bs.insert(bs.end(), {k, n});
    c.finish(c.emit(OpId::Matmul, {in(c.param(as)), in(c.param(bs))}));
    c.check(label(OpId::Matmul, form + 1));
  }
}

TEST_CASE("vjp: full and iota carry no gradient", "[vjp]") {
  GradCheck c(3);
  Proxy x = c.param({4});
  Proxy f = c.emit(OpId::Full, {}, {{"shape", IntList{4}}, {"value", 2.0}, {"dtype", std::string("f32")},
                                    {"device", std::string("cpu")}});
  Proxy i = c.emit(OpId::Iota, {}, {{"length", int64_t{4}}, {"dtype", std::string("f32")},
                                    {"device", std::string("cpu")}});
  c.finish(c.emit(OpId::Mul, {in(c.emit(OpId::Add, {in(x), in(f)})), in(i)}));
  c.check("full, iota");
}

TEST_CASE("vjp: linear, gelu, softmax, layer_norm (their own rules)", "[vjp]") {
  for (uint64_t seed : {1, 2, 3, 4}) {
    GradCheck c(seed);
    const int64_t fin = c.integer(1, 4), fout = c.integer(1, 4);
    Shape xs = c.shape(c.integer(0, 2));
    xs.push_back(fin);
    std::vector<Operand> ins = {in(c.param(xs)), in(c.param({fout, fin}))};
    if (seed % 2) ins.push_back(in(c.param({fout})));
    c.finish(c.emit(OpId::Linear, ins));
    c.check(label(OpId::Linear, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    c.finish(c.emit(OpId::Gelu, {in(c.param(c.shape(2), -3.0, 3.0))}, {{"approximate", std::string("tanh")}}));
    c.check(label(OpId::Gelu, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3));
    const int64_t dim = c.integer(0, static_cast<int64_t>(s.size()) - 1);
    c.finish(c.emit(OpId::Softmax, {in(c.param(s, -2.0, 2.0))}, {{"dim", dim}}));
    c.check(label(OpId::Softmax, seed));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape s = c.shape(c.integer(1, 3), 2, 5);
    Proxy x = c.param(s), w = c.param({s.back()}), b = c.param({s.back()});
    c.finish(c.emit(OpId::LayerNorm, {in(x), in(w), in(b)}, {{"eps", 1e-5}}));
    c.check(label(OpId::LayerNorm, seed));
  }
}

TEST_CASE("vjp: scaled_dot_product_attention (causal or not), cross_entropy and a vocabulary slice's stats", "[vjp]") {
  for (uint64_t seed : {1, 2, 3, 4}) {
    GradCheck c(seed);
    const Shape batch = c.shape(c.integer(0, 2), 1, 2);
    const int64_t tq = c.integer(1, 4), tk = c.integer(1, 4), d = c.integer(1, 3), dv = c.integer(1, 3);
    auto shaped = [&](int64_t t, int64_t w) {
      Shape s = batch;
      s.insert(s.end(), {t, w});
      return s;
    };
    Proxy q = c.param(shaped(tq, d)), k = c.param(shaped(tk, d)), v = c.param(shaped(tk, dv));
    const bool causal = seed % 2 == 0;
    c.finish(c.emit(OpId::ScaledDotProductAttention, {in(q), in(k), in(v)},
                    {{"is_causal", causal}, {"scale", c.uniform(0.3, 1.0)}}));
    c.check(label(OpId::ScaledDotProductAttention, seed, causal ? " causal" : ""));
  }
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape batch = c.shape(c.integer(0, 2));
    const int64_t v = c.integer(2, 5);
    Shape ls = batch;
    ls.push_back(v);
    Proxy logits = c.param(ls, -2.0, 2.0);
    Proxy targets = c.indices(batch, v);
    c.finish(c.emit(OpId::CrossEntropy, {in(logits), in(targets)}));
    c.check(label(OpId::CrossEntropy, seed));
  }
  // One rank's slice of a vocabulary-parallel head (tp's fused head), both
  // outputs weighted: its rule's linear_cross_entropy_stats_grad for any
  // cotangents, the last slice's padded classes left out.
  for (uint64_t seed : kSeeds) {
    GradCheck c(seed);
    const Shape batch = c.shape(c.integer(1, 2));
    const int64_t rows = c.integer(2, 4), features = c.integer(1, 3), tp = c.integer(2, 3);
    const int64_t rank = c.integer(0, tp - 1), vocab = rows * tp - c.integer(0, rows - 1);
    Shape hs = batch;
    hs.push_back(features);
    Proxy h = c.param(hs), w = c.param({rows, features});
    Proxy targets = c.indices(batch, vocab);
    Proxy offset = c.input({}, DType::i64, {static_cast<double>(rank * rows)});
    c.finish(c.builder().emit(OpId::LinearCrossEntropyStats, {in(h), in(w), in(targets), in(offset)},
                              {{"vocab", vocab}}));
    c.check(label(OpId::LinearCrossEntropyStats, seed, " rank " + std::to_string(rank) + "/" + std::to_string(tp)));
  }
}

TEST_CASE("vjp: a tiny GPT-2 end to end (tied wte, attention, gelu, layer_norm)", "[vjp]") {
  GPT2 model("gpt2-check", GPT2Config{1, 2, 4, 7, 3, 1e-5});
  CaptureOptions o;
  o.batch = 2;
  o.seq = 3;
  GradCheck c(42);
  c.adopt(capture(model, o), /*bound=*/7, -0.5, 0.5);
  c.check("gpt2 1 layer");
}

// ---- distributed ----

TEST_CASE("vjp: all_gather, reduce_scatter, all_reduce and wait over 1-4 ranks", "[vjp]") {
  for (int world = 1; world <= 4; ++world) {
    Attrs group{{"group", std::string("dp")}, {"size", int64_t{world}}};
    for (OpId id : {OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce}) {
      GradCheck c(world * 7 + static_cast<int>(id), flat_mesh(world));
      Shape s = c.shape(c.integer(1, 3));
      const int64_t dim = c.integer(0, static_cast<int64_t>(s.size()) - 1);
      if (id == OpId::ReduceScatter) s[dim] *= world;
      Attrs a = group;
      if (id != OpId::AllReduce) a.set("dim", dim);
      if (id != OpId::AllGather) a.set("op", std::string("sum"));
      Proxy y = c.emit(OpId::Wait, {in(c.emit(id, {in(c.param(s))}, a))});
      if (id == OpId::ReduceScatter) {  // a shard: gather it before computing with it
        Attrs g = group;
        g.set("dim", dim);
        y = c.emit(OpId::Wait, {in(c.emit(OpId::AllGather, {in(y)}, g))});
      }
      c.finish(c.emit(OpId::Tanh, {in(y)}));
      c.check(label(id, 0, " world " + std::to_string(world)));
    }
  }
}

TEST_CASE("vjp: pack and unpack, and a packed shard buffer gathered", "[vjp]") {
  {
    GradCheck c(5);
    Proxy x = c.param({2, 3}), y = c.param({4});
    Proxy buf = c.emit(OpId::Pack, {in(x), in(y)});
    std::vector<Proxy> parts =
        c.builder().emit(OpId::Unpack, {in(buf)}, {{"shapes", IntLists{{5}, {3}, {1, 2}}}});
    c.finish({parts[0], parts[2]});  // parts[1] gets no cotangent: zeros fill it
    c.check("pack, unpack");
  }
  for (int world = 1; world <= 3; ++world) {
    GradCheck c(world, flat_mesh(world));
    Proxy x = c.param({2, 3}, -1, 1, DistType::fully_sharded), y = c.param({4}, -1, 1, DistType::fully_sharded);
    Proxy buf = c.emit(OpId::Pack, {in(x), in(y)});
    Proxy f = c.emit(OpId::AllGather, {in(buf)}, {{"group", std::string("dp")}, {"size", int64_t{world}}, {"dim", int64_t{0}}});
    c.finish(c.emit(OpId::Exp, {in(c.emit(OpId::Wait, {in(f)}))}));
    c.check("pack + all_gather, world " + std::to_string(world));
  }
}

namespace {

// synchronize(x) used twice (tanh and a product), as a tied weight would be.
void sync_case(GradCheck& c, const Proxy& x, Attrs attrs) {
  Proxy s = c.emit(OpId::Synchronize, {in(x)}, std::move(attrs));
  c.finish({c.emit(OpId::Tanh, {in(s)}), c.emit(OpId::Mul, {in(s), in(s)})});
}

Attrs sync_attrs(const std::string& group, int64_t size, const Shape& full) {
  Attrs a{{"group", group}, {"size", size}};
  if (!full.empty()) a.set("shape", IntList(full));
  return a;
}

}  // namespace

TEST_CASE("vjp: synchronize lowering, zero3 over 1-4 ranks with and without padding", "[vjp]") {
  for (int world = 1; world <= 4; ++world)
    for (int64_t rows : {int64_t{4}, int64_t{5}, int64_t{7}}) {
      GradCheck c(world * 100 + rows, flat_mesh(world));
      const int64_t shard = (rows + world - 1) / world, cols = c.integer(1, 3);
      Proxy x = c.param({shard, cols}, -1, 1, DistType::fully_sharded);
      sync_case(c, x, sync_attrs("dp", world, {rows, cols}));
      // Each rank's loss is its own; the gradient is that of their mean.
      c.check("zero3 world " + std::to_string(world) + " rows " + std::to_string(rows), 1.0 / world);
    }
}

TEST_CASE("vjp: synchronize lowering, DDP (replicated) and hybrid", "[vjp]") {
  for (int world = 1; world <= 4; ++world) {
    GradCheck c(world, flat_mesh(world));
    Proxy x = c.param({3, 2}, -1, 1, DistType::replicated, Tie::all);
    sync_case(c, x, sync_attrs("dp", world, {}));
    c.check("ddp world " + std::to_string(world), 1.0 / world);
  }
  for (Mesh mesh : {Mesh{2, 2}, Mesh{2, 1}, Mesh{1, 2}}) {
    GradCheck c(mesh.world() + mesh.shards, mesh);
    const int64_t rows = 5, shard = (rows + mesh.shards - 1) / mesh.shards;
    Proxy x = c.param({shard, 2}, -1, 1, DistType::fully_sharded, Tie::replica);
    Attrs a = sync_attrs("shard", mesh.shards, {rows, 2});
    a.set("replicate_group", std::string("replicate")).set("replicate_size", int64_t{mesh.replicas});
    sync_case(c, x, a);
    c.check("hybrid " + std::to_string(mesh.replicas) + "x" + std::to_string(mesh.shards),
            1.0 / mesh.world());
  }
}

TEST_CASE("vjp: no_sync gives each rank its own gradient; accumulation adds acc_*", "[vjp]") {
  GradOptions no_sync;
  no_sync.sync_grads = false;
  GradCheck c(9, flat_mesh(3));
  Proxy x = c.param({3, 2}, -1, 1, DistType::replicated, Tie::rank);
  sync_case(c, x, sync_attrs("dp", 3, {}));
  c.check("ddp no_sync", 1.0, no_sync);

  // zero3, 5 rows over 3 ranks: grad = shard of (local grads + acc) / 3 summed.
  GradOptions acc;
  acc.accumulate_grads = true;
  GradCheck z(10, flat_mesh(3));
  Proxy w = z.param({2, 2}, -1, 1, DistType::fully_sharded);
  sync_case(z, w, sync_attrs("dp", 3, {5, 2}));
  TensorType full;
  full.shape = {5, 2};
  std::vector<std::vector<double>> accs;
  for (int r = 0; r < 3; ++r) {
    accs.push_back({});
    for (int i = 0; i < 10; ++i) accs.back().push_back(z.uniform(-1, 1));
    z.extra_args.push_back({reference::make_value(full, accs.back())});
  }
  z.offset = [&](int r, size_t, size_t i) {
    const size_t flat = static_cast<size_t>(r) * 4 + i;  // row-major index into the full [5, 2]
    if (flat >= 10) return 0.0;                          // the last rank's padding row
    return (accs[0][flat] + accs[1][flat] + accs[2][flat]) / 3.0;
  };
  z.check("zero3 accumulate", 1.0 / 3, acc);
}

TEST_CASE("vjp: broadcast has no VJP and says so", "[vjp]") {
  GradCheck c(1, flat_mesh(2));
  Proxy f = c.emit(OpId::Broadcast, {in(c.param({3}))},
                   {{"group", std::string("dp")}, {"size", int64_t{2}}, {"root", int64_t{0}}});
  c.finish(c.emit(OpId::Wait, {in(f)}));
  CHECK_THROWS_WITH(c.check("broadcast"), Catch::Contains("no VJP for broadcast"));
}
