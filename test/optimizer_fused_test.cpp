// The fused optimizer pass and threaded initialisation give the bits of the
// unfused, single-threaded code: AdamW's first step on uninitialised moments
// equals a step on zeroed ones, clipping's coefficient folded into the
// update equals scaling the gradient first, and init_shard on several
// threads equals it row by row on one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "executors/cpu/cpu_executor.h"
#include "executors/device_backend.h"
#include "runtime/init.h"

using namespace fsdpc;

namespace {

// FSDPC_CPU_THREADS for one scope.
struct Threads {
  explicit Threads(const char* n) {
    setenv("FSDPC_CPU_THREADS", n, 1);
    set_cpu_ranks_per_host(1);
  }
  ~Threads() {
    unsetenv("FSDPC_CPU_THREADS");
    set_cpu_ranks_per_host(1);
  }
};

constexpr int64_t kN = 200003;  // above the loops' parallel threshold, odd

std::vector<float> wave(float a, float b) {
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = a * std::sin(b * static_cast<float>(i) + 0.25f);
  return x;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const AdamwStep kAdamw{1e-3, 0.9, 0.999, 1e-8, 0.01, 1e-2, 0.03};

}  // namespace

TEST_CASE("fused adamw: a first step on uninitialised moments equals one on zeros", "[optimizer][fused]") {
  DeviceBackend& cpu = cpu_backend();
  const std::vector<float> g = wave(0.1f, 0.001f), p0 = wave(1.0f, 0.37f);
  for (const char* threads : {"1", "3"}) {
    Threads t(threads);
    std::vector<float> p = p0, m(kN, 0.0f), v(kN, 0.0f);
    cpu.adamw_update(p.data(), g.data(), m.data(), v.data(), kN, kAdamw);
    std::vector<float> pf = p0, mf(kN, std::numeric_limits<float>::quiet_NaN()), vf(mf);
    AdamwStep first = kAdamw;
    first.first = true;
    cpu.adamw_update(pf.data(), g.data(), mf.data(), vf.data(), kN, first);
    CHECK(same_bits(p, pf));
    CHECK(same_bits(m, mf));
    CHECK(same_bits(v, vf));
  }
}

TEST_CASE("fused updates: clipping's coefficient read with the gradient equals scaling it first",
          "[optimizer][fused]") {
  DeviceBackend& cpu = cpu_backend();
  const std::vector<float> g = wave(3.0f, 0.01f), p0 = wave(1.0f, 0.37f), m0 = wave(0.01f, 0.2f);
  const float c = 0.123456f;
  std::vector<float> scaled = g;
  cpu.scale(scaled.data(), kN, c);
  for (const char* threads : {"1", "3"}) {
    Threads t(threads);
    // AdamW, a later step (moments read).
    std::vector<float> p = p0, m = m0, v(kN, 1e-4f);
    cpu.adamw_update(p.data(), scaled.data(), m.data(), v.data(), kN, kAdamw);
    std::vector<float> pf = p0, mf = m0, vf(kN, 1e-4f);
    AdamwStep folded = kAdamw;
    folded.grad_scale = c;
    cpu.adamw_update(pf.data(), g.data(), mf.data(), vf.data(), kN, folded);
    CHECK(same_bits(p, pf));
    CHECK(same_bits(m, mf));
    CHECK(same_bits(v, vf));
    // SGD with momentum (first and later steps) and without.
    for (bool first : {true, false}) {
      std::vector<float> q = p0, b = m0, qf = p0, bf = m0;
      cpu.sgd_update(q.data(), scaled.data(), b.data(), kN, SgdStep{0.1, 0.9, 0.01, first});
      SgdStep s{0.1, 0.9, 0.01, first};
      s.grad_scale = c;
      cpu.sgd_update(qf.data(), g.data(), bf.data(), kN, s);
      CHECK(same_bits(q, qf));
      CHECK(same_bits(b, bf));
    }
    std::vector<float> q = p0, qf = p0;
    cpu.sgd_update(q.data(), scaled.data(), nullptr, kN, SgdStep{0.1, 0, 0.01, true});
    SgdStep s{0.1, 0, 0.01, true};
    s.grad_scale = c;
    cpu.sgd_update(qf.data(), g.data(), nullptr, kN, s);
    CHECK(same_bits(q, qf));
  }
}

TEST_CASE("threaded init_shard gives the values of one thread, row by row", "[init][fused]") {
  // 700 rows of 513: odd rows split Box–Muller pairs between rows; the
  // shard [100, 800) runs past the 700 real rows into padding.
  const Shape full{700, 513};
  const int64_t row = 513, begin = 100, rows = 700;
  for (ParamInit init : {ParamInit{ParamInit::Kind::normal, 0.02}, ParamInit{ParamInit::Kind::uniform, 0.5}}) {
    std::vector<float> whole(static_cast<size_t>(rows * row), -1.0f), by_row(whole);
    {
      Threads t("3");
      init_shard(whole.data(), full, begin, rows, init, 7, "h.0.w");
    }
    Threads t("1");
    for (int64_t r = 0; r < rows; ++r)  // each row below the parallel threshold
      init_shard(by_row.data() + r * row, full, begin + r, 1, init, 7, "h.0.w");
    CHECK(same_bits(whole, by_row));
    CHECK(whole.back() == 0.0f);  // padding
  }
}
