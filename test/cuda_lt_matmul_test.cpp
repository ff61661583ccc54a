// GEMM planning for cuBLASLt (executors/cuda/lt_matmul.h), checked without
// a GPU: the plans themselves, and a host model of what cuBLASLt computes
// from a plan's column-major layouts compared with a plain row-major matmul.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "executors/cuda/lt_matmul.h"

namespace fsdpc::cuda {
namespace {

std::vector<float> iota_data(int64_t n, int salt) {
  std::vector<float> v(static_cast<size_t>(n));
  // Small integers: every sum below is exact in float, so results compare equal.
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + salt) % 11 - 5);
  return v;
}

// What cuBLASLt computes from lt_problem(plan): column-major D(n x m) =
// alpha * op(A)·op(B) + bias per row of D, per batch entry and host-loop
// call. Written from cuBLASLt's definitions, independently of the planner.
std::vector<float> run_lt_model(const GemmPlan& plan, const std::vector<float>& a, const std::vector<float>& b,
                                const std::vector<float>* bias) {
  const LtProblem lt = lt_problem(plan);
  std::vector<float> c(static_cast<size_t>(numel(plan.out)), -99.0f);
  const auto at = [](const std::vector<float>& data, const LtMatrix& mat, int64_t base, int64_t i, int64_t j) {
    // op(mat)(i, j) of a column-major matrix starting at data[base].
    return mat.transpose ? data[static_cast<size_t>(base + j + i * mat.ld)]
                         : data[static_cast<size_t>(base + i + j * mat.ld)];
  };
  const int64_t rows = static_cast<int64_t>(lt.d.rows), cols = static_cast<int64_t>(lt.d.cols);
  const int64_t inner = static_cast<int64_t>(lt.a.transpose ? lt.a.rows : lt.a.cols);
  REQUIRE(static_cast<int64_t>(lt.a.transpose ? lt.a.cols : lt.a.rows) == rows);
  REQUIRE(static_cast<int64_t>(lt.b.transpose ? lt.b.rows : lt.b.cols) == cols);
  REQUIRE(static_cast<int64_t>(lt.b.transpose ? lt.b.cols : lt.b.rows) == inner);
  REQUIRE(lt.a.ld >= static_cast<int64_t>(lt.a.rows));
  REQUIRE(lt.b.ld >= static_cast<int64_t>(lt.b.rows));
  REQUIRE(lt.d.ld >= static_cast<int64_t>(lt.d.rows));
  for (int64_t call = 0; call < plan.calls(); ++call) {
    int64_t rest = call, off_a = 0, off_b = 0, off_c = 0;
    for (size_t l = plan.outer.size(); l-- > 0;) {
      const int64_t j = rest % plan.outer[l].count;
      rest /= plan.outer[l].count;
      off_a += j * plan.outer[l].step_a;
      off_b += j * plan.outer[l].step_b;
      off_c += j * plan.outer[l].step_c;
    }
    for (int64_t e = 0; e < lt.batch; ++e) {
      const int64_t base_a = off_b + e * lt.a.batch_stride;  // cuBLASLt's A is our b
      const int64_t base_b = off_a + e * lt.b.batch_stride;
      const int64_t base_d = off_c + e * lt.d.batch_stride;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          float sum = 0;
          for (int64_t l = 0; l < inner; ++l) sum += at(b, lt.a, base_a, i, l) * at(a, lt.b, base_b, l, j);
          sum *= plan.alpha;
          if (bias) sum += (*bias)[static_cast<size_t>(i)];
          c[static_cast<size_t>(base_d + i + j * lt.d.ld)] = sum;
        }
    }
  }
  return c;
}

// Row-major matmul with NumPy batch broadcasting, transposes by index.
std::vector<float> reference_matmul(const Shape& as, const Shape& bs, const std::vector<float>& a,
                                    const std::vector<float>& b, bool ta, bool tb, const Shape& out) {
  const size_t ra = as.size(), rb = bs.size(), ro = out.size();
  const int64_t m = out[ro - 2], n = out[ro - 1], k = ta ? as[ra - 2] : as[ra - 1];
  std::vector<float> c(static_cast<size_t>(numel(out)));
  const int64_t batches = numel(out) / (m * n);
  for (int64_t p = 0; p < batches; ++p) {
    // Unravel p over out's batch dims, then ravel into a's and b's.
    int64_t rest = p, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = ro - 2; d-- > 0;) {
      const int64_t idx = rest % out[d];
      rest /= out[d];
      const size_t back = ro - 2 - d;  // 1 = innermost batch dim
      if (back <= ra - 2) {
        const int64_t size = as[ra - 2 - back];
        ia += (size == 1 ? 0 : idx) * sa;
        sa *= size;
      }
      if (back <= rb - 2) {
        const int64_t size = bs[rb - 2 - back];
        ib += (size == 1 ? 0 : idx) * sb;
        sb *= size;
      }
    }
    const int64_t a0 = ia * m * k, b0 = ib * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0;
        for (int64_t l = 0; l < k; ++l) {
          const float x = a[static_cast<size_t>(a0 + (ta ? l * m + i : i * k + l))];
          const float y = b[static_cast<size_t>(b0 + (tb ? j * k + l : l * n + j))];
          sum += x * y;
        }
        c[static_cast<size_t>(p * m * n + i * n + j)] = sum;
      }
  }
  return c;
}

void check_matmul(const Shape& as, const Shape& bs, bool ta = false, bool tb = false) {
  CAPTURE(shape_str(as), shape_str(bs), ta, tb);
  const GemmPlan plan = plan_matmul(as, bs, ta, tb);
  const auto a = iota_data(numel(as), 1), b = iota_data(numel(bs), 3);
  CHECK(run_lt_model(plan, a, b, nullptr) == reference_matmul(as, bs, a, b, ta, tb, plan.out));
}

}  // namespace

TEST_CASE("a 2-D matmul is C^T = B^T A^T with no transposes") {
  const GemmPlan p = plan_matmul({4, 3}, {3, 5});
  CHECK((p.m == 4 && p.n == 5 && p.k == 3));
  CHECK((p.lda == 3 && p.ldb == 5 && p.ldc == 5));
  CHECK(p.batch == 1);
  CHECK(p.outer.empty());
  CHECK(p.out == Shape{4, 5});
  const LtProblem lt = lt_problem(p);
  CHECK(lt.a == LtMatrix{5, 3, 5, 0, false});  // our B, column-major [n, k]
  CHECK(lt.b == LtMatrix{3, 4, 3, 0, false});  // our A, column-major [k, m]
  CHECK(lt.d == LtMatrix{5, 4, 5, 0, false});
  CHECK(lt.batch == 1);
  check_matmul({4, 3}, {3, 5});
}

TEST_CASE("equal batch dims merge into one strided batch") {
  const GemmPlan p = plan_matmul({2, 3, 4, 6}, {2, 3, 6, 5});
  CHECK(p.batch == 6);
  CHECK((p.stride_a == 24 && p.stride_b == 30 && p.stride_c == 20));
  CHECK(p.outer.empty());
  CHECK(p.out == Shape{2, 3, 4, 5});
  CHECK(lt_problem(p).batch == 6);
  check_matmul({2, 3, 4, 6}, {2, 3, 6, 5});
}

TEST_CASE("a shared 2-D right operand folds the batch into M") {
  const GemmPlan p = plan_matmul({2, 3, 4, 6}, {6, 5});
  CHECK((p.m == 24 && p.batch == 1 && p.outer.empty()));
  CHECK(p.out == Shape{2, 3, 4, 5});
  check_matmul({2, 3, 4, 6}, {6, 5});
  // Broadcast size-1 batch dims of b are shared too.
  const GemmPlan q = plan_matmul({2, 3, 4, 6}, {1, 1, 6, 5});
  CHECK((q.m == 24 && q.batch == 1));
  check_matmul({2, 3, 4, 6}, {1, 1, 6, 5});
}

TEST_CASE("a transposed left operand cannot fold: stride 0 broadcasts b") {
  const GemmPlan p = plan_matmul({6, 3, 4}, {3, 5}, /*trans_a=*/true);
  CHECK((p.m == 4 && p.k == 3 && p.lda == 4));
  CHECK(p.batch == 6);
  CHECK((p.stride_a == 12 && p.stride_b == 0 && p.stride_c == 20));
  const LtProblem lt = lt_problem(p);
  CHECK(lt.b == LtMatrix{4, 3, 4, 12, true});  // stored [k, m] row-major = [m, k] column-major
  CHECK(lt.a.batch_stride == 0);
  check_matmul({6, 3, 4}, {3, 5}, true);
}

TEST_CASE("a transposed right operand (attention's keys, linear's weight)") {
  const GemmPlan p = plan_matmul({2, 4, 3}, {2, 5, 3}, false, /*trans_b=*/true);
  CHECK((p.n == 5 && p.k == 3 && p.ldb == 3));
  CHECK(lt_problem(p).a == LtMatrix{3, 5, 3, 15, true});
  check_matmul({2, 4, 3}, {2, 5, 3}, false, true);
  check_matmul({2, 3, 4, 3}, {2, 3, 5, 4}, true, true);
}

TEST_CASE("batch dims one stride cannot describe become host loops") {
  const GemmPlan p = plan_matmul({2, 1, 4, 3}, {1, 5, 3, 2});
  CHECK(p.out == Shape{2, 5, 4, 2});
  CHECK((p.batch == 5 && p.stride_a == 0 && p.stride_b == 6 && p.stride_c == 8));
  REQUIRE(p.outer.size() == 1);
  CHECK(p.outer[0] == OuterLoop{2, 12, 0, 40});
  CHECK(p.calls() == 2);
  check_matmul({2, 1, 4, 3}, {1, 5, 3, 2});
  check_matmul({1, 3, 4, 6}, {2, 3, 6, 5});
  check_matmul({3, 1, 2, 1, 2, 3}, {1, 2, 2, 4, 3, 2});
  // A shared left operand: a stride-0 batch of a, no fold (C's rows interleave).
  const GemmPlan q = plan_matmul({4, 3}, {2, 3, 5});
  CHECK((q.batch == 2 && q.stride_a == 0 && q.stride_b == 15 && q.m == 4 && q.outer.empty()));
  check_matmul({4, 3}, {2, 3, 5});
}

TEST_CASE("linear folds x's leading dims into M and reads w transposed") {
  const GemmPlan p = plan_linear({2, 3, 8}, {16, 8}, true);
  CHECK((p.m == 6 && p.k == 8 && p.n == 16 && p.trans_b && !p.trans_a && p.bias));
  CHECK(p.out == Shape{2, 3, 16});
  const LtProblem lt = lt_problem(p);
  CHECK(lt.a == LtMatrix{8, 16, 8, 0, true});  // w [out, in] row-major = [in, out] column-major
  CHECK(lt.b == LtMatrix{8, 6, 8, 0, false});
  CHECK(lt.d == LtMatrix{16, 6, 16, 0, false});

  // y = x w^T + b, element by element.
  const auto x = iota_data(6 * 8, 1), w = iota_data(16 * 8, 2), bias = iota_data(16, 5);
  const std::vector<float> y = run_lt_model(p, x, w, &bias);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 16; ++o) {
      float sum = 0;
      for (int64_t i = 0; i < 8; ++i) sum += x[static_cast<size_t>(r * 8 + i)] * w[static_cast<size_t>(o * 8 + i)];
      CHECK(y[static_cast<size_t>(r * 16 + o)] == sum + bias[static_cast<size_t>(o)]);
    }

  const GemmPlan v = plan_linear({8}, {16, 8}, false);
  CHECK((v.m == 1 && v.out == Shape{16} && !v.bias));
}

TEST_CASE("alpha scales the product (attention's scale)") {
  GemmPlan p = plan_matmul({3, 2}, {2, 4});
  p.alpha = 0.5f;
  const auto a = iota_data(6, 1), b = iota_data(8, 3);
  std::vector<float> want = reference_matmul({3, 2}, {2, 4}, a, b, false, false, p.out);
  for (float& v : want) v *= 0.5f;
  CHECK(run_lt_model(p, a, b, nullptr) == want);
}

TEST_CASE("empty problems plan nothing; K = 0 is not empty") {
  CHECK(plan_matmul({0, 4, 3}, {3, 5}).empty());
  CHECK(plan_matmul({0, 4, 3}, {3, 5}).out == Shape{0, 4, 5});
  CHECK(plan_matmul({2, 0, 4, 3}, {2, 0, 3, 5}).empty());
  CHECK(plan_matmul({0, 3}, {3, 5}).empty());
  CHECK(plan_matmul({4, 3}, {3, 0}).empty());
  CHECK(plan_linear({0, 8}, {16, 8}, true).empty());
  const GemmPlan k0 = plan_matmul({4, 0}, {0, 5});
  CHECK((!k0.empty() && k0.k == 0 && k0.out == Shape{4, 5}));
}

TEST_CASE("batches beyond cuBLASLt's int32 count loop on the host") {
  const GemmPlan p = plan_matmul({kMaxLtBatch + 1, 2, 2}, {kMaxLtBatch + 1, 2, 2});
  CHECK(p.batch == 1);
  REQUIRE(p.outer.size() == 1);
  CHECK(p.outer[0] == OuterLoop{kMaxLtBatch + 1, 4, 4, 4});
  // Folding would overflow M: the shared operand stays a stride-0 batch.
  const GemmPlan q = plan_matmul({kMaxLtBatch, 2, 2}, {2, 2});
  CHECK((q.batch == kMaxLtBatch && q.m == 2 && q.stride_b == 0 && q.outer.empty()));
}

TEST_CASE("alignment is the largest power of two (<= 256) every entry keeps") {
  auto* base = reinterpret_cast<const void*>(uintptr_t{0x10000});
  CHECK(lt_alignment(base, 4, {}) == 256);
  CHECK(lt_alignment(base, 4, {0}) == 256);
  CHECK(lt_alignment(base, 4, {64}) == 256);
  CHECK(lt_alignment(base, 4, {3}) == 4);  // 12-byte steps
  CHECK(lt_alignment(base, 2, {24}) == 16);
  CHECK(lt_alignment(reinterpret_cast<const void*>(uintptr_t{0x10080}), 4, {}) == 128);
  CHECK(lt_alignment(reinterpret_cast<const void*>(uintptr_t{0x10002}), 2, {}) == 2);
}

}  // namespace fsdpc::cuda
