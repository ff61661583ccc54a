// The gradient-check harness of vjp_check_test: builds a small trace whose
// loss is sum(op(x) * r) for random r, differentiates it with grad(), runs
// the joint trace on the float64 reference executor (cotangent 1.0) and
// compares every gradient element with a central finite difference of the
// forward trace. Meshes of several ranks run SPMD; the objective then is
// `scale` times the sum of the ranks' losses.
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/mesh.h"
#include "ir/verifier.h"
#include "passes/grad.h"

namespace fsdpc::testing {

using reference::Value;

// Which ranks hold the same variable (a finite difference moves all of them).
enum class Tie {
  rank,     // every rank its own (a shard, or a per-rank input)
  all,      // every rank the same (a replicated parameter)
  replica,  // the ranks holding the same shard on a replicas x shards mesh
};

inline Operand in(const Proxy& p) { return Operand::of(p.name); }

class GradCheck {
 public:
  explicit GradCheck(uint64_t seed, Mesh mesh = flat_mesh(1))
      : rng_(seed), mesh_(mesh), b_(trace_), args_(mesh.world()) {}

  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  Shape shape(int64_t rank, int64_t lo = 1, int64_t hi = 4) {
    Shape s;
    for (int64_t i = 0; i < rank; ++i) s.push_back(integer(lo, hi));
    return s;
  }
  std::mt19937_64& rng() { return rng_; }
  TraceBuilder& builder() { return b_; }
  const Mesh& mesh() const { return mesh_; }

  // A trainable parameter of random values in [lo, hi).
  Proxy param(Shape shape, double lo = -1.0, double hi = 1.0, DistType dist = DistType::none,
              Tie tie = Tie::rank, DType dtype = DType::f32) {
    Proxy p = proxy("p" + std::to_string(trace_.args.size()), std::move(shape), dtype, dist);
    p.param_path = "p" + std::to_string(trace_.args.size());
    p.name = param_proxy_name(p.param_path);
    std::vector<std::vector<double>> per_group;
    for (int r = 0; r < mesh_.world(); ++r) {
      const size_t group = tie == Tie::all ? 0 : tie == Tie::replica ? r % mesh_.shards : r;
      while (per_group.size() <= group) per_group.push_back(random_data(p.type.shape, lo, hi));
      args_[r].push_back(reference::make_value(p.type, per_group[group]));
    }
    ties_.push_back(tie);
    return b_.add_arg(p);
  }

  // A non-differentiable input, the same on every rank.
  Proxy input(Shape shape, DType dtype, std::vector<double> data) {
    Proxy p = proxy("in" + std::to_string(trace_.args.size()), std::move(shape), dtype,
                    DistType::none);
    for (int r = 0; r < mesh_.world(); ++r) args_[r].push_back(reference::make_value(p.type, data));
    ties_.push_back(Tie::rank);
    return b_.add_arg(p);
  }

  // Random integers in [0, bound), e.g. indices.
  Proxy indices(Shape shape, int64_t bound, DType dtype = DType::i64) {
    std::vector<double> data;
    for (int64_t i = 0; i < numel(shape); ++i) data.push_back(static_cast<double>(integer(0, bound - 1)));
    return input(std::move(shape), dtype, std::move(data));
  }

  // Takes a whole captured trace: parameters get random values in [lo, hi),
  // other (integer) inputs random indices below `bound`.
  void adopt(const Trace& t, int64_t bound, double lo, double hi) {
    trace_ = t;
    for (const Proxy& a : t.args) {
      std::vector<double> data = random_data(a.type.shape, lo, hi);
      if (!a.is_param())
        for (double& v : data) v = static_cast<double>(integer(0, bound - 1));
      for (int r = 0; r < mesh_.world(); ++r) args_[r].push_back(reference::make_value(a.type, data));
      ties_.push_back(Tie::rank);
    }
  }

  Proxy emit(OpId op, std::vector<Operand> inputs, Attrs attrs = {}) {
    return b_.emit1(op, std::move(inputs), std::move(attrs));
  }

  // loss = sum over outs of sum(out * r_out), each r random and per rank.
  void finish(const std::vector<Proxy>& outs) {
    Proxy loss;
    for (const Proxy& out : outs) {
      Proxy r = proxy("r" + std::to_string(trace_.args.size()), out.type.shape, out.type.dtype,
                      DistType::none);
      for (int k = 0; k < mesh_.world(); ++k)
        args_[k].push_back(reference::make_value(r.type, random_data(r.type.shape, -1.0, 1.0)));
      ties_.push_back(Tie::rank);
      b_.add_arg(r);
      Proxy term = emit(OpId::Mul, {in(out), in(r)});
      term = emit(OpId::Sum, {in(term)}, {{"dims", range(term.type.shape.size())}});
      loss = loss.name.empty() ? term : emit(OpId::Add, {in(loss), in(term)});
    }
    trace_.returns = ReturnTree::leaf(loss.name);
  }
  void finish(const Proxy& out) { finish(std::vector<Proxy>{out}); }

  // Extra arguments of the joint trace (acc_*), per rank, before the cotangent.
  std::vector<std::vector<Value>> extra_args;
  // Added to the finite difference of (param k, rank r, element i).
  std::function<double(int, size_t, size_t)> offset;

  // Checks every gradient element on every rank against the finite difference.
  void check(const std::string& label, double scale = 1.0, const GradOptions& options = {}) {
    INFO(label);
    REQUIRE_NOTHROW(verify(trace_));
    Trace joint = grad(trace_, options);
    REQUIRE_NOTHROW(verify(joint));
    std::vector<std::vector<Value>> jargs = args_;
    for (int r = 0; r < mesh_.world(); ++r) {
      if (!extra_args.empty())
        jargs[r].insert(jargs[r].end(), extra_args[r].begin(), extra_args[r].end());
      jargs[r].push_back(reference::make_value(joint.args.back().type, {1.0}));
    }
    const auto outs = reference::run_spmd(joint, mesh_, jargs);
    const auto fwd = reference::run_spmd(trace_, mesh_, args_);
    size_t k = 0;
    for (size_t a = 0; a < trace_.args.size(); ++a) {
      if (!trace_.args[a].is_param()) continue;
      for (int r = 0; r < mesh_.world(); ++r) {
        CHECK(outs[r][0].data == fwd[r][0].data);  // the forward is unchanged
        check_one(a, k, r, outs[r].at(1 + k), scale);
      }
      ++k;
    }
  }

 private:
  static IntList range(size_t n) {
    IntList l;
    for (size_t i = 0; i < n; ++i) l.push_back(static_cast<int64_t>(i));
    return l;
  }

  static Proxy proxy(std::string name, Shape shape, DType dtype, DistType dist) {
    Proxy p;
    p.name = std::move(name);
    p.type.shape = std::move(shape);
    p.type.dtype = dtype;
    p.type.dist = dist;
    return p;
  }

  std::vector<double> random_data(const Shape& shape, double lo, double hi) {
    std::vector<double> d;
    for (int64_t i = 0; i < numel(shape); ++i) d.push_back(uniform(lo, hi));
    return d;
  }

  std::vector<int> tied(size_t a, int rank) const {
    std::vector<int> ranks;
    for (int r = 0; r < mesh_.world(); ++r) {
      const bool same = ties_[a] == Tie::all ||
                        (ties_[a] == Tie::replica && r % mesh_.shards == rank % mesh_.shards) ||
                        r == rank;
      if (same) ranks.push_back(r);
    }
    return ranks;
  }

  double objective(const std::vector<std::vector<Value>>& args, double scale) const {
    double total = 0;
    for (const auto& rank_out : reference::run_spmd(trace_, mesh_, args)) total += rank_out[0].data[0];
    return scale * total;
  }

  void check_one(size_t a, size_t k, int r, const Value& g, double scale) const {
    constexpr double kH = 1e-6, kRtol = 1e-6;
    const Proxy& p = trace_.args[a];
    REQUIRE(g.data.size() == static_cast<size_t>(numel(p.type.shape)));
    double worst = 0;
    std::string where;
    for (size_t i = 0; i < g.data.size(); ++i) {
      auto args = args_;
      for (int q : tied(a, r)) args[q][a].data[i] += kH;
      const double up = objective(args, scale);
      for (int q : tied(a, r)) args[q][a].data[i] -= 2 * kH;
      double fd = (up - objective(args, scale)) / (2 * kH);
      if (offset) fd += offset(r, k, i);
      const double err = std::abs(g.data[i] - fd) / std::max(1.0, std::abs(fd));
      if (err > worst) {
        worst = err;
        where = "element " + std::to_string(i) + ": grad " + std::to_string(g.data[i]) +
                ", finite difference " + std::to_string(fd);
      }
    }
    INFO(p.name << " on rank " << r << ", worst " << where);
    CHECK(worst <= kRtol);
  }

  std::mt19937_64 rng_;
  Mesh mesh_;
  Trace trace_;
  TraceBuilder b_;
  std::vector<std::vector<Value>> args_;  // per rank, in trace.args order
  std::vector<Tie> ties_;                 // per argument
};

}  // namespace fsdpc::testing
