// Every CUDA kernel against the CPU executor on random shapes (empty and
// size-1 dims included), ggml's backend-comparison pattern: one-op traces
// run by the CPU interpreter and, placed on cuda:0, by the CUDA one. f32 to
// 1e-5 relative, integers and bools exactly; bf16 (device storage, f32
// arithmetic) to 1e-2 against the CPU's f32 run on the same bf16 values.
// Here the elementwise, reduction, shape, indexing, creation and buffer
// kernels (every elementwise op by its kind from the op-sample table, and
// the others kernel_coverage.h lists; a run that skips one fails);
// matmul and the nn kernels are in gpu_nn_kernels_test.cpp, the harness
// both use in kernel_harness.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "executors/cuda/cuda_executor.h"
#include "kernel_coverage.h"
#include "kernel_harness.h"
#include "test/op_samples.h"

using namespace fsdpc;
using namespace fsdpc::gpu_test;

namespace {
const ComparesOps kCoverage(kComparedByKernelsTest);
const ComparesOps kElementwiseCoverage(test::elementwise_ops());

// An elementwise op with a hand-written kernel runs f32 and bf16; one without
// runs its scalar expression as a generated one-statement region
// (cuda::expr_kernel), f32 only.
void check_elementwise(Harness& h, OpId op, const std::vector<Arg>& args) {
  if (cuda::supports(op, DType::bf16))
    h.check_f32_bf16(op, args);
  else
    h.check(op, args);
}
}  // namespace

TEST_CASE("gpu kernels: unary ops, and convert_element_type between every dtype", "[gpu][kernels]") {
  Harness h;
  for (OpId op : test::elementwise_ops(ElementwiseKind::unary))
    for (int i = 0; i < kShapes; ++i) {
      const Shape s = i == 0 ? Shape{1000} : i == 1 ? Shape{3, 70001} : h.r.shape(0, 4);
      const bool positive = test::op_sample(op).domain(0) == test::Domain::positive;
      check_elementwise(h, op, {positive ? h.r.uniform_tensor(s, 0.05, 4.0) : h.r.tensor(s, DType::f32, 3.0)});
    }
  for (DType d : {DType::i32, DType::i64})
    for (int i = 0; i < 4; ++i) h.check(OpId::Neg, {h.r.tensor(i == 0 ? Shape{1001} : h.r.shape(0, 3), d)});
  for (DType from : kAll)
    for (DType to : kAll)
      for (int i = 0; i < 3; ++i) {
        Arg x = h.r.tensor(i == 0 ? Shape{1003} : h.r.shape(0, 3), from, 4.0);
        if (!x.data.empty()) x.data[0] = is_float(from) ? -2.75 : 0.0;  // truncation toward zero
        h.check(OpId::ConvertElementType, {x}, dtype_attr(to));
      }
}

TEST_CASE("gpu kernels: binary arithmetic with tensors and scalar literals, NaN winning maximum", "[gpu][kernels]") {
  Harness h;
  for (OpId op : test::elementwise_ops(ElementwiseKind::binary))
    for (int i = 0; i < kShapes; ++i) {
      const Shape s = i == 0 ? Shape{4099} : h.r.shape(0, 4);
      auto operand = [&](size_t k) {
        return test::op_sample(op).domain(k) == test::Domain::positive ? h.r.uniform_tensor(s, 0.5, 2.0) : h.r.tensor(s);
      };
      const double c = op == OpId::Pow ? std::array{2.0, 3.0, 0.5, -1.5, 1.0}[i % 5] : 1.75;
      Arg b = operand(1);
      check_elementwise(h, op, {operand(0), b});
      check_elementwise(h, op, {operand(0), lit(c)});
      if (op != OpId::Pow) check_elementwise(h, op, {lit(c), b});
    }
  for (DType d : {DType::i32, DType::i64})
    for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Maximum})
      for (const Shape& s : {Shape{2051}, h.r.shape(0, 3), h.r.shape(0, 3)}) {
        h.check(op, {h.r.tensor(s, d), h.r.tensor(s, d)});
        h.check(op, {h.r.tensor(s, d), lit(3.0)});
        h.check(op, {lit(-2.0), h.r.tensor(s, d)});
      }
  const double nan = std::nan("");
  Arg a = h.r.tensor({1001}), b = h.r.tensor({1001});  // NaNs in the vector steps and the tail
  for (size_t i = 0; i < 1001; i += 7) (i % 2 ? a : b).data[i] = nan;
  a.data[1000] = b.data[1000] = nan;
  h.check_f32_bf16(OpId::Maximum, {a, b});
  h.check_f32_bf16(OpId::Maximum, {a, lit(0.5)});
}

TEST_CASE("gpu kernels: comparisons and where over every dtype", "[gpu][kernels]") {
  Harness h;
  for (OpId op : test::elementwise_ops(ElementwiseKind::compare))
    for (DType d : kAll)
      for (int i = 0; i < 3 && (d != DType::boolean || op == OpId::Eq || op == OpId::Ne); ++i) {  // bool: eq, ne
        const Shape s = i == 0 ? Shape{1030} : h.r.shape(0, 3);
        Arg a = h.r.tensor(s, d, 2.0), b = h.r.tensor(s, d, 2.0);
        for (Arg* x : {&a, &b})
          for (double& v : x->data) v = std::round(v);  // equal pairs happen
        h.check(op, {a, b});
        h.check(op, {a, lit(d == DType::boolean ? 1.0 : 0.0)});
        h.check(op, {lit(1.0), b});
      }
  for (DType d : kAll)
    for (int i = 0; i < 4; ++i) {
      const Shape s = i == 0 ? Shape{2053} : h.r.shape(0, 4);
      const Arg cond = h.r.tensor(s, DType::boolean), a = h.r.tensor(s, d), b = h.r.tensor(s, d);
      h.check(OpId::Where, {cond, a, b});
      h.check(OpId::Where, {cond, a, lit(0.0)});
      h.check(OpId::Where, {cond, lit(1.0), b});
    }
}

TEST_CASE("gpu kernels: sum and amax over any dims", "[gpu][kernels]") {
  Harness h;
  std::vector<std::pair<Shape, IntList>> cases{
      {{3, 5000}, {1}}, {{5000, 3}, {0}}, {{64, 33, 40}, {0, 2}}, {{2, 100003}, {0, 1}}, {{300, 1024}, {1}}};
  for (int i = 0; i < 3 * kShapes; ++i) {
    cases.emplace_back(h.r.shape(0, 4), IntList{});
    for (size_t k = 0; k < cases.back().first.size(); ++k)
      if (h.r.uniform_int(0, 1)) cases.back().second.push_back(static_cast<int64_t>(k));  // any subset
  }
  for (OpId op : {OpId::Sum, OpId::Amax})
    for (const auto& [s, dims] : cases) h.check_f32_bf16(op, {h.r.tensor(s, DType::f32, 2.0)}, Attrs{{"dims", dims}});
  Arg x = h.r.tensor({2, 3});
  x.data = {1.0, std::nan(""), 0.0, 2.0, 3.0, -1.0};
  h.check_f32_bf16(OpId::Amax, {x}, Attrs{{"dims", IntList{1}}});
}

TEST_CASE("gpu kernels: reshape, permute, broadcast_in_dim, slice with strides, pad with interior, cat",
          "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType d = std::array{DType::f32, DType::i64, DType::bf16, DType::boolean, DType::i32}[i % 5];
    const Shape s = h.r.shape(0, 4);
    IntList flat{numel(s)}, regrouped{numel(s) == 0 ? 0 : 1};  // [n], and s's dims in reverse order
    regrouped.insert(regrouped.end(), s.rbegin(), s.rend());
    h.check(OpId::Reshape, {h.r.tensor(s, d)}, Attrs{{"shape", flat}});
    h.check(OpId::Reshape, {h.r.tensor(s, d)}, Attrs{{"shape", regrouped}});
    IntList perm(s.size()), all(s.size() + static_cast<size_t>(h.r.uniform_int(0, 2))), bd;
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), h.r.gen);
    h.check(OpId::Permute, {h.r.tensor(s, d)}, Attrs{{"dims", perm}});
    std::iota(all.begin(), all.end(), 0);
    std::sample(all.begin(), all.end(), std::back_inserter(bd), s.size(), h.r.gen);
    IntList out(all.size());
    for (int64_t& o : out) o = h.r.dim();
    for (size_t k = 0; k < s.size(); ++k)
      if (s[k] != 1) out[static_cast<size_t>(bd[k])] = s[k];
    h.check(OpId::BroadcastInDim, {h.r.tensor(s, d)}, Attrs{{"shape", out}, {"broadcast_dims", bd}});

    const Shape t = i < 2 ? Shape{i == 0 ? 1000 : 37, 70} : h.r.shape(1, 4);
    IntList starts, ends, steps, lo, hi, interior;
    for (int64_t e : t) {
      starts.push_back(h.r.uniform_int(0, e));
      ends.push_back(h.r.uniform_int(starts.back(), e));
      steps.push_back(h.r.uniform_int(1, 3));
      lo.push_back(h.r.uniform_int(0, 2));
      hi.push_back(h.r.uniform_int(0, 2));
      interior.push_back(h.r.uniform_int(0, 2));
    }
    h.check(OpId::Slice, {h.r.tensor(t, d)}, Attrs{{"starts", starts}, {"ends", ends}, {"strides", steps}});
    Attrs pad{{"lo", lo}, {"hi", hi}, {"value", d == DType::boolean ? 1.0 : -0.5}};
    h.check(OpId::Pad, {h.r.tensor(t, d)}, pad);
    h.check(OpId::Pad, {h.r.tensor(t, d)}, pad.set("interior", interior));
    const int64_t dim = h.r.uniform_int(0, static_cast<int64_t>(t.size()) - 1);
    std::vector<Arg> parts;
    for (int64_t k = h.r.uniform_int(1, 4); k > 0; --k) {
      Shape p = t;
      p[static_cast<size_t>(dim)] = h.r.dim();
      parts.push_back(h.r.tensor(p, d));
    }
    h.check(OpId::Cat, parts, Attrs{{"dim", dim}});
  }
  h.check(OpId::Reshape, {h.r.tensor({6, 35})}, Attrs{{"shape", IntList{2, 3, 5, 7}}});
  h.check(OpId::Reshape, {h.r.tensor({4, 256, 768}, DType::bf16)}, Attrs{{"shape", IntList{4, 256, 12, 64}}});
  h.check(OpId::Permute, {h.r.tensor({67, 45})}, Attrs{{"dims", IntList{1, 0}}});
  h.check(OpId::Permute, {h.r.tensor({512, 768})}, Attrs{{"dims", IntList{1, 0}}});
  h.check(OpId::Permute, {h.r.tensor({4, 256, 12, 64}, DType::bf16)}, Attrs{{"dims", IntList{0, 2, 1, 3}}});
  h.check(OpId::BroadcastInDim, {h.r.tensor({768})},
          Attrs{{"shape", IntList{512, 768}}, {"broadcast_dims", IntList{1}}});
  h.check(OpId::BroadcastInDim, {h.r.tensor({300, 1})},
          Attrs{{"shape", IntList{300, 1001}}, {"broadcast_dims", IntList{0, 1}}});
}

TEST_CASE("gpu kernels: take and index_add with i32 and i64 indices", "[gpu][kernels]") {
  Harness h;
  for (int i = 0; i < 2 * kShapes; ++i) {
    const DType idx = i % 2 ? DType::i32 : DType::i64;
    const DType d = std::array{DType::i64, DType::f32, DType::bf16}[i % 3];
    Shape s = h.r.shape(1, 3);
    const int64_t dim = h.r.uniform_int(0, static_cast<int64_t>(s.size()) - 1);
    int64_t& rows = s[static_cast<size_t>(dim)];
    rows = std::max<int64_t>(rows, 1);
    h.check(OpId::Take, {h.r.tensor(s, d), h.r.indices(h.r.shape(0, 2), idx, rows)}, Attrs{{"dim", dim}});
    if (d == DType::bf16) continue;  // index_add in f32 and integers: bf16 sums round at every add
    const Arg at = h.r.indices({h.r.dim()}, idx, rows);
    Shape src = s;
    src[static_cast<size_t>(dim)] = at.type.shape[0];
    h.check(OpId::IndexAdd, {h.r.tensor(s, d), at, h.r.tensor(src, d)}, Attrs{{"dim", dim}});
  }
  const Attrs dim0{{"dim", int64_t{0}}};
  for (DType idx : {DType::i32, DType::i64}) {  // an embedding table and its gradient
    h.check(OpId::Take, {h.r.tensor({1000, 768}), h.r.indices({4, 128}, idx, 1000)}, dim0);
    h.check(OpId::Take, {h.r.tensor({1000, 768}, DType::bf16), h.r.indices({4, 128}, idx, 1000)}, dim0);
    h.check(OpId::IndexAdd, {h.r.tensor({1000, 768}), h.r.indices({512}, idx, 1000), h.r.tensor({512, 768})}, dim0);
    h.check(OpId::IndexAdd, {h.r.tensor({300, 5}, DType::i64), h.r.indices({700}, idx, 5),
                             h.r.tensor({300, 700}, DType::i64)}, Attrs{{"dim", int64_t{1}}});
  }
}

TEST_CASE("gpu kernels: full, iota, pack and unpack", "[gpu][kernels]") {
  Harness h;
  const std::string cpu = "cpu";  // place() moves it to cuda:0
  for (DType d : kAll)
    for (int i = 0; i < 4; ++i) {
      const Shape s = i == 0 ? Shape{3, 1001} : h.r.shape(0, 3);
      h.check(OpId::Full, {},
              dtype_attr(d).set("shape", IntList(s)).set("value", i == 1 ? 0.0 : -2.5).set("device", cpu));
      // iota: every dtype but bool; bf16 holds integers exactly up to 256 only.
      const int64_t length = i == 0 && d != DType::bf16 ? 5000 : h.r.uniform_int(0, 100);
      if (d != DType::boolean)
        h.check(OpId::Iota, {}, dtype_attr(d).set("length", length).set("device", cpu));
      std::vector<Arg> parts;
      IntLists shapes;
      int64_t total = 0;
      for (int64_t k = h.r.uniform_int(1, 4); k > 0; --k) {
        parts.push_back(h.r.tensor(i == 0 && k == 1 ? Shape{33, 101} : h.r.shape(0, 3), d));
        shapes.push_back(IntList(parts.back().type.shape));
        total += numel(parts.back().type.shape);
      }
      h.check(OpId::Pack, parts);
      h.check(OpId::Unpack, {h.r.tensor({total}, d)}, Attrs{{"shapes", shapes}});
    }
}

// quantize's codes and scales equal the CPU's byte for byte (both divide in
// f32 and round to even; the scale is rounded toward zero on both), and
// dequantize reads rows the CPU's quantize wrote, so its scales are real ones.
TEST_CASE("gpu kernels: quantize and dequantize", "[gpu][kernels]") {
  Harness h;
  const Shape shapes[] = {{1}, {300}, {3, 1000}, {2, 3, 513}, {1, 70000}, {4, 0}};
  for (const Shape& s : shapes)
    for (int64_t block : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{4096}}) {
      const Attrs a{{"block", block}};
      h.check(OpId::Quantize, {h.r.tensor(s, DType::f32, 3.0)}, a);
      h.check(OpId::Quantize, {h.r.tensor(s, DType::bf16)}, a);
      const Arg x = h.r.tensor(s, DType::f32, 0.5);
      const Trace q = one_op_trace(OpId::Quantize, {x}, a, Device{});
      const std::vector<Arg> rows = h.run(q, {x.data}, false);
      for (const char* d : {"f32", "bf16"}) h.check(OpId::Dequantize, {rows.at(0)}, Attrs(a).set("dtype", std::string(d)));
    }
}
