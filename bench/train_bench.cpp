// One rank's view of a training step, as JSON lines (rank 0 prints):
//   mpirun -np N build/bench/train_bench
// For gpt2-tiny, a GPT-2 sized to take about a second per step here, and a
// Llama of the same width (grouped-query attention, SiLU-gated MLP, RoPE):
// step time, tokens/s, achieved GFLOP/s against the oneDNN sgemm peak
// measured by this program (CPU MFU), per-rank peak memory against the ZeRO
// formula (16 bytes per parameter element / N for f32 AdamW: weight, grad,
// two moments), bytes sent against the formula, and the share of
// communication time hidden behind compute (1 - blocked-in-wait time /
// the same collectives' time run alone). Each model runs unfused and fused
// (--fusion none, auto): "fusion", the regions compiled and their JIT time,
// step_cpu_ms (the process's CPU time per step: steadier than wall time on a
// shared machine), and non_matmul_ms, that CPU time less the matmul FLOPs at
// the sgemm peak (an estimate: oneDNN runs the step's smaller matmuls below
// peak, so it overstates the rest by the same amount in both columns). A
// benchmark: it asserts nothing.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/fusion/fusion_kernel.h"
#include "frontend/models/gpt2/gpt2.h"
#include "frontend/models/llama/llama.h"
#include "frontend/jit.h"
#include "passes/stats.h"
#include "runtime/data.h"

using namespace fsdpc;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU time of the process: on a shared machine, where other work takes
// cores away, a steadier measure of a one-thread step than wall time.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// FLOPs of the matmuls (2 per multiply-add) of a trace, per rank: matmul and
// linear from their contraction length, attention's q·kᵀ and p·v from its
// output [.., Tq, Dv] and Tk = Tq (self-attention); a region's statements
// count too (a matmul with its transposes folded in is a region).
double matmul_flops(const Trace& t) {
  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : t.args) types[a.name] = &a.type;
  double f = 0;
  auto count = [&](auto& self, const std::vector<BoundSymbol>& bsyms) -> void {
    for (const BoundSymbol& b : bsyms) {
      if (b.op == OpId::Fusion) self(self, b.subsymbols.get());
      for (const Proxy& o : b.outputs) types[o.name] = &o.type;
      const Shape& out = b.outputs.empty() ? Shape{} : b.outputs[0].type.shape;
      if (b.op == OpId::Matmul || b.op == OpId::Linear)
        f += 2.0 * static_cast<double>(numel(out)) * static_cast<double>(types.at(b.inputs[0].name)->shape.back());
      else if (b.op == OpId::ScaledDotProductAttention)
        f += 4.0 * static_cast<double>(numel(out)) * static_cast<double>(out[out.size() - 2]);
      else if (b.op == OpId::ScaledDotProductAttentionGrad)
        // five products the size of the forward's two: the scores again,
        // pᵀ·g, g·vᵀ, ds·k and dsᵀ·q (cpu_attention.cpp)
        f += 10.0 * static_cast<double>(numel(out)) * static_cast<double>(types.at(b.inputs[1].name)->shape.end()[-2]);
      else if (b.op == OpId::LinearCrossEntropy || b.op == OpId::LinearCrossEntropyGrad ||
               b.op == OpId::LinearCrossEntropyWithGrad) {
        // h [..., C] times w [V, C]ᵀ: the logits, once in the forward; the
        // gradient recomputes them and forms dh and dw, three products
        // executed, as does with_grad from its one product of logits
        // (cpu_linear_cross_entropy.cpp).
        const Shape& h = types.at(b.inputs[0].name)->shape;
        const Shape& w = types.at(b.inputs[1].name)->shape;
        const double product = 2.0 * static_cast<double>(numel(h)) * static_cast<double>(w[0]);
        f += b.op == OpId::LinearCrossEntropy ? product : 3.0 * product;
      }
    }
  };
  count(count, t.bsyms);
  return f;
}

// GFLOP/s of the CPU executor on a 1024^3 product, f32 or bf16 (f32
// accumulation): the peak a step's matmul rate is read against.
double gemm_peak(DType dtype) {
  TensorType a, c;
  a.shape = c.shape = {1024, 1024};
  a.dtype = c.dtype = dtype;
  // 4-byte elements hold 2-byte ones too; 0 in bf16 and f32 alike.
  std::vector<float> x(1024 * 1024, 0.0f), y(1024 * 1024, 0.0f), z(1024 * 1024);
  BoundSymbol mm;
  mm.op = OpId::Matmul;
  mm.inputs = {Operand::of("a"), Operand::of("b")};
  mm.outputs = {Proxy{"c", c, "", true}};
  KernelContext ctx;
  KernelFn k = cpu_executor().kernel(OpId::Matmul);
  std::vector<TensorView> in = {{x.data(), &a}, {y.data(), &a}}, out = {{z.data(), &c}};
  k(ctx, mm, in, out);  // primitive creation
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    k(ctx, mm, in, out);
    best = std::max(best, 2.0 * 1024 * 1024 * 1024 / seconds_since(t0) / 1e9);
  }
  return best;
}

// The step's collectives run alone, blocking: the communication time a
// step would spend if nothing overlapped.
double collectives_alone(const std::vector<const Trace*>& traces, const ProcessGroups& groups) {
  double total = 0;
  for (const Trace* t : traces) {
    std::unordered_map<std::string, const TensorType*> types;
    for (const Proxy& a : t->args) types[a.name] = &a.type;
    for (const BoundSymbol& b : t->bsyms) {
      for (const Proxy& o : b.outputs) types[o.name] = &o.type;
      if (b.op != OpId::AllGather && b.op != OpId::ReduceScatter && b.op != OpId::AllReduce) continue;
      MPI_Comm comm = groups.comm(b.attrs.get_str("group"));
      const int in_n = static_cast<int>(numel(types.at(b.inputs[0].name)->shape));
      const int out_n = static_cast<int>(numel(b.outputs[0].type.shape));
      std::vector<float> in(static_cast<size_t>(in_n), 1.0f), out(static_cast<size_t>(out_n));
      FSDPC_MPI_CHECK(MPI_Barrier(comm));
      auto t0 = Clock::now();
      if (b.op == OpId::AllGather)
        FSDPC_MPI_CHECK(MPI_Allgather(in.data(), in_n, MPI_FLOAT, out.data(), in_n, MPI_FLOAT, comm));
      else if (b.op == OpId::ReduceScatter)
        FSDPC_MPI_CHECK(MPI_Reduce_scatter_block(in.data(), out.data(), out_n, MPI_FLOAT, MPI_SUM, comm));
      else
        FSDPC_MPI_CHECK(MPI_Allreduce(in.data(), out.data(), in_n, MPI_FLOAT, MPI_SUM, comm));
      total += seconds_since(t0);
    }
  }
  return total;
}

void run(const char* label, std::unique_ptr<LanguageModel> owned, int64_t batch, int64_t seq, double peak,
         FusionMode fusion, DType precision) {
  const int world = mpi_world_size(), rank = mpi_world_rank();
  LanguageModel& model = *owned;
  JitOptions o;
  o.capture.batch = batch;
  o.capture.seq = seq;
  o.pipeline.mesh = flat_mesh(world);
  o.pipeline.bucketing = true;
  o.pipeline.verify = false;
  o.engine.optimizer.lr = 1e-3;
  o.engine.fusion = fusion;
  o.pipeline.precision = precision;
  const fusion::JitCacheStats jit0 = fusion::jit_cache_stats();
  auto compiled = jit(model, o);
  Engine& e = compiled->engine();
  SyntheticTokens data(0, model.vocab_size());
  std::vector<int64_t> idx(static_cast<size_t>(batch * seq)), tgt(idx.size());
  auto step = [&](int s) {
    data.batch(s, rank, world, batch, seq, idx.data(), tgt.data());
    return compiled->train_step({HostTensor::ints({batch, seq}, idx), HostTensor::ints({batch, seq}, tgt)});
  };
  step(0);  // primitives, optimizer state, compiled regions
  const fusion::JitCacheStats jit1 = fusion::jit_cache_stats();
  e.reset_peak_memory();
  e.interpreter().reset_timing();
  const int steps = 5;
  std::vector<double> times, cpu_times;
  for (int s = 1; s <= steps; ++s) {
    const double c0 = process_cpu_seconds();
    times.push_back(step(s).seconds);
    cpu_times.push_back(process_cpu_seconds() - c0);
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu_times.begin(), cpu_times.end());
  const double t = times[times.size() / 2];
  const double cpu_t = cpu_times[cpu_times.size() / 2];
  const Interpreter::Timing& tm = e.interpreter().timing();

  const double flops = matmul_flops(e.forward_trace()) + matmul_flops(e.backward_trace());
  double psi = 0;
  for (const NamedParam& p : model.named_parameters()) psi += static_cast<double>(numel(p.spec->shape));
  TraceStats sf = trace_stats(e.forward_trace()), sb = trace_stats(e.backward_trace());
  ProcessGroups groups(flat_mesh(world));
  const double alone = collectives_alone({&e.forward_trace(), &e.backward_trace()}, groups);
  const double waited = tm.wait_s / steps;
  if (rank != 0) return;
  std::printf(
      "{\"model\": \"%s\", \"world\": %d, \"strategy\": \"zero3\", \"tokens_per_step\": %lld, \"step_ms\": %.1f, "
      "\"tokens_per_s\": %.0f, \"gflops_per_rank\": %.1f, \"sgemm_peak_gflops\": %.1f, \"mfu\": %.3f, "
      "\"compute_ms\": %.1f, \"wait_ms\": %.2f, \"collectives_alone_ms\": %.2f, \"hidden_fraction\": %.2f, "
      "\"peak_bytes\": %lld, \"zero_state_bytes\": %.0f, \"bytes_sent\": %.0f, \"zero3_formula_bytes\": %.0f, "
      "\"precision\": \"%s\", \"fusion\": \"%s\", \"step_cpu_ms\": %.1f, \"non_matmul_ms\": %.1f, \"regions_compiled\": %lld, \"jit_compile_ms\": %.1f, "
      "\"backend\": \"%s\"}\n",
      label, world, static_cast<long long>(batch * seq * world), t * 1e3, batch * seq * world / t,
      flops / t / 1e9, peak, flops / t / 1e9 / peak, tm.compute_s / steps * 1e3, waited * 1e3, alone * 1e3,
      alone > 0 ? std::clamp(1.0 - waited / alone, 0.0, 1.0) : 1.0, static_cast<long long>(e.memory().total_peak),
      16.0 * psi / world, sf.collective_bytes + sb.collective_bytes, 3.0 * 4 * psi * (world - 1) / world,
      std::string(dtype_name(precision)).c_str(), std::string(fusion_mode_name(fusion)).c_str(), cpu_t * 1e3, (cpu_t - flops / (peak * 1e9)) * 1e3,
      static_cast<long long>(jit1.compiled - jit0.compiled), (jit1.compile_s - jit0.compile_s) * 1e3,
      cpu_backend_info().c_str());
  std::fflush(stdout);
}

// 4 layers x 512 wide, 8 heads sharing 2 k/v heads, MLP 1408 (Llama's
// 8/3 x width rounded), vocab 8192, context 256: the 4x512 GPT-2's size.
LlamaConfig llama_4x512() {
  LlamaConfig c;
  c.vocab_size = 8192;
  c.hidden_size = 512;
  c.intermediate_size = 1408;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  return c;
}

}  // namespace

// `train_bench [gpt2-tiny|gpt2-4x512|llama-4x512] [f32|bf16]`: one model
// only, all by default; f32 (unfused and fused) by default, or bf16 mixed
// precision (fused), whose "sgemm_peak_gflops" is then the bf16 gemm's.
int main(int argc, char** argv) {
  mpi_init();
  const char* only = argc > 1 && std::strcmp(argv[1], "all") != 0 ? argv[1] : nullptr;
  const DType precision = argc > 2 && std::strcmp(argv[2], "bf16") == 0 ? DType::bf16 : DType::f32;
  const double peak = gemm_peak(precision);
  const std::vector<FusionMode> fusions = precision == DType::f32
                                              ? std::vector<FusionMode>{FusionMode::none, FusionMode::automatic}
                                              : std::vector<FusionMode>{FusionMode::automatic};
  auto gpt2 = [](const char* label, const GPT2Config& c) { return std::make_unique<GPT2>(label, c); };
  if (!only || std::strcmp(only, "gpt2-tiny") == 0)
    for (FusionMode fusion : fusions)
      run("gpt2-tiny", gpt2("gpt2-tiny", GPT2Config{2, 2, 64, 256, 64, 1e-5}), 8, 64, peak, fusion, precision);
  // About a second per step on one core of the development machine.
  if (!only || std::strcmp(only, "gpt2-4x512") == 0)
    for (FusionMode fusion : fusions)
      run("gpt2-4x512", gpt2("gpt2-4x512", GPT2Config{4, 8, 512, 8192, 256, 1e-5}), 4, 256, peak, fusion, precision);
  if (!only || std::strcmp(only, "llama-4x512") == 0)
    for (FusionMode fusion : fusions)
      run("llama-4x512", std::make_unique<Llama>("llama-4x512", llama_4x512()), 4, 256, peak, fusion, precision);
  return 0;
}
