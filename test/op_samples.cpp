// The op-sample table (test/op_samples.h): one row per op, written out by
// hand from docs/ir.md.
#include "test/op_samples.h"

#include <utility>

#include "ir/error.h"

namespace fsdpc::test {

namespace {

const DType f32 = DType::f32, i64 = DType::i64, i32 = DType::i32, b8 = DType::boolean;
const DistType kSharded = DistType::fully_sharded, kRepl = DistType::replicated;

// The sweep's operands live on cuda:1, so every output's device is checked
// too; tensors are replicated unless a case says otherwise, so compute ops
// are seen to drop the distribution.
const Device kCuda1{DeviceKind::cuda, 1};

TensorType on1(Shape s, DType d = f32, DistType dist = DistType::none, bool future = false) {
  TensorType t;
  t.shape = std::move(s);
  t.dtype = d;
  t.device = kCuda1;
  t.dist = dist;
  t.future = future;
  return t;
}

OperandType at(Shape s, DType d = f32, DistType dist = kRepl, bool future = false) {
  return OperandType::of(on1(std::move(s), d, dist, future));
}

OperandType lit() { return OperandType::scalar(); }

Attrs dims(IntList d) { return {{"dims", std::move(d)}}; }
const Attrs kDim0{{"dim", int64_t{0}}};

}  // namespace

// One row per op of ops.def. No default: a new op does not compile (-Wswitch)
// until it has its row here.
OpSample op_sample(OpId op) {
  const DType bf16 = DType::bf16, f16 = DType::f16, f64 = DType::f64;
  const OperandType x23 = at({2, 3}, bf16);
  switch (op) {
    case OpId::Neg: return {{at({2, 3}, i32)}, {}, {on1({2, 3}, i32)}};
    case OpId::Log:
    case OpId::Sqrt:
    case OpId::Rsqrt: return {{x23}, {}, {on1({2, 3}, bf16)}, {Domain::positive}};
    case OpId::Exp:
    case OpId::Tanh:
    case OpId::Sin:
    case OpId::Cos:
    case OpId::Sigmoid: return {{x23}, {}, {on1({2, 3}, bf16)}};
    // A shard converts to the shard of the converted tensor.
    case OpId::ConvertElementType:
      return {{at({4, 3}, f32, kSharded)}, {{"dtype", "bf16"}}, {on1({4, 3}, bf16, kSharded)}};
    case OpId::Add:
    case OpId::Sub:
    case OpId::Mul:
    case OpId::Maximum: return {{at({2, 3}, f64), lit()}, {}, {on1({2, 3}, f64)}};
    case OpId::Div: return {{at({2, 3}, f64), lit()}, {}, {on1({2, 3}, f64)}, {Domain::any, Domain::positive}};
    // A positive base: a fractional power of a negative one is NaN.
    case OpId::Pow: return {{at({2, 3}, f64), lit()}, {}, {on1({2, 3}, f64)}, {Domain::positive, Domain::any}};
    case OpId::Eq:
    case OpId::Ne:
    case OpId::Lt:
    case OpId::Le:
    case OpId::Gt:
    case OpId::Ge: return {{lit(), at({3, 2}, i64)}, {}, {on1({3, 2}, b8)}};
    case OpId::Where: return {{at({2, 3}, b8), lit(), at({2, 3}, f16)}, {}, {on1({2, 3}, f16)}};
    case OpId::Sum: return {{at({2, 3, 4})}, dims({0, 2}), {on1({3})}};
    case OpId::Amax: return {{at({2, 3, 4}, i64)}, dims({1}), {on1({2, 4}, i64)}};
    case OpId::Reshape: return {{at({2, 3, 4})}, {{"shape", IntList{6, 4}}}, {on1({6, 4})}};
    case OpId::Permute: return {{at({2, 3, 4}, i32)}, dims({2, 0, 1}), {on1({4, 2, 3}, i32)}};
    case OpId::BroadcastInDim:
      return {{at({3, 1})}, {{"shape", IntList{2, 3, 5}}, {"broadcast_dims", IntList{1, 2}}}, {on1({2, 3, 5})}};
    // ceil((10 - 1) / 3) = 3, ceil((8 - 0) / 3) = 3.
    case OpId::Slice:
      return {{at({10, 8})},
              {{"starts", IntList{1, 0}}, {"ends", IntList{10, 8}}, {"strides", IntList{3, 3}}},
              {on1({3, 3})}};
    // dim 0: 1 + 2 + 0; dim 1: 3 + (3 - 1) * 1 interior + 2 hi = 7.
    case OpId::Pad:
      return {{at({2, 3})},
              {{"lo", IntList{1, 0}}, {"hi", IntList{0, 2}}, {"interior", IntList{0, 1}}, {"value", 0.0}},
              {on1({3, 7})}};
    case OpId::Cat: return {{at({2, 3}), at({4, 3}), at({1, 3})}, kDim0, {on1({7, 3})}};
    case OpId::Take: return {{at({10, 4}), at({2, 5}, i32)}, kDim0, {on1({2, 5, 4})}};
    case OpId::IndexAdd:
      return {{at({5, 4}), at({2}, i64), at({5, 2})}, {{"dim", int64_t{1}}}, {on1({5, 4})}};
    case OpId::Matmul: return {{at({7, 4, 3}), at({3, 2})}, {}, {on1({7, 4, 2})}};
    case OpId::Full:
      return {{}, {{"shape", IntList{2, 3}}, {"value", 1.5}, {"dtype", "f16"}, {"device", "cuda:1"}}, {on1({2, 3}, f16)}};
    case OpId::Iota: return {{}, {{"length", int64_t{5}}, {"dtype", "i64"}, {"device", "cuda:1"}}, {on1({5}, i64)}};
    case OpId::AxisIndex:
      return {{}, {{"group", "tp"}, {"size", int64_t{4}}, {"device", "cuda:1"}}, {on1({}, i64)}};
    case OpId::Linear: return {{at({2, 8, 16}), at({32, 16}), at({32})}, {}, {on1({2, 8, 32})}};
    case OpId::Gelu: return {{at({4, 4}, bf16)}, {{"approximate", "tanh"}}, {on1({4, 4}, bf16)}};
    case OpId::Softmax: return {{at({4, 7})}, kDim0, {on1({4, 7})}};
    case OpId::LayerNorm: return {{at({2, 5, 8}), at({8}), at({8})}, {{"eps", 1e-5}}, {on1({2, 5, 8})}};
    case OpId::Silu: return {{x23}, {}, {on1({2, 3}, bf16)}};
    case OpId::RmsNorm: return {{at({2, 5, 8}, bf16), at({8}, bf16)}, {{"eps", 1e-6}}, {on1({2, 5, 8}, bf16)}};
    case OpId::ScaledDotProductAttention:
      return {{at({2, 10, 8}), at({2, 12, 8}), at({2, 12, 16})},
              {{"is_causal", true}, {"scale", 0.125}},
              {on1({2, 10, 16})}};
    case OpId::CrossEntropy: return {{at({4, 10, 50}), at({4, 10}, i64)}, {}, {on1({})}};
    // bf16 activations: the loss is f32 (linear_cross_entropy_loss_dtype).
    case OpId::LinearCrossEntropy:
      return {{at({2, 8, 16}, bf16), at({50, 16}, bf16), at({2, 8}, i32)}, {{"chunk", int64_t{3}}}, {on1({})}};
    case OpId::LinearCrossEntropyGrad:
      return {{at({2, 8, 16}), at({50, 16}), at({2, 8}, i64), at({})}, {}, {on1({2, 8, 16}), on1({50, 16})}};
    // bf16 operands: an f32 loss and its f32 cotangent, bf16 gradients.
    case OpId::LinearCrossEntropyWithGrad:
      return {{at({2, 8, 16}, bf16), at({50, 16}, bf16), at({2, 8}, i32), at({})},
              {{"chunk", int64_t{3}}},
              {on1({}), on1({2, 8, 16}, bf16), on1({50, 16}, bf16)}};
    // One of 4 ranks' slices of a vocabulary of 50: ceil(50 / 4) = 13 rows.
    case OpId::LinearCrossEntropyStats:
      return {{at({2, 8, 16}, bf16), at({13, 16}, bf16), at({2, 8}, i32), at({}, i64)},
              {{"vocab", int64_t{50}}, {"chunk", int64_t{3}}},
              {on1({2, 8}), on1({2, 8})}};
    case OpId::LinearCrossEntropyStatsGrad:
      return {{at({2, 8, 16}), at({13, 16}), at({2, 8}, i64), at({}, i64), at({2, 8}), at({2, 8}), at({2, 8})},
              {{"vocab", int64_t{50}}},
              {on1({2, 8, 16}), on1({13, 16})}};
    case OpId::ScaledDotProductAttentionGrad:
      return {{at({2, 10, 8}), at({2, 12, 8}), at({2, 12, 16}), at({2, 10, 16})},
              {{"is_causal", true}, {"scale", 0.125}},
              {on1({2, 10, 8}), on1({2, 12, 8}), on1({2, 12, 16})}};
    // ceil(50 / 4) = 13 rows per rank.
    case OpId::Synchronize:
      return {{at({13, 64}, f32, kSharded)},
              {{"group", "dp"}, {"size", int64_t{4}}, {"shape", IntList{50, 64}}},
              {on1({50, 64}, f32, kRepl)}};
    case OpId::AllGather:
      return {{at({13, 64}, f32, kSharded)},
              {{"group", "dp"}, {"size", int64_t{4}}, {"dim", int64_t{0}}},
              {on1({52, 64}, f32, kRepl, true)}};
    case OpId::ReduceScatter:
      return {{at({6, 64}, f32, DistType::none)},
              {{"group", "dp"}, {"size", int64_t{4}}, {"dim", int64_t{1}}, {"op", "sum"}},
              {on1({6, 16}, f32, kSharded, true)}};
    // Hybrid's all_reduce of a shard across replicas keeps it a shard.
    case OpId::AllReduce:
      return {{at({3, 3}, f32, kSharded)},
              {{"group", "replicate"}, {"size", int64_t{2}}, {"op", "sum"}},
              {on1({3, 3}, f32, kSharded, true)}};
    case OpId::Broadcast:
      return {{at({3}, f32, DistType::none)},
              {{"group", "dp"}, {"size", int64_t{2}}, {"root", int64_t{1}}},
              {on1({3}, f32, kRepl, true)}};
    case OpId::Wait: return {{at({52, 64}, f32, kSharded, true)}, {}, {on1({52, 64}, f32, kSharded)}};
    // The sender keeps its value and its distribution.
    case OpId::Send:
      return {{at({2, 8}, bf16)}, {{"group", "pp"}, {"size", int64_t{4}}, {"peer", int64_t{3}}},
              {on1({2, 8}, bf16, kRepl, true)}};
    case OpId::Recv:
      return {{},
              {{"group", "pp"},
               {"size", int64_t{2}},
               {"peer", int64_t{0}},
               {"shape", IntList{2, 64, 64}},
               {"dtype", "i32"},
               {"device", "cuda:1"}},
              {on1({2, 64, 64}, i32, DistType::none, true)}};
    case OpId::Pack: return {{at({2, 3}, bf16), at({4}, bf16)}, {}, {on1({10}, bf16, kRepl)}};
    case OpId::Unpack:
      return {{at({10}, f32, kSharded)},
              {{"shapes", IntLists{{2, 3}, {4}}}},
              {on1({2, 3}, f32, kSharded), on1({4}, f32, kSharded)}};
    // 300 values in blocks of 256: 300 codes and 2 scales of 4 bytes; a
    // shard quantizes to a shard, and the gathered rows dequantize.
    case OpId::Quantize:
      return {{at({13, 300}, f32, kSharded)}, {{"block", int64_t{256}}}, {on1({13, 308}, DType::i8, kSharded)}};
    case OpId::Dequantize:
      return {{at({52, 308}, DType::i8)}, {{"block", int64_t{256}}, {"dtype", "bf16"}}, {on1({52, 300}, bf16, kRepl)}};
    case OpId::Del: return {{at({2}), at({3})}, {}, {}};
    case OpId::Fusion: return {};  // its types come from its statements (verifier_test)
  }
  op_outside_table(op);
}


std::vector<OpId> elementwise_ops(ElementwiseKind kind) {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (op_info(op).category == OpCategory::elementwise && elementwise_kind(op) == kind) ops.push_back(op);
  }
  return ops;
}

std::vector<OpId> elementwise_ops() {
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).category == OpCategory::elementwise) ops.push_back(static_cast<OpId>(i));
  return ops;
}

}  // namespace fsdpc::test
