// SGD and AdamW on local shards against a double-precision re-implementation
// of torch.optim's update rules; sharded stepping equals whole stepping; state
// memory is accounted as optimizer_state.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ir/error.h"
#include "runtime/optimizer.h"

using namespace fsdpc;
using Kind = OptimizerOptions::Kind;

namespace {
constexpr int kOptState = static_cast<int>(MemCategory::optimizer_state);

// torch.optim.SGD (dampening 0, no Nesterov) and torch.optim.AdamW,
// single-tensor path, in double.
struct Reference {
  OptimizerOptions o;
  std::vector<double> p, buf0, buf1;
  int64_t t = 0;

  void step(const std::vector<float>& grad) {
    ++t;
    if (buf0.empty()) buf0.assign(p.size(), 0.0), buf1.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i];
      if (o.kind == Kind::sgd) {
        g += o.weight_decay * p[i];
        if (o.momentum != 0) g = buf0[i] = (t == 1 ? g : o.momentum * buf0[i] + g);
        p[i] -= o.lr * g;
        continue;
      }
      p[i] *= 1 - o.lr * o.weight_decay;
      buf0[i] = o.beta1 * buf0[i] + (1 - o.beta1) * g;
      buf1[i] = o.beta2 * buf1[i] + (1 - o.beta2) * g * g;
      double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
      p[i] -= o.lr / bc1 * buf0[i] / (std::sqrt(buf1[i]) / std::sqrt(bc2) + o.eps);
    }
  }
};

std::vector<float> initial(int64_t n) {
  std::vector<float> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(std::cos(0.37 * static_cast<double>(i)) * 0.8);
  return p;
}

// Gradients that change sign and scale from step to step, some tiny.
std::vector<float> gradient(int64_t n, int64_t step) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    g[i] = static_cast<float>(std::sin(0.9 * static_cast<double>(i) + 1.3 * static_cast<double>(step)) *
                              std::pow(10.0, static_cast<double>(i % 5) - 3));
  return g;
}

void check_against_reference(const OptimizerOptions& o) {
  const int64_t n = 41;
  Allocator alloc;
  Optimizer opt(o, alloc);
  std::vector<float> p = initial(n);
  Reference ref{o, std::vector<double>(p.begin(), p.end()), {}, {}};
  for (int64_t step = 0; step < 6; ++step) {
    std::vector<float> g = gradient(n, step);
    opt.step({{"w", p.data(), g.data(), n}});
    ref.step(g);
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(step, i);
      CHECK(p[i] == Approx(ref.p[i]).epsilon(1e-6).margin(1e-7));
    }
  }
  CHECK(opt.steps() == 6);
}

std::vector<float> run_whole(const OptimizerOptions& o, int64_t n, int steps) {
  Allocator alloc;
  Optimizer opt(o, alloc);
  std::vector<float> p = initial(n);
  for (int s = 0; s < steps; ++s) {
    std::vector<float> g = gradient(n, s);
    opt.step({{"w", p.data(), g.data(), n}});
  }
  return p;
}

// Each simulated rank has its own optimizer and steps its padded shard.
std::vector<float> run_sharded(const OptimizerOptions& o, int64_t n, int64_t world, int steps) {
  const int64_t rows = (n + world - 1) / world;
  std::vector<float> p = initial(n);
  p.resize(static_cast<size_t>(rows * world), 0.0f);  // padding: value 0 ...
  for (int64_t r = 0; r < world; ++r) {
    Allocator alloc;
    Optimizer opt(o, alloc);
    for (int s = 0; s < steps; ++s) {
      std::vector<float> g = gradient(n, s);
      g.resize(p.size(), 0.0f);  // ... and gradient 0
      opt.step({{"w", p.data() + r * rows, g.data() + r * rows, rows}});
    }
  }
  return p;
}
}  // namespace

TEST_CASE("adamw matches torch's update rule", "[optimizer]") {
  check_against_reference({Kind::adamw, 1e-3, 0, 0.01, 0.9, 0.999, 1e-8});
  check_against_reference({Kind::adamw, 3e-2, 0, 0.1, 0.8, 0.95, 1e-6});
  check_against_reference({Kind::adamw, 1e-3, 0, 0.0, 0.9, 0.999, 1e-8});
}

TEST_CASE("sgd matches torch's update rule", "[optimizer]") {
  check_against_reference({Kind::sgd, 0.1, 0, 0, 0.9, 0.999, 1e-8});       // plain
  check_against_reference({Kind::sgd, 0.1, 0.9, 0, 0.9, 0.999, 1e-8});     // momentum
  check_against_reference({Kind::sgd, 0.05, 0.9, 0.01, 0.9, 0.999, 1e-8}); // momentum + L2
  check_against_reference({Kind::sgd, 0.05, 0, 0.1, 0.9, 0.999, 1e-8});    // L2 only
}

TEST_CASE("sgd's momentum buffer starts as the first gradient", "[optimizer]") {
  Allocator alloc;
  Optimizer opt({Kind::sgd, 0.5, 0.9}, alloc);
  std::vector<float> p{1.0f}, g{2.0f};
  opt.step({{"w", p.data(), g.data(), 1}});
  CHECK(p[0] == 0.0f);  // 1 - 0.5 * 2, not 1 - 0.5 * (1 - 0.9) * 2
  opt.step({{"w", p.data(), g.data(), 1}});
  CHECK(p[0] == Approx(-0.5 * (0.9 * 2 + 2)));
}

TEST_CASE("stepping shards separately equals stepping the whole parameter", "[optimizer]") {
  const int64_t n = 37;
  for (const OptimizerOptions& o : {OptimizerOptions{Kind::adamw, 1e-2, 0, 0.01},
                                    OptimizerOptions{Kind::sgd, 0.1, 0.9, 0.01}}) {
    const std::vector<float> whole = run_whole(o, n, 5);
    for (int64_t world = 1; world <= 5; ++world) {
      CAPTURE(world, static_cast<int>(o.kind));
      std::vector<float> sharded = run_sharded(o, n, world, 5);
      CHECK(std::vector<float>(sharded.begin(), sharded.begin() + n) == whole);
      // Padding has zero value and gradient; weight decay keeps it at zero.
      for (size_t i = n; i < sharded.size(); ++i) CHECK(sharded[i] == 0.0f);
    }
  }
}

TEST_CASE("optimizer state is allocated lazily and accounted", "[optimizer]") {
  const int64_t n = 100, param_bytes = n * 4;
  std::vector<float> a = initial(n), b = initial(n), g = gradient(n, 0);
  struct Case {
    OptimizerOptions o;
    int64_t state_per_param;
  };
  for (const Case& c : {Case{{Kind::adamw}, 2 * param_bytes}, Case{{Kind::sgd, 0.1, 0.9}, param_bytes},
                        Case{{Kind::sgd, 0.1, 0.0}, 0}}) {
    Allocator alloc;
    {
      Optimizer opt(c.o, alloc);
      CHECK(alloc.stats().live[kOptState] == 0);
      opt.step({{"a", a.data(), g.data(), n}});
      CHECK(alloc.stats().live[kOptState] == c.state_per_param);
      opt.step({{"a", a.data(), g.data(), n}, {"b", b.data(), g.data(), n}});
      CHECK(alloc.stats().live[kOptState] == 2 * c.state_per_param);
      opt.step({{"a", a.data(), g.data(), n}, {"b", b.data(), g.data(), n}});  // no new state
      CHECK(alloc.stats().live[kOptState] == 2 * c.state_per_param);
      CHECK(alloc.stats().total_live == 2 * c.state_per_param);
    }
    CHECK(alloc.live_buffers() == 0);  // released with the optimizer
  }
}

TEST_CASE("a parameter without a gradient is skipped", "[optimizer]") {
  Allocator alloc;
  Optimizer opt({Kind::adamw, 0.1, 0, 0.1}, alloc);
  std::vector<float> p{1.0f, -2.0f};
  opt.step({{"w", p.data(), nullptr, 2}});
  CHECK(p == std::vector<float>{1.0f, -2.0f});  // not even decayed, as in torch
  CHECK(alloc.stats().live[kOptState] == 0);
  CHECK(opt.steps() == 1);
}

TEST_CASE("options out of range are rejected", "[optimizer]") {
  Allocator alloc;
  CHECK_THROWS_AS(Optimizer({Kind::adamw, -1e-3}, alloc), Error);
  CHECK_THROWS_AS(Optimizer({Kind::adamw, 1e-3, 0, -0.1}, alloc), Error);
  CHECK_THROWS_AS(Optimizer({Kind::adamw, 1e-3, 0, 0, 1.0}, alloc), Error);
  CHECK_THROWS_AS(Optimizer({Kind::adamw, 1e-3, 0, 0, 0.9, -0.5}, alloc), Error);
  CHECK_THROWS_AS(Optimizer({Kind::sgd, std::nan(""), 0}, alloc), Error);
  CHECK_THROWS_AS(Optimizer({Kind::sgd, 0.1, -0.9}, alloc), Error);
  CHECK_NOTHROW(Optimizer({Kind::sgd, 0.1, 0, 0, 5.0}, alloc));  // betas are adamw's only
}

TEST_CASE("adamw's betas and eps default to torch.optim.AdamW's", "[optimizer]") {
  const OptimizerOptions o;
  CHECK(o.beta1 == 0.9);
  CHECK(o.beta2 == 0.999);
  CHECK(o.eps == 1e-8);
  Allocator alloc;
  CHECK_THROWS_WITH(Optimizer({Kind::adamw, 1e-3, 0, 0, 0.9, 0.999, -1e-8}, alloc), Catch::Contains("invalid eps"));
  CHECK_THROWS_WITH(Optimizer({Kind::adamw, 1e-3, 0, 0, 0.9, 1.0}, alloc), Catch::Contains("beta2"));
  CHECK_NOTHROW(Optimizer({Kind::adamw, 1e-3, 0, 0, 0.0, 0.0, 0.0}, alloc));  // the closed ends of the ranges
}

TEST_CASE("set_lr changes the rate of the next step only", "[optimizer]") {
  // A schedule's rate per step equals an optimizer built with that rate,
  // given the same state: AdamW's bias corrections use the step count, not lr.
  const int64_t n = 16;
  Allocator alloc;
  Optimizer scheduled({Kind::adamw, 1e-3, 0, 0.01}, alloc);
  std::vector<float> p = initial(n);
  const std::vector<double> rates = {1e-4, 5e-4, 1e-3, 2e-4};
  Reference ref{{Kind::adamw, 0.0, 0, 0.01, 0.9, 0.999, 1e-8}, std::vector<double>(p.begin(), p.end()), {}, {}, 0};
  for (size_t s = 0; s < rates.size(); ++s) {
    std::vector<float> g = gradient(n, static_cast<int>(s));
    scheduled.set_lr(rates[s]);
    scheduled.step({{"w", p.data(), g.data(), n}});
    ref.o.lr = rates[s];
    ref.step(g);
  }
  for (int64_t i = 0; i < n; ++i) CHECK(p[i] == Approx(ref.p[i]).epsilon(1e-6).margin(1e-7));
  CHECK(scheduled.options().lr == 2e-4);
  CHECK_THROWS_WITH(scheduled.set_lr(-1.0), Catch::Contains("invalid learning rate"));
}
