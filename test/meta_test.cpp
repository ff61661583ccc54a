// Meta functions: output types of every op family for good inputs, and for
// each shape rule of docs/ir.md a bad input and the message it must produce
// (meta_sweep_test.cpp runs every op of ops.def).
#include <catch2/catch.hpp>
#include <vector>

#include "ir/error.h"
#include "ir/meta.h"

using namespace fsdpc;
using Catch::Contains;
using Catch::Equals;

namespace {

TensorType ty(Shape s, DType d = DType::f32, DistType dist = DistType::none,
              bool future = false) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  t.dist = dist;
  t.future = future;
  return t;
}

OperandType in(Shape s, DType d = DType::f32, DistType dist = DistType::none,
               bool future = false) {
  return OperandType::of(ty(std::move(s), d, dist, future));
}

OperandType lit() { return OperandType::scalar(); }

TensorType infer1(OpId op, const std::vector<OperandType>& inputs, const Attrs& attrs = {}) {
  std::vector<TensorType> out = infer_types(op, inputs, attrs);
  REQUIRE(out.size() == 1);
  return out[0];
}

// The fsdpc::Error message a call raises; any other exception fails the test.
std::string error_of(OpId op, const std::vector<OperandType>& inputs, const Attrs& attrs = {}) {
  try {
    infer_types(op, inputs, attrs);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

const DType f32 = DType::f32, i64 = DType::i64, i32 = DType::i32, b8 = DType::boolean;
const DistType kSharded = DistType::fully_sharded, kRepl = DistType::replicated;

}  // namespace

TEST_CASE("arity is checked against the op table first", "[meta]") {
  CHECK_THAT(error_of(OpId::Add, {in({4})}), Equals("add: expects 2 inputs, got 1"));
  CHECK_THAT(error_of(OpId::Linear, {in({2, 3}), in({4, 3}), in({4}), in({4})}),
             Equals("linear: expects 2 to 3 inputs, got 4"));
  CHECK_THAT(error_of(OpId::Cat, {}, {{"dim", int64_t{0}}}),
             Equals("cat: expects at least 1 input, got 0"));
  CHECK_THAT(error_of(OpId::Full, {in({1})}), Equals("full: expects 0 inputs, got 1"));
}

TEST_CASE("rules shared by all ops: scalars, futures, devices", "[meta]") {
  CHECK_THAT(error_of(OpId::Add, {lit(), lit()}),
             Contains("add: all inputs are scalar literals"));
  CHECK_THAT(error_of(OpId::Exp, {lit()}), Contains("exp: all inputs are scalar literals"));
  CHECK_THAT(error_of(OpId::Matmul, {in({2, 2}), lit()}),
             Contains("matmul: input 1 is a scalar literal; only elementwise ops"));
  CHECK_THAT(error_of(OpId::Add, {in({4}, f32, kRepl, true), in({4})}),
             Equals("add: input 0 is a future; only wait may consume it"));
  CHECK_THAT(error_of(OpId::AllGather, {in({4}, f32, kRepl, true)},
                      {{"group", "dp"}, {"size", int64_t{2}}, {"dim", int64_t{0}}}),
             Contains("input 0 is a future"));
  TensorType gpu = ty({4});
  gpu.device = Device{DeviceKind::cuda, 0};
  CHECK_THAT(error_of(OpId::Add, {in({4}), OperandType::of(gpu)}),
             Contains("add: inputs on different devices") && Contains("input 0 is on cpu") &&
                 Contains("input 1 is on cuda:0"));
  // The output follows the inputs' device.
  CHECK(infer1(OpId::Exp, {OperandType::of(gpu)}).device == gpu.device);
}

TEST_CASE("elementwise unary ops", "[meta]") {
  for (OpId op : {OpId::Exp, OpId::Log, OpId::Tanh, OpId::Sqrt, OpId::Rsqrt, OpId::Sin, OpId::Cos}) {
    CHECK(infer1(op, {in({2, 3}, DType::bf16)}) == ty({2, 3}, DType::bf16));
    CHECK_THAT(error_of(op, {in({2}, i64)}), Contains("x is i64[2]; expected a float dtype"));
  }
  CHECK(infer1(OpId::Neg, {in({5}, i32)}) == ty({5}, i32));
  CHECK_THAT(error_of(OpId::Neg, {in({5}, b8)}), Equals("neg: x is bool[5]; expected a non-bool dtype"));
  // Compute ops drop the input's distribution.
  CHECK(infer1(OpId::Exp, {in({4}, f32, kRepl)}).dist == DistType::none);

  CHECK(infer1(OpId::ConvertElementType, {in({3, 2})}, {{"dtype", "f16"}}) == ty({3, 2}, DType::f16));
  CHECK_THAT(error_of(OpId::ConvertElementType, {in({3})}),
             Contains("convert_element_type: missing attribute 'dtype'"));
  CHECK_THAT(error_of(OpId::ConvertElementType, {in({3})}, {{"dtype", "f33"}}),
             Contains("convert_element_type: attribute 'dtype' = 'f33' is not a dtype"));
}

TEST_CASE("elementwise binary and compare ops", "[meta]") {
  for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Pow, OpId::Maximum}) {
    CHECK(infer1(op, {in({4, 4}), in({4, 4})}) == ty({4, 4}));
    CHECK(infer1(op, {in({4, 4}, i64), lit()}) == ty({4, 4}, i64));
    CHECK(infer1(op, {lit(), in({3}, DType::f64)}) == ty({3}, DType::f64));
  }
  CHECK_THAT(error_of(OpId::Add, {in({4, 4}), in({4, 5})}),
             Contains("add: shapes differ: a is f32[4, 4], b is f32[4, 5]") &&
                 Contains("broadcast_in_dim"));
  CHECK_THAT(error_of(OpId::Mul, {in({4}), in({4}, DType::f16)}),
             Equals("mul: dtypes differ: a is f32[4], b is f16[4]"));
  CHECK_THAT(error_of(OpId::Add, {in({4}, b8), lit()}), Contains("a is bool[4]; expected a non-bool"));

  for (OpId op : {OpId::Eq, OpId::Ne, OpId::Lt, OpId::Le, OpId::Gt, OpId::Ge})
    CHECK(infer1(op, {in({2, 5}, i64), in({2, 5}, i64)}) == ty({2, 5}, b8));
  CHECK(infer1(OpId::Eq, {in({3}, b8), lit()}) == ty({3}, b8));
  CHECK(infer1(OpId::Ne, {in({3}, b8), in({3}, b8)}) == ty({3}, b8));
  CHECK_THAT(error_of(OpId::Lt, {in({3}, b8), in({3}, b8)}), Contains("lt: a is bool[3]"));
  CHECK_THAT(error_of(OpId::Ge, {in({3}), in({2})}), Contains("ge: shapes differ"));
}

TEST_CASE("where", "[meta]") {
  CHECK(infer1(OpId::Where, {in({2, 3}, b8), in({2, 3}), in({2, 3})}) == ty({2, 3}));
  CHECK(infer1(OpId::Where, {in({2, 3}, b8), lit(), in({2, 3}, DType::f16)}) ==
        ty({2, 3}, DType::f16));
  CHECK_THAT(error_of(OpId::Where, {lit(), in({2}), in({2})}),
             Contains("where: cond (input 0) is a scalar literal"));
  CHECK_THAT(error_of(OpId::Where, {in({2}), in({2}), in({2})}),
             Equals("where: cond is f32[2]; expected dtype bool"));
  CHECK_THAT(error_of(OpId::Where, {in({2}, b8), lit(), lit()}),
             Contains("where: a and b are both scalar literals"));
  CHECK_THAT(error_of(OpId::Where, {in({2, 3}, b8), in({2, 3}), in({3, 2})}),
             Contains("where: b is f32[3, 2], cond is bool[2, 3]"));
  CHECK_THAT(error_of(OpId::Where, {in({2}, b8), in({2}), in({2}, i64)}),
             Contains("where: dtypes differ"));
}

TEST_CASE("reductions", "[meta]") {
  CHECK(infer1(OpId::Sum, {in({2, 3, 4})}, {{"dims", IntList{0, 2}}}) == ty({3}));
  CHECK(infer1(OpId::Amax, {in({2, 3}, i64)}, {{"dims", IntList{1}}}) == ty({2}, i64));
  CHECK(infer1(OpId::Sum, {in({2, 3})}, {{"dims", IntList{0, 1}}}) == ty({}));
  CHECK(infer1(OpId::Sum, {in({2, 3})}, {{"dims", IntList{}}}) == ty({2, 3}));
  CHECK_THAT(error_of(OpId::Sum, {in({2, 3})}, {{"dims", IntList{2}}}),
             Equals("sum: dims [2] out of range for rank 2"));
  CHECK_THAT(error_of(OpId::Amax, {in({2, 3})}, {{"dims", IntList{-1}}}),
             Equals("amax: dims [-1] out of range for rank 2"));
  CHECK_THAT(error_of(OpId::Sum, {in({2, 3})}, {{"dims", IntList{1, 0}}}),
             Equals("sum: dims [1, 0] must be strictly increasing"));
  CHECK_THAT(error_of(OpId::Sum, {in({2, 3})}), Contains("sum: missing attribute 'dims'"));
  CHECK_THAT(error_of(OpId::Sum, {in({2, 3})}, {{"dims", int64_t{1}}}),
             Contains("sum: attribute 'dims' is int, expected int list"));
}

TEST_CASE("reshape and permute", "[meta]") {
  CHECK(infer1(OpId::Reshape, {in({4, 4})}, {{"shape", IntList{2, 8}}}) == ty({2, 8}));
  CHECK(infer1(OpId::Reshape, {in({1})}, {{"shape", IntList{}}}) == ty({}));
  CHECK_THAT(error_of(OpId::Reshape, {in({4, 4})}, {{"shape", IntList{3, 5}}}),
             Equals("reshape: shape [3, 5] has 15 elements, input f32[4, 4] has 16"));
  CHECK_THAT(error_of(OpId::Reshape, {in({4, 4})}, {{"shape", IntList{-1, 16}}}),
             Contains("reshape: shape [-1, 16] has a negative size"));

  CHECK(infer1(OpId::Permute, {in({2, 3, 4})}, {{"dims", IntList{2, 0, 1}}}) == ty({4, 2, 3}));
  CHECK_THAT(error_of(OpId::Permute, {in({2, 3})}, {{"dims", IntList{0, 0}}}),
             Contains("permute: dims [0, 0] is not a permutation of 0..1"));
  CHECK_THAT(error_of(OpId::Permute, {in({2, 3})}, {{"dims", IntList{1, 0, 2}}}),
             Contains("not a permutation"));
}

TEST_CASE("broadcast_in_dim follows its broadcasting rule", "[meta]") {
  auto bid = [](Shape shape, IntList dims) {
    return Attrs{{"shape", IntList(shape)}, {"broadcast_dims", std::move(dims)}};
  };
  CHECK(infer1(OpId::BroadcastInDim, {in({3, 1})}, bid({2, 3, 4}, {1, 2})) == ty({2, 3, 4}));
  CHECK(infer1(OpId::BroadcastInDim, {in({4})}, bid({3, 4}, {1})) == ty({3, 4}));
  CHECK(infer1(OpId::BroadcastInDim, {in({})}, bid({2, 2}, {})) == ty({2, 2}));
  CHECK_THAT(error_of(OpId::BroadcastInDim, {in({3, 4})}, bid({2, 5, 4}, {1, 2})),
             Contains("input f32[3, 4] cannot broadcast to [2, 5, 4]") &&
                 Contains("dim 0 has size 3, target dim 1 has size 5"));
  CHECK_THAT(error_of(OpId::BroadcastInDim, {in({3, 4})}, bid({3, 4}, {0})),
             Contains("broadcast_dims [0] has 1 entries, input f32[3, 4] has rank 2"));
  CHECK_THAT(error_of(OpId::BroadcastInDim, {in({1, 1})}, bid({3, 4}, {1, 0})),
             Contains("must be strictly increasing"));
  CHECK_THAT(error_of(OpId::BroadcastInDim, {in({1})}, bid({3, 4}, {2})),
             Contains("broadcast_dims [2] out of range for shape [3, 4]"));
}

TEST_CASE("slice with strides and pad", "[meta]") {
  auto sl = [](IntList s, IntList e, IntList st) {
    return Attrs{{"starts", std::move(s)}, {"ends", std::move(e)}, {"strides", std::move(st)}};
  };
  // ceil((10-1)/3) = 3, ceil(8/2) = 4, ceil(1/5) = 1
  CHECK(infer1(OpId::Slice, {in({10, 8, 6})}, sl({1, 0, 2}, {10, 8, 3}, {3, 2, 5})) ==
        ty({3, 4, 1}));
  CHECK(infer1(OpId::Slice, {in({4})}, sl({2}, {2}, {1})) == ty({0}));
  CHECK_THAT(error_of(OpId::Slice, {in({4, 4})}, sl({0, 3}, {4, 2}, {1, 1})),
             Contains("slice: dim 1: start 3, end 2 out of bounds"));
  CHECK_THAT(error_of(OpId::Slice, {in({4, 4})}, sl({0, 0}, {5, 4}, {1, 1})),
             Contains("need 0 <= start <= end <= 4"));
  CHECK_THAT(error_of(OpId::Slice, {in({4, 4})}, sl({0, 0}, {4, 4}, {1, 0})),
             Contains("stride at dim 1 must be >= 1"));
  CHECK_THAT(error_of(OpId::Slice, {in({4, 4})}, sl({0}, {4}, {1})),
             Contains("slice: starts [0] has 1 entries; expected one per dim"));

  Attrs pad{{"lo", IntList{1, 0}}, {"hi", IntList{0, 2}}, {"value", 0.0}};
  CHECK(infer1(OpId::Pad, {in({2, 3})}, pad) == ty({3, 5}));
  CHECK_THAT(error_of(OpId::Pad, {in({2, 3})}, {{"lo", IntList{-1, 0}}, {"hi", IntList{0, 0}}, {"value", 0.0}}),
             Contains("pad: lo [-1, 0], hi [0, 0]: padding at dim 0 is negative"));
  CHECK_THAT(error_of(OpId::Pad, {in({2, 3})}, {{"lo", IntList{0, 0}}, {"hi", IntList{0, 0}}}),
             Contains("pad: missing attribute 'value'"));
}

TEST_CASE("cat", "[meta]") {
  CHECK(infer1(OpId::Cat, {in({2, 3}), in({4, 3}), in({1, 3})}, {{"dim", int64_t{0}}}) ==
        ty({7, 3}));
  CHECK(infer1(OpId::Cat, {in({2, 3})}, {{"dim", int64_t{1}}}) == ty({2, 3}));
  CHECK_THAT(error_of(OpId::Cat, {in({2, 3}), in({2, 4})}, {{"dim", int64_t{0}}}),
             Contains("cat: input 1 is f32[2, 4], input 0 is f32[2, 3]; shapes must match except at dim 0"));
  CHECK_THAT(error_of(OpId::Cat, {in({2, 3}), in({2})}, {{"dim", int64_t{0}}}),
             Contains("shapes must match"));
  CHECK_THAT(error_of(OpId::Cat, {in({2}), in({2}, i64)}, {{"dim", int64_t{0}}}),
             Contains("cat: dtypes differ: input 0 is f32[2], input 1 is i64[2]"));
  CHECK_THAT(error_of(OpId::Cat, {in({2})}, {{"dim", int64_t{1}}}),
             Equals("cat: dim 1 out of range for rank 1"));
}

TEST_CASE("take and index_add", "[meta]") {
  // Embedding gather: vocab [100, 16] indexed by token ids [4, 8].
  CHECK(infer1(OpId::Take, {in({100, 16}), in({4, 8}, i64)}, {{"dim", int64_t{0}}}) ==
        ty({4, 8, 16}));
  CHECK(infer1(OpId::Take, {in({3, 5}), in({2}, i32)}, {{"dim", int64_t{1}}}) == ty({3, 2}));
  CHECK_THAT(error_of(OpId::Take, {in({3, 5}), in({2})}, {{"dim", int64_t{0}}}),
             Contains("take: idx is f32[2]; expected an index dtype"));
  CHECK_THAT(error_of(OpId::Take, {in({3, 5}), in({2}, i64)}, {{"dim", int64_t{2}}}),
             Equals("take: dim 2 out of range for rank 2"));

  Attrs d0{{"dim", int64_t{0}}};
  CHECK(infer1(OpId::IndexAdd, {in({5, 4}), in({2}, i64), in({2, 4})}, d0) == ty({5, 4}));
  CHECK_THAT(error_of(OpId::IndexAdd, {in({5, 4}), in({2}, i64), in({3, 4})}, d0),
             Contains("index_add: src is f32[3, 4]; expected [2, 4]"));
  CHECK_THAT(error_of(OpId::IndexAdd, {in({5, 4}), in({2, 1}, i64), in({2, 4})}, d0),
             Contains("index_add: idx is i64[2, 1]; expected a 1-D index tensor"));
  CHECK_THAT(error_of(OpId::IndexAdd, {in({5, 4}), in({2}, i64), in({2, 4}, DType::f16)}, d0),
             Contains("index_add: dtypes differ"));
}

TEST_CASE("matmul", "[meta]") {
  CHECK(infer1(OpId::Matmul, {in({4, 3}), in({3, 2})}) == ty({4, 2}));
  CHECK(infer1(OpId::Matmul, {in({8, 4, 3}), in({8, 3, 2})}) == ty({8, 4, 2}));
  CHECK(infer1(OpId::Matmul, {in({2, 8, 4, 3}), in({3, 2})}) == ty({2, 8, 4, 2}));
  CHECK_THAT(error_of(OpId::Matmul, {in({4, 3}), in({5, 2})}),
             Equals("matmul: inner dimensions differ: a is f32[4, 3], b is f32[5, 2] "
                    "(a.shape[-1] must equal b.shape[-2])"));
  CHECK_THAT(error_of(OpId::Matmul, {in({8, 4, 3}), in({7, 3, 2})}),
             Contains("matmul: batch dimensions differ: a is f32[8, 4, 3], b is f32[7, 3, 2]"));
  CHECK_THAT(error_of(OpId::Matmul, {in({4, 3}), in({2, 3, 2})}), Contains("batch dimensions differ"));
  CHECK_THAT(error_of(OpId::Matmul, {in({3}), in({3, 2})}),
             Contains("matmul: a is f32[3]; expected rank >= 2"));
  CHECK_THAT(error_of(OpId::Matmul, {in({4, 3}, i64), in({3, 2}, i64)}),
             Contains("matmul: a is i64[4, 3]; expected a float dtype"));
  CHECK_THAT(error_of(OpId::Matmul, {in({4, 3}), in({3, 2}, DType::bf16)}),
             Contains("matmul: dtypes differ"));
}

TEST_CASE("full and iota", "[meta]") {
  TensorType t = infer1(OpId::Full, {},
                        {{"shape", IntList{2, 3}}, {"value", 1.5}, {"dtype", "f16"}, {"device", "cuda:1"}});
  CHECK(t.shape == Shape{2, 3});
  CHECK(t.dtype == DType::f16);
  CHECK(t.device == Device{DeviceKind::cuda, 1});
  CHECK(t.dist == DistType::none);
  CHECK_FALSE(t.future);
  CHECK_THAT(error_of(OpId::Full, {}, {{"shape", IntList{2}}, {"value", 0.0}, {"dtype", "f32"}, {"device", "gpu"}}),
             Equals("full: device 'gpu' is not a device (expected cpu or cuda:N)"));
  CHECK_THAT(error_of(OpId::Full, {}, {{"shape", IntList{-2}}, {"value", 0.0}, {"dtype", "f32"}, {"device", "cpu"}}),
             Contains("full: shape [-2] has a negative size"));

  CHECK(infer1(OpId::Iota, {}, {{"length", int64_t{5}}, {"dtype", "i64"}, {"device", "cpu"}}) ==
        ty({5}, i64));
  CHECK_THAT(error_of(OpId::Iota, {}, {{"length", int64_t{-1}}, {"dtype", "i64"}, {"device", "cpu"}}),
             Equals("iota: length -1 is negative"));
  CHECK_THAT(error_of(OpId::Iota, {}, {{"length", int64_t{3}}, {"dtype", "i64"}}),
             Contains("iota: missing attribute 'device'"));
}

TEST_CASE("composites: linear, gelu, softmax, layer_norm", "[meta]") {
  CHECK(infer1(OpId::Linear, {in({8, 16}), in({32, 16})}) == ty({8, 32}));
  CHECK(infer1(OpId::Linear, {in({2, 8, 16}), in({32, 16}), in({32})}) == ty({2, 8, 32}));
  CHECK_THAT(error_of(OpId::Linear, {in({8, 16}), in({32, 15})}),
             Contains("linear: in features differ: x is f32[8, 16], w is f32[32, 15]"));
  CHECK_THAT(error_of(OpId::Linear, {in({8, 16}), in({32, 16}), in({16})}),
             Contains("linear: b is f32[16]; expected [32]"));
  CHECK_THAT(error_of(OpId::Linear, {in({8, 16}), in({16})}), Contains("linear: w is f32[16]; expected rank 2"));

  CHECK(infer1(OpId::Gelu, {in({4, 4})}, {{"approximate", "tanh"}}) == ty({4, 4}));
  CHECK_THAT(error_of(OpId::Gelu, {in({4})}, {{"approximate", "none"}}),
             Contains("gelu: approximate 'none' is not supported"));
  CHECK(infer1(OpId::Softmax, {in({4, 7})}, {{"dim", int64_t{1}}}) == ty({4, 7}));
  CHECK_THAT(error_of(OpId::Softmax, {in({4, 7})}, {{"dim", int64_t{2}}}),
             Equals("softmax: dim 2 out of range for rank 2"));
  CHECK_THAT(error_of(OpId::Softmax, {in({4}, i64)}, {{"dim", int64_t{0}}}), Contains("expected a float"));

  Attrs eps{{"eps", 1e-5}};
  CHECK(infer1(OpId::LayerNorm, {in({2, 5, 8}), in({8}), in({8})}, eps) == ty({2, 5, 8}));
  CHECK_THAT(error_of(OpId::LayerNorm, {in({2, 8}), in({7}), in({8})}, eps),
             Contains("layer_norm: w is f32[7]; expected [8]"));
  CHECK_THAT(error_of(OpId::LayerNorm, {in({2, 8}), in({8}), in({8})}),
             Contains("layer_norm: missing attribute 'eps'"));
}

TEST_CASE("composites: attention and cross_entropy", "[meta]") {
  Attrs sd{{"is_causal", true}, {"scale", 0.125}};
  CHECK(infer1(OpId::ScaledDotProductAttention, {in({2, 4, 10, 8}), in({2, 4, 12, 8}), in({2, 4, 12, 16})},
               sd) == ty({2, 4, 10, 16}));
  CHECK_THAT(error_of(OpId::ScaledDotProductAttention, {in({10, 8}), in({12, 4}), in({12, 16})}, sd),
             Contains("head sizes differ: q is f32[10, 8], k is f32[12, 4]"));
  CHECK_THAT(error_of(OpId::ScaledDotProductAttention, {in({10, 8}), in({12, 8}), in({11, 16})}, sd),
             Contains("key lengths differ"));
  CHECK_THAT(error_of(OpId::ScaledDotProductAttention, {in({2, 10, 8}), in({3, 12, 8}), in({3, 12, 8})}, sd),
             Contains("batch dimensions differ"));
  CHECK_THAT(error_of(OpId::ScaledDotProductAttention, {in({10, 8}), in({12, 8}), in({12, 8})},
                      {{"scale", 1.0}}),
             Contains("scaled_dot_product_attention: missing attribute 'is_causal'"));

  CHECK(infer1(OpId::CrossEntropy, {in({4, 10, 50}), in({4, 10}, i64)}) == ty({}));
  CHECK_THAT(error_of(OpId::CrossEntropy, {in({4, 50}), in({5}, i64)}),
             Contains("cross_entropy: targets is i64[5], logits is f32[4, 50]; expected targets [4]"));
  CHECK_THAT(error_of(OpId::CrossEntropy, {in({4, 50}), in({4})}),
             Contains("targets is f32[4]; expected an index dtype"));
}

TEST_CASE("synchronize gathers a padded shard to the full shape", "[meta]") {
  Attrs a{{"group", "dp"}, {"size", int64_t{4}}, {"shape", IntList{50, 64}}};
  // ceil(50 / 4) = 13 rows per rank.
  TensorType t = infer1(OpId::Synchronize, {in({13, 64}, f32, kSharded)}, a);
  CHECK(t == ty({50, 64}, f32, kRepl));
  CHECK_THAT(error_of(OpId::Synchronize, {in({12, 64}, f32, kSharded)}, a),
             Contains("sharded input f32[12, 64] does not fit shape [50, 64] over size 4") &&
                 Contains("expected 13 rows per rank"));
  CHECK_THAT(error_of(OpId::Synchronize, {in({13, 32}, f32, kSharded)}, a),
             Contains("does not fit shape [50, 64]"));
  CHECK_THAT(error_of(OpId::Synchronize, {in({13, 64}, f32, kSharded)}, {{"group", "dp"}, {"size", int64_t{4}}}),
             Contains("synchronize: input f32[13, 64] is fully_sharded; the full shape attribute 'shape' is missing"));
  CHECK(infer1(OpId::Synchronize, {in({8}, f32, kRepl)}, {{"group", "dp"}, {"size", int64_t{4}}}) ==
        ty({8}, f32, kRepl));
  CHECK_THAT(error_of(OpId::Synchronize, {in({8})}, {{"group", "dp"}, {"size", int64_t{4}}}),
             Contains("synchronize: input f32[8] has distribution none"));
  CHECK_THAT(error_of(OpId::Synchronize, {in({8}, f32, kRepl)}, {{"group", "dp"}, {"size", int64_t{0}}}),
             Contains("synchronize: size 0 must be >= 1"));
}

TEST_CASE("async collectives return futures", "[meta]") {
  Attrs ag{{"group", "dp"}, {"size", int64_t{4}}, {"dim", int64_t{0}}};
  CHECK(infer1(OpId::AllGather, {in({13, 64}, f32, kSharded)}, ag) == ty({52, 64}, f32, kRepl, true));
  CHECK_THAT(error_of(OpId::AllGather, {in({13, 64})}, {{"size", int64_t{4}}, {"dim", int64_t{0}}}),
             Contains("all_gather: missing attribute 'group'"));

  Attrs rs{{"group", "dp"}, {"size", int64_t{4}}, {"dim", int64_t{0}}, {"op", "sum"}};
  CHECK(infer1(OpId::ReduceScatter, {in({52, 64})}, rs) == ty({13, 64}, f32, kSharded, true));
  CHECK_THAT(error_of(OpId::ReduceScatter, {in({50, 64})}, rs),
             Contains("reduce_scatter: x is f32[50, 64]: dim 0 (size 50) is not divisible by group size 4"));
  rs.set("op", "max");
  CHECK_THAT(error_of(OpId::ReduceScatter, {in({52, 64})}, rs),
             Contains("reduce_scatter: op 'max' is not supported"));

  CHECK(infer1(OpId::AllReduce, {in({3, 3})}, {{"group", "replicate"}, {"size", int64_t{2}}, {"op", "sum"}}) ==
        ty({3, 3}, f32, kRepl, true));
  CHECK(infer1(OpId::Broadcast, {in({3})}, {{"group", "dp"}, {"size", int64_t{2}}, {"root", int64_t{1}}}) ==
        ty({3}, f32, kRepl, true));
  CHECK_THAT(error_of(OpId::Broadcast, {in({3})}, {{"group", "dp"}, {"size", int64_t{2}}, {"root", int64_t{2}}}),
             Equals("broadcast: root 2 out of range for group size 2"));
}

TEST_CASE("wait turns a future into its value", "[meta]") {
  CHECK(infer1(OpId::Wait, {in({52, 64}, f32, kRepl, true)}) == ty({52, 64}, f32, kRepl));
  CHECK(infer1(OpId::Wait, {in({13}, f32, kSharded, true)}) == ty({13}, f32, kSharded));
  CHECK_THAT(error_of(OpId::Wait, {in({4})}),
             Contains("wait: input 0 is cpu f32[4], not a future"));
}

TEST_CASE("pack and unpack keep the distribution", "[meta]") {
  CHECK(infer1(OpId::Pack, {in({2, 3}, f32, kSharded), in({4}, f32, kSharded)}) ==
        ty({10}, f32, kSharded));
  CHECK_THAT(error_of(OpId::Pack, {in({2}, f32, kSharded), in({2}, f32, kRepl)}),
             Contains("pack: input 1 is replicated, input 0 is fully_sharded"));
  CHECK_THAT(error_of(OpId::Pack, {in({2}), in({2}, DType::f16)}), Contains("pack: dtypes differ"));

  std::vector<TensorType> outs =
      infer_types(OpId::Unpack, {in({10}, f32, kRepl)}, {{"shapes", IntLists{{2, 3}, {4}}}});
  REQUIRE(outs.size() == 2);
  CHECK(outs[0] == ty({2, 3}, f32, kRepl));
  CHECK(outs[1] == ty({4}, f32, kRepl));
  CHECK_THAT(error_of(OpId::Unpack, {in({12})}, {{"shapes", IntLists{{2, 3}, {4}}}}),
             Equals("unpack: shapes [[2, 3], [4]] have 10 elements, buf f32[12] has 12"));
  CHECK_THAT(error_of(OpId::Unpack, {in({2, 5})}, {{"shapes", IntLists{{10}}}}),
             Contains("unpack: buf is f32[2, 5]; expected a 1-D buffer"));
  CHECK_THAT(error_of(OpId::Unpack, {in({0})}, {{"shapes", IntList{}}}), Contains("unpack: shapes is empty"));
}
