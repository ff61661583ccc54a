// The CPU executor's threads: how many a rank gets (FSDPC_CPU_THREADS, else
// its cores shared among the ranks on its host), and that the loops split
// over them give the same bits at every thread count and still agree with
// the float64 reference, on tensors large enough to be split.
#include <sched.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include "executors/cpu/cpu_executor.h"
#include "executors/device_backend.h"
#include "executors/reference/reference.h"
#include "ir/builder.h"
#include "ir/error.h"

using namespace fsdpc;
using Catch::Contains;

namespace {

// Sets FSDPC_CPU_THREADS (nullptr: unsets it) and makes the executor
// resolve its count again; restores the count of one rank per host on exit.
struct ThreadsEnv {
  explicit ThreadsEnv(const char* value, int ranks = 1) {
    if (value) setenv("FSDPC_CPU_THREADS", value, 1);
    else unsetenv("FSDPC_CPU_THREADS");
    set_cpu_ranks_per_host(ranks);
  }
  ~ThreadsEnv() {
    unsetenv("FSDPC_CPU_THREADS");
    set_cpu_ranks_per_host(1);
  }
};

int affinity_cores() {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  return CPU_COUNT(&set);
}

TensorType tt(Shape shape, DType dtype = DType::f32) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

// One op on f32 (or i64 index) inputs, run by the CPU kernel; outputs as
// floats, bit for bit.
struct OneOp {
  Trace trace;
  std::vector<reference::Value> args;

  std::vector<std::vector<float>> run_cpu() const {
    const BoundSymbol& b = trace.bsyms.back();
    REQUIRE(cpu_executor().claims(b));
    std::vector<std::vector<uint64_t>> in_bufs, out_bufs;
    std::vector<TensorView> in, out;
    for (const reference::Value& v : args) {
      std::vector<uint64_t> words(std::max<size_t>(1, v.data.size()));
      for (size_t i = 0; i < v.data.size(); ++i) {
        if (v.type.dtype == DType::i64) reinterpret_cast<int64_t*>(words.data())[i] = static_cast<int64_t>(v.data[i]);
        else reinterpret_cast<float*>(words.data())[i] = static_cast<float>(v.data[i]);
      }
      in_bufs.push_back(std::move(words));
    }
    for (size_t i = 0; i < args.size(); ++i) in.push_back(TensorView{in_bufs[i].data(), &trace.args[i].type});
    for (const Proxy& p : b.outputs) out_bufs.emplace_back(std::max<int64_t>(1, numel(p.type.shape)));
    for (size_t i = 0; i < b.outputs.size(); ++i) out.push_back(TensorView{out_bufs[i].data(), &b.outputs[i].type});
    KernelContext ctx;
    cpu_executor().kernel(b.op)(ctx, b, in, out);
    std::vector<std::vector<float>> result;
    for (size_t i = 0; i < b.outputs.size(); ++i) {
      const float* f = reinterpret_cast<const float*>(out_bufs[i].data());
      result.emplace_back(f, f + numel(b.outputs[i].type.shape));
    }
    return result;
  }
};

OneOp one_op(OpId op, const std::vector<reference::Value>& args, Attrs attrs = {}) {
  OneOp o;
  TraceBuilder b(o.trace, TraceBuilder::Options{false});
  std::vector<Operand> operands;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    b.add_arg(Proxy{name, args[i].type, "", true});
    operands.push_back(Operand::of(name));
  }
  std::vector<ReturnTree> leaves;
  for (const Proxy& p : b.emit(op, operands, std::move(attrs))) leaves.push_back(ReturnTree::leaf(p.name));
  o.trace.returns = ReturnTree::tuple(std::move(leaves));
  o.args = args;
  return o;
}

reference::Value random_tensor(std::mt19937_64& gen, Shape s, double offset = 0.0) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> d(static_cast<size_t>(numel(s)));
  for (double& x : d) x = static_cast<float>(offset + normal(gen));
  return reference::make_value(tt(std::move(s)), std::move(d));
}

// The op at 1, 2 and 3 threads: the same bits; and against the reference.
void check_thread_independent(const OneOp& op, double rtol) {
  std::vector<std::vector<float>> one;
  {
    ThreadsEnv env("1");
    one = op.run_cpu();
  }
  for (const char* threads : {"2", "3"}) {
    ThreadsEnv env(threads);
    INFO(threads << " threads");
    CHECK(op.run_cpu() == one);
  }
  const std::vector<reference::Value> want = reference::run(op.trace, op.args);
  REQUIRE(want.size() == one.size());
  for (size_t k = 0; k < want.size(); ++k) {
    double scale = 1.0, worst = 0.0;
    for (double w : want[k].data) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < one[k].size(); ++i)
      worst = std::max(worst, std::abs(one[k][i] - want[k].data[i]) / (std::abs(want[k].data[i]) + 0.1 * scale));
    CHECK(worst <= rtol);
  }
}

}  // namespace

TEST_CASE("cpu threads: FSDPC_CPU_THREADS, else the rank's share of its cores", "[cpu][threads]") {
  {
    ThreadsEnv env("3");
    CHECK(cpu_threads() == 3);
    CHECK_THAT(cpu_backend_info(), Contains("3 threads"));
  }
  {
    ThreadsEnv env(nullptr);
    CHECK(cpu_threads() == affinity_cores());
  }
  {
    ThreadsEnv env(nullptr, affinity_cores() * 4);  // oversubscribed ranks
    CHECK(cpu_threads() == 1);
  }
  {
    ThreadsEnv env(nullptr, 2);
    CHECK(cpu_threads() == std::max(1, affinity_cores() / 2));
  }
  for (const char* bad : {"0", "-2", "two", "4x", "", "99999"}) {
    ThreadsEnv env(bad);
    INFO("FSDPC_CPU_THREADS='" << bad << "'");
    CHECK_THROWS_WITH(cpu_threads(), Contains("FSDPC_CPU_THREADS='" + std::string(bad) + "'") &&
                                         Contains("expected a whole number of threads"));
  }
}

TEST_CASE("cpu threads: split loops give the same bits at any thread count", "[cpu][threads]") {
  std::mt19937_64 gen(7);
  // Elementwise, both operands tensors and one a scalar literal.
  check_thread_independent(one_op(OpId::Add, {random_tensor(gen, {300, 257}), random_tensor(gen, {300, 257})}), 1e-6);
  check_thread_independent(one_op(OpId::Neg, {random_tensor(gen, {70001})}), 0);
  // Reductions: rows (kept outer dim), columns (kept inner dim), and a mix.
  for (const IntList& dims : {IntList{1}, IntList{0}, IntList{0, 2}, IntList{1, 2}})
    for (OpId op : {OpId::Sum, OpId::Amax})
      check_thread_independent(one_op(op, {random_tensor(gen, {40, 37, 53})}, Attrs{{"dims", dims}}), 1e-5);
  // Copies: a transpose (tiled) and a broadcast along the inner dim.
  check_thread_independent(one_op(OpId::Permute, {random_tensor(gen, {4, 190, 130})}, Attrs{{"dims", IntList{0, 2, 1}}}), 0);
  check_thread_independent(one_op(OpId::Permute, {random_tensor(gen, {190, 4, 130})}, Attrs{{"dims", IntList{1, 0, 2}}}), 0);
  // layer_norm rows, softmax along a non-last dim, cross_entropy rows.
  check_thread_independent(one_op(OpId::LayerNorm, {random_tensor(gen, {300, 130}, 20.0), random_tensor(gen, {130}),
                                                    random_tensor(gen, {130})},
                                  Attrs{{"eps", 1e-5}}),
                           1e-5);
  check_thread_independent(one_op(OpId::Softmax, {random_tensor(gen, {30, 40, 50})}, Attrs{{"dim", int64_t{1}}}), 1e-5);
  check_thread_independent(one_op(OpId::RmsNorm, {random_tensor(gen, {300, 130}, 20.0), random_tensor(gen, {130})},
                                  Attrs{{"eps", 1e-6}}),
                           1e-5);
  std::vector<double> targets(300);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<double>((i * 37) % 257);
  check_thread_independent(
      one_op(OpId::CrossEntropy, {random_tensor(gen, {300, 257}), reference::make_value(tt({300}, DType::i64), targets)}),
      1e-5);
}

TEST_CASE("cpu threads: the optimizer and clipping loops give the same bits at any thread count", "[cpu][threads]") {
  const int64_t n = 100003;
  std::vector<float> g(n), g2(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.001f * static_cast<float>(i)), g2[i] = std::cos(0.3f * i);
  auto run = [&] {
    std::vector<float> p(n, 0.5f), m(n, 0.0f), v(n, 0.0f), acc(g);
    DeviceBackend& cpu = cpu_backend();
    cpu.add_into(acc.data(), g2.data(), n);
    cpu.scale(acc.data(), n, 0.5f);
    cpu.adamw_update(p.data(), acc.data(), m.data(), v.data(), n, AdamwStep{1e-3, 0.9, 0.999, 1e-8, 0.01, 1e-2, 0.03});
    const double norm = cpu.sum_squares({{acc.data(), n / 2}, {acc.data() + n / 2, n - n / 2}});
    return std::make_pair(p, norm);
  };
  std::pair<std::vector<float>, double> one;
  {
    ThreadsEnv env("1");
    one = run();
  }
  ThreadsEnv env("3");
  const auto three = run();
  CHECK(three.first == one.first);
  CHECK(three.second == one.second);
}
