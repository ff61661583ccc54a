// quantize and dequantize (ir/quantize.h): the format's sizes, the round
// trip on the CPU kernels and the reference executor within the stated
// bound, for random and adversarial blocks, and non-finite values refused.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "ir/meta.h"
#include "ir/quantize.h"
#include "test/cpu_check.h"

using namespace fsdpc;
using namespace fsdpc::test;
using Catch::Matchers::Contains;

namespace {

// x -> q = quantize(x) -> y = dequantize(q), returning (q, y).
Trace round_trip(const TensorType& x, int64_t block, DType out) {
  Trace t;
  TraceBuilder b(t, TraceBuilder::Options{false});
  b.add_arg(Proxy{"x", x, "", true});
  Proxy q = b.emit1(OpId::Quantize, {Operand::of("x")}, Attrs{{"block", block}});
  Proxy y = b.emit1(OpId::Dequantize, {Operand::of(q.name)},
                    Attrs{{"block", block}, {"dtype", std::string(dtype_name(out))}});
  t.returns = ReturnTree::tuple({ReturnTree::leaf(q.name), ReturnTree::leaf(y.name)});
  return t;
}

float scale_at(const Value& q, int64_t row, int64_t n, int64_t block, int64_t j) {
  const int64_t bytes = quantized_row_bytes(n, block);
  unsigned char sb[4];
  for (int k = 0; k < 4; ++k)
    sb[k] = static_cast<unsigned char>(static_cast<int8_t>(q.data[row * bytes + n + 4 * j + k]));
  float s;
  std::memcpy(&s, sb, 4);
  return s;
}

// Runs the round trip of x on the CPU and the reference and checks, block
// by block: both within quantize_error_bound of x (plus a bf16 rounding of
// the result when `out` is bf16), the same scales, codes at most one apart
// (x / s may round either way at a tie, in f32 or float64).
void check_round_trip(const Value& x, int64_t block, DType out = DType::f32) {
  const Trace t = round_trip(x.type, block, out);
  INFO(print_trace(t) << " with block " << block);
  const std::vector<Value> cpu = CpuRunner().run(t, {x});
  const std::vector<Value> ref = reference::run(t, {x});
  const int64_t n = x.type.shape.back(), rows = n == 0 ? 0 : numel(x.type.shape) / n;
  const int64_t bytes = quantized_row_bytes(n, block);
  REQUIRE(cpu[0].type.shape.back() == bytes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j * block < n; ++j) {
      double amax = 0;
      for (int64_t i = j * block; i < std::min(n, (j + 1) * block); ++i)
        amax = std::max(amax, std::abs(x.data[r * n + i]));
      const float s = scale_at(cpu[0], r, n, block, j);
      CHECK(s == scale_at(ref[0], r, n, block, j));
      CHECK(s == quantize_scale(static_cast<float>(amax)));
      CHECK(static_cast<double>(s) * kQuantLevels <= amax);
      CHECK(static_cast<double>(std::nextafter(s, INFINITY)) * kQuantLevels > amax);      const double bound = quantize_error_bound(amax);
      for (int64_t i = j * block; i < std::min(n, (j + 1) * block); ++i) {
        const double v = x.data[r * n + i];
        const double slack = out == DType::bf16 ? std::ldexp(std::abs(v) + bound, -8) : 0.0;
        INFO("row " << r << ", value " << i << ": " << v << ", scale " << s);
        CHECK(std::abs(cpu[0].data[r * bytes + i] - ref[0].data[r * bytes + i]) <= 1);
        CHECK(std::abs(cpu[1].data[r * n + i] - v) <= bound + slack);
        CHECK(std::abs(ref[1].data[r * n + i] - v) <= bound + slack);
      }
    }
}

Value value_of(Shape shape, DType d, Data data) { return reference::make_value(tt(std::move(shape), d), std::move(data)); }

}  // namespace

TEST_CASE("quantize: a row of n values takes n + 4 ceil(n / block) bytes, and only those", "[quantize]") {
  for (int64_t block : {1, 3, 7, 256, 4096})
    for (int64_t n = 0; n < 3000; n += (n < 600 ? 1 : 37)) {
      const int64_t bytes = quantized_row_bytes(n, block);
      CHECK(bytes == n + 4 * ((n + block - 1) / block));
      CHECK(dequantized_row_size(bytes, block) == n);
    }
  // Between two rows' sizes no row fits: 256 values take 260 bytes, 257 take 265.
  for (int64_t bytes : {261, 262, 263, 264}) CHECK_FALSE(dequantized_row_size(bytes, 256));
  // int8 rows of a large tensor: 1.6% over a quarter of its f32 bytes.
  CHECK(quantized_row_bytes(1 << 20, kQuantBlock) == (1 << 20) + 4 * ((1 << 20) / 256));
}

TEST_CASE("quantize: random rows round-trip within the bound on the CPU and the reference", "[quantize]") {
  Rng r;
  const Shape shapes[] = {{1}, {255}, {256}, {257}, {3, 1000}, {2, 3, 513}, {4, 0}, {1, 70000}};
  for (const Shape& s : shapes)
    for (int64_t block : {int64_t{1}, int64_t{7}, kQuantBlock, int64_t{4096}})
      for (DType d : {DType::f32, DType::bf16}) {
        const Arg a = r.tensor(s, d, r.uniform(1e-3, 10.0));
        check_round_trip(reference::make_value(a.type, a.data), block);
      }
  const Arg a = r.tensor({5, 300});
  check_round_trip(reference::make_value(a.type, a.data), kQuantBlock, DType::bf16);
}

TEST_CASE("quantize: adversarial blocks", "[quantize]") {
  const int64_t n = 2 * kQuantBlock + 5;
  auto row = [&](auto f) {
    Data d(n);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(f(i));  // f32 values, as a tensor holds
    return value_of({1, n}, DType::f32, std::move(d));
  };
  SECTION("zeros code to zeros with scale 0, exactly") {
    const Value x = row([](int64_t) { return 0.0; });
    check_round_trip(x, kQuantBlock);
    const std::vector<Value> y = CpuRunner().run(round_trip(x.type, kQuantBlock, DType::f32), {x});
    for (double v : y[1].data) CHECK(v == 0.0);
  }
  SECTION("one huge value among small ones: the small ones lose their digits, within the bound") {
    check_round_trip(row([](int64_t i) { return i == 3 ? 1e30 : 1e-3 * static_cast<double>(i % 5); }), kQuantBlock);
  }
  SECTION("the extremes of f32: its largest value and subnormal blocks") {
    check_round_trip(row([](int64_t i) { return i % 2 ? FLT_MAX : -FLT_MAX / 3; }), kQuantBlock);
    check_round_trip(row([](int64_t i) { return static_cast<double>(static_cast<float>(1e-40 * (i % 7))); }),
                     kQuantBlock);
  }
  SECTION("equal magnitudes and halfway values: symmetric codes, ties to even") {
    check_round_trip(row([](int64_t i) { return i % 2 ? 0.75 : -0.75; }), kQuantBlock);
    // amax 127 makes the scale 1: i + 0.5 sits on a tie, and the code is even.
    const Value x = row([](int64_t i) { return i == 0 ? 127.0 : static_cast<double>(i % 100) + 0.5; });
    const std::vector<Value> q = CpuRunner().run(round_trip(x.type, kQuantBlock, DType::f32), {x});
    for (int64_t i = 1; i < kQuantBlock; ++i) CHECK(static_cast<int64_t>(q[0].data[i]) % 2 == 0);
    CHECK(q[0].data[0] == 127);
  }
}

TEST_CASE("quantize: NaN and infinities are refused, naming the value and the block", "[quantize]") {
  for (double bad : {NAN, INFINITY, -INFINITY}) {
    Data d(600, 0.5);
    d[300] = bad;
    const Value x = value_of({2, 300}, DType::f32, d);
    const Trace t = round_trip(x.type, kQuantBlock, DType::f32);
    CHECK_THROWS_WITH(CpuRunner().run(t, {x}), Contains("holds NaN or an infinity in row 1, values [0, 256)"));
    CHECK_THROWS_WITH(reference::run(t, {x}), Contains("row 1, values [0, 256)"));
  }
}

TEST_CASE("quantize: types, and the errors of a misused buffer", "[quantize]") {
  TensorType x = tt({13, 300});
  x.dist = DistType::fully_sharded;
  const TensorType q = infer_types(OpId::Quantize, {OperandType::of(x)}, Attrs{{"block", int64_t{256}}}).at(0);
  CHECK(q.dtype == DType::i8);
  CHECK(q.shape == Shape{13, 308});
  CHECK(q.dist == DistType::fully_sharded);  // a shard quantizes where it lies
  CHECK_THROWS_WITH(infer_types(OpId::Quantize, {OperandType::of(tt({4}, DType::i32))}, Attrs{{"block", int64_t{8}}}),
                    Contains("expected f32 or bf16"));
  CHECK_THROWS_WITH(infer_types(OpId::Quantize, {OperandType::of(tt({4}))}, Attrs{{"block", int64_t{0}}}),
                    Contains("block 0 must be in [1, 2^30]"));
  CHECK_THROWS_WITH(infer_types(OpId::Dequantize, {OperandType::of(tt({262}, DType::i8))},
                                Attrs{{"block", int64_t{256}}, {"dtype", "f32"}}),
                    Contains("no row of values quantizes to 262 bytes in blocks of 256"));
  CHECK_THROWS_WITH(infer_types(OpId::Dequantize, {OperandType::of(tt({260}))},
                                Attrs{{"block", int64_t{256}}, {"dtype", "f32"}}),
                    Contains("expected an i8 buffer"));
  CHECK_THROWS_WITH(infer_types(OpId::Dequantize, {OperandType::of(tt({260}, DType::i8))},
                                Attrs{{"block", int64_t{256}}, {"dtype", "i32"}}),
                    Contains("dtype i32 is not supported"));
}
