// The memory plan: what one rank's allocator holds at every statement of a
// training step, predicted from the traces before anything runs. It replays
// the engine's allocations and frees (runtime/engine.cpp, interpreter.cpp,
// optimizer.cpp) on a model of the allocator (runtime/allocator.h) with the
// same bytes, categories, shared buffers and cache of rounded blocks, so its
// peaks are the ones Allocator::stats() measures, not an estimate. Passes
// that change what is live (rematerialisation) change only the traces the
// plan reads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/engine.h"

namespace fsdpc {

using MemBytes = std::array<int64_t, kNumMemCategories>;

// One point of the timeline: after a statement, or after an action of the
// engine around the traces (inputs copied in, gradients kept, state made).
struct MemoryPoint {
  int64_t statement = 0;  // 1-based in the phase's trace; 0: an engine action
  std::string what;       // the statement on one line, or the action
  MemBytes live{};
  int64_t total = 0;
  int64_t reserved = 0;  // rounded blocks the caching allocator holds (live + cached)
};

// A stretch of the step: "forward 1/2", "backward 1/2", "optimizer", ...
struct MemoryPhase {
  std::string name;
  std::vector<MemoryPoint> points;
  size_t peak_point() const;  // the first point of the phase's highest total
};

// One step, from the reset of the peaks before it to its return.
struct StepMemory {
  std::vector<MemoryPhase> phases;
  MemBytes start{};                // live when the step begins
  MemBytes peak{};                 // each category's own peak, as MemStats::peak
  int64_t total_peak = 0;          // the peak of the sum, as MemStats::total_peak
  size_t peak_phase = 0, peak_point = 0;  // where total_peak is first reached
  int64_t reserved = 0;            // held by the caching allocator when the step returns
  const MemoryPoint& peak_at() const { return phases.at(peak_phase).points.at(peak_point); }
  std::string peak_where() const;  // "backward 1/1, statement 57: t80 = cpu_linear(t3, t9)"
};

struct MemoryPlan {
  Target target = Target::cpu;
  size_t alignment = 0;  // the backend's block rounding (reserved bytes)
  int grad_accum = 1;
  bool no_sync = false;
  StepMemory first;       // a fresh run's first step: optimizer state made at its update
  StepMemory steady;      // later steps (and every step after --resume): the state is live
  // DiLoCo (EngineTraces::outer): a round's last step, the outer step
  // included; empty without DiLoCo. With H = 1 every step is one: steady
  // and first include the outer step too.
  std::optional<StepMemory> outer;
  // Streaming DiLoCo (fragments or a delay): each kind of step (which
  // fragments' exchanges are in flight, land or are issued), and
  // streaming[streaming_steps[k - 1]] is the step that brings a fresh run's
  // optimizer count to k; steps past the last repeat its final
  // `streaming_every` (step_at). `outer` is the highest kind.
  std::vector<StepMemory> streaming;
  std::vector<size_t> streaming_steps;
  int streaming_every = 0;
  // The plan of the step that brings the count to k (k >= 1) under
  // streaming; otherwise null.
  const StepMemory* step_at(int64_t k) const;
  StepMemory evaluation;  // Engine::forward after a step (fsdpc train's validation loss)
  // Reserved bytes after each step of a fresh run, until the cache stops growing.
  std::vector<int64_t> reserved_after_step;
  // The step that holds the most: every step of the run stays at or below it.
  const StepMemory& worst() const {
    const StepMemory& most = steady.total_peak >= first.total_peak ? steady : first;
    return outer && outer->total_peak > most.total_peak ? *outer : most;
  }
};

// The target's block rounding, as its DeviceBackend::alignment() says
// (a CUDA backend cannot be opened without a GPU, so its value is named here).
size_t backend_alignment(Target target);

// Plans the step the Engine built from `traces` and `options` runs:
// options.target and options.fusion lower the
// traces as the engine lowers them; grad_accum, no_sync and the optimizer
// decide the engine's actions. Every rank runs the same traces on shards of
// the same shape, so the plan holds for each rank; with pipeline stages
// (options.mesh.pp > 1), for each rank of `pipeline_stage`, whose traces
// `traces` holds, run in options.pp_schedule's order.
MemoryPlan plan_memory(const EngineTraces& traces, const EngineOptions& options, int pipeline_stage = 0);

// The peaks of the same step from traces already lowered as plan_memory
// lowers them (execution_trace for options.target and options.fusion),
// for a caller that lowers them anyway (fsdpc advise): `first` and `steady`
// hold the same peaks and peak_where() as plan_memory's, but each phase keeps
// only its first highest point, `steady` is the second step (its reserved
// bytes need not have settled) and there is no evaluation. With pipeline
// stages, of `pipeline_stage`'s traces, as plan_memory.
MemoryPlan plan_memory_peaks(const EngineTraces& lowered_traces, const EngineOptions& options, int pipeline_stage = 0);

// Peaks per category of a step followed (or not) by an evaluation forward,
// as fsdpc train measures them between two resets.
MemBytes combined_peak(const StepMemory& step, const StepMemory* evaluation, int64_t& total);

// {"parameters": ..., "communication": ..., "total": ...}: the shape of
// fsdpc train's "peak_bytes".
std::string peak_bytes_json(const MemBytes& peak, int64_t total);

// "" when `cap_bytes` holds the plan's peak; otherwise why the run is
// refused, with the plan's numbers.
std::string mem_cap_refusal(const MemoryPlan& plan, int64_t cap_bytes);

std::string memory_plan_text(const MemoryPlan& plan);
std::string memory_plan_json(const MemoryPlan& plan);

}  // namespace fsdpc
