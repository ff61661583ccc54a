// The planner (fsdpc advise as a library): every strategy with the knobs that
// change its schedule, compiled for N ranks, its memory planned and its step
// simulated on a hardware profile, and ranked; with measurements of this host
// when the profile is `local`, and (--measure) real steps of each candidate.
//
//   fsdpc::PlanRequest r;
//   r.world = 8;
//   r.hardware = "h100-sxm-nvlink-ib";
//   fsdpc::Plan plan = fsdpc::plan_training(r, [&](int64_t batch) { ... capture ... });
//   plan.candidates.front().flags();  // "--strategy hybrid --mesh 2,4 ..."
//
// plan_training is the entry point; the parts below it are what it runs,
// for tests and for the probes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ir/mesh.h"
#include "ir/target.h"
#include "ir/trace.h"
#include "passes/pipeline.h"
#include "passes/remat.h"
#include "passes/strategy.h"
#include "runtime/planner/hardware_profile.h"
#include "runtime/planner/step_simulator.h"

namespace fsdpc {

// What running a candidate here (--measure) found: `mpirun -np N fsdpc
// train` for a few steps. `error` is set when it was not run or failed.
struct Measurement {
  bool ran = false;       // launched (it may still have failed)
  // The median over each run's steps after its warm-up (1 or 2 steps); for
  // DiLoCo the median step without an exchange plus outer_seconds / H.
  double step_seconds = 0;
  int64_t peak_bytes = 0;   // peak_bytes.total, the largest of any step
  int steps = 0;            // records read, over every run (round)
  std::string error;        // "exit 1: <last stderr line>", "not run: ..."
  // DiLoCo: the runs met every round_steps (measure_round_steps); a round's
  // time beyond as many plain steps, over `rounds` whole rounds (0: the runs
  // held none, and step_seconds is the plain step alone).
  int round_steps = 0, rounds = 0;
  double outer_seconds = 0;
  bool ok() const { return ran && error.empty(); }
};

// One strategy with its knobs, and what compiling it predicts.
struct Candidate {
  Strategy strategy = Strategy::zero3;
  Mesh mesh;             // mesh.tp > 1: tensor parallelism on the innermost dimension
  bool unit_buckets = false;  // --bucketing unit
  int prefetch = 1;
  RematMode remat = RematMode::none;  // --remat: activation checkpointing trades compute for memory
  bool sequence_parallel = false;  // --sequence-parallel (mesh.tp > 1 only)
  // Pipeline stages (--pp; mesh is then one stage's) and the micro-batches
  // of a step (--grad-accum), run in 1F1B's order.
  int pp = 1;
  int micro_batches = 1;
  bool keep_gathered = false;  // --keep-gathered (pp > 1 only): a stage gathers once a step
  // DiLoCo (--outer-steps H, a hybrid mesh with R > 1): the replicas train
  // apart and meet every H steps; it changes the optimisation, not only the
  // schedule, so advise offers it only when asked (PlanRequest::diloco).
  DilocoOptions diloco;
  bool int8_gathers = false;  // --gather-dtype int8: the parameters gathered as int8 codes (advise offers it when asked)
  // Predictions, per rank.
  int64_t peak_bytes = 0;  // the memory plan's worst step
  std::string peak_where;
  StepSimulation sim;
  double optimizer_seconds = 0;
  // DiLoCo: the outer step's simulated seconds; sim.seconds holds the inner
  // step plus this spread over the H steps of a round.
  double outer_seconds = 0;
  // With --outer-steps or --gather-dtype int8: the inter-node bandwidth (bytes/s per rank, one
  // direction) from which the candidate keeps 90% of the speed it would have
  // on an unlimited link; 0 when not asked, or when no stream crosses nodes.
  double link_for_90 = 0;
  double tokens_per_second = 0;  // the whole world's
  double mfu = 0;                // matmul FLOPs / step time / peak rate
  bool fits = true;
  Measurement measured;  // --measure only

  std::string flags() const;  // "--strategy hybrid --mesh 2,2 --bucketing unit --prefetch 2 --remat block --tp 2"
  std::string name() const;   // "hybrid 2x2 unit p2 remat:block tp2", "zero3 unit p1 pp2 m8"
};

// A matmul statement to time for --hardware local, with its inputs' types.
struct MatmulSample {
  BoundSymbol statement;
  std::vector<TensorType> inputs;
};

// The matmul statements of the candidates' lowered traces that the profile
// has no measurement for (matmul_seconds), by signature; candidates are
// evaluated on several threads, so collecting is locked.
class MatmulShapes {
 public:
  void collect(const Trace& t, const HardwareProfile& hw);
  std::map<std::string, MatmulSample> take();

 private:
  std::mutex mutex_;
  std::map<std::string, MatmulSample> missing_;
};

// A sample's CPU executor kernel on buffers of its types (floats set to a
// small value, so no denormal or NaN slows it), ready to call repeatedly.
class SampleCall {
 public:
  explicit SampleCall(const MatmulSample& s);
  ~SampleCall();
  SampleCall(const SampleCall&) = delete;
  SampleCall& operator=(const SampleCall&) = delete;
  // Calls the kernel once; returns the seconds it took.
  double operator()();

 private:
  struct Buffers;
  const MatmulSample& sample_;
  std::unique_ptr<Buffers> buffers_;
};

// Best seconds of one call of `f`, after a warm-up call: at least
// `min_reps` timed calls, more while they fill less than `budget` seconds,
// at most `max_reps` (runtime/planner/hardware_lookup.cpp).
double best_seconds(const std::function<void()>& f, double budget, int min_reps = 3, int max_reps = 50);
// An n x n x n matmul statement, of f32 (or bf16) operands.
MatmulSample square_matmul(int64_t n, DType dtype = DType::f32);
// Best seconds of one call of `s`'s CPU executor kernel on buffers of its
// types (best_seconds).
double kernel_call_seconds(const MatmulSample& s, double budget, int min_reps);
// Times each sample through the CPU executor (runtime/planner/matmul_shapes.cpp)
// into p.matmul_seconds, for `world` ranks on this host, and rewrites the
// profile's cache file (p.file) with them. For world > 1 the samples are
// timed on `world` ranks at once (`mpirun fsdpc matmul-probe`), as a step
// runs them; without mpirun, or if that fails, alone in this process.
void measure_matmul_shapes(HardwareProfile& p, const std::map<std::string, MatmulSample>& samples, int world);

struct AdviseSetup {
  Trace captured;  // placed on the executor's device
  int world = 1;
  std::optional<Mesh> mesh;  // hybrids only on this mesh; none: every R x S = world, R, S > 1
  Target target = Target::cpu;
  DType precision = DType::f32;
  HardwareProfile hw;
  int64_t cap = 0;          // bytes per rank; 0: no cap
  int64_t tokens_per_rank = 0;  // per step
  int threads = 1;          // candidates compiled at once
  std::vector<std::string> strategies;  // --strategies: only these; empty: all
  // --tp: the tensor-parallel sizes to try; every strategy is compiled at
  // each, on the world / T data-parallel ranks (a 2-D or 3-D mesh).
  std::vector<int> tps{1};
  // --sequence-parallel: every tp > 1 candidate also with sequence parallelism.
  bool sequence_parallel = false;
  TensorParallelPlan tensor_parallel_plan;  // the model family's, for the tp > 1 candidates
  LossChunk loss_chunk;  // --loss-chunk, every candidate's
  // --outer-steps H (with --outer-lr, --outer-momentum, --outer-dtype): every
  // hybrid candidate on R > 1 replicas also as DiLoCo (unit buckets, prefetch 1).
  DilocoOptions diloco;
  // --gather-dtype int8: every sharded candidate also with int8 gathers
  // (unit buckets, prefetch 1).
  bool int8_gathers = false;
  // The model captured for each tp > 1 in tps at T times the batch: a tp
  // group's T ranks train on one data-parallel rank's batch, so every
  // candidate trains the same global batch (and tokens per step).
  std::map<int, Trace> tp_captured;
  const Trace& captured_at(int tp) const { return tp > 1 ? tp_captured.at(tp) : captured; }
  // --pp: the pipeline sizes to try; each strategy (zero3, zero2, no_shard)
  // is compiled at each P above 1 on world / (P * T) data-parallel ranks a
  // stage, at the same global batch, split into micro-batches.
  std::vector<int> pps{1};
  int micro_batches = 0;  // --micro-batches; 0: the most up to 4P that divide a stage rank's rows
  // The model captured at one micro-batch of each (tp, pp > 1), and that
  // micro-batch count (prepare_pipelines).
  std::map<std::pair<int, int>, Trace> pp_captured;
  std::map<std::pair<int, int>, int> pp_micro_batches;
  // --hardware local: where evaluating collects the matmuls hw has not
  // measured (null: none is collected).
  MatmulShapes* unmeasured = nullptr;
};

// What to plan for: the flags of `fsdpc advise`, one for one.
struct PlanRequest {
  int world = 1;
  std::optional<Mesh> mesh;     // the hybrids on this mesh only
  std::string hardware = "local";  // a profile name, a .json file, or local (this host, measured)
  std::optional<int64_t> mem_cap;  // bytes per rank; none: the profile's capacity
  std::optional<DType> precision;  // none: the profile's
  std::optional<Target> executor;   // --executor cpu | cuda; none: the profile's
  std::vector<std::string> strategies;  // only these (zero3, zero2, no_shard, hybrid, hybrid_zero2); empty: all
  std::vector<int> tps{1}, pps{1};      // tensor- and pipeline-parallel sizes to try
  int micro_batches = 0;                // of each pp candidate; 0: the most up to 4P that divide the rows
  bool sequence_parallel = false;       // every tp > 1 candidate also with sequence parallelism
  TensorParallelPlan tensor_parallel_plan;  // the model family's (Model::tensor_parallel_plan())
  LossChunk loss_chunk;                 // --loss-chunk, every candidate's (passes/fuse_head.h)
  DilocoOptions diloco;                 // --outer-steps H: DiLoCo candidates beside the synchronous hybrids
  bool int8_gathers = false;            // --gather-dtype int8: int8-gather candidates beside the sharded ones
  int threads = 0;                      // candidates compiled at once; 0: the cores
};

// The candidates, best first, and how they were priced.
struct Plan {
  AdviseSetup setup;
  std::vector<Candidate> candidates;
  std::string cap_source;  // where the memory cap came from, for the report
  double seconds = 0;      // compiling, planning and simulating (not measuring this host)
};

// Plans a model for r.world ranks. `capture(batch)` returns the model's
// captured trace at `batch` rows a rank (0: the model's own), on any device.
// fsdpc::Error (exit 2) for a request that cannot be planned.
Plan plan_training(const PlanRequest& r, const std::function<Trace(int64_t batch)>& capture);
// The ranked table `fsdpc advise` prints, and its JSON form (`model` names
// the model; `measured`: with the measured columns of measure_candidates).
std::string plan_table(const Plan& p, const std::string& model, bool measured);
std::string plan_json(const Plan& p, const std::string& model, bool measured);

// The layout `fsdpc train <c.flags()>` compiles with (with --pp, a step of
// c.micro_batches micro-batches, and c.keep_gathered, are the engine's).
PipelineOptions candidate_pipeline(const AdviseSetup& s, const Candidate& c);

// Every candidate the setup admits, in a fixed order.
std::vector<Candidate> enumerate_candidates(const AdviseSetup& s);
// Captures the model at the micro-batch of each pipeline candidate's (tp,
// pp) and sets its micro_batches: a stage's data-parallel rank trains on
// pp * tp ranks' rows of s.captured, split into micro-batches. `capture`
// returns the model at a given per-rank batch (placed as s.captured).
void prepare_pipelines(AdviseSetup& s, std::vector<Candidate>& cs, const std::function<Trace(int64_t)>& capture);
// Compiles, plans and simulates each candidate (s.threads at a time).
void evaluate_candidates(const AdviseSetup& s, std::vector<Candidate>& cs);
// Best first: those that fit the cap, then the fastest; ties by smaller peak.
void rank_candidates(std::vector<Candidate>& cs);
// One line on why the first candidate won.
std::string winner_reason(const std::vector<Candidate>& ranked, int64_t cap);

// Steps a candidate trains under --measure when --measure-steps is not
// given: about a second of steps by the predicted step time, at least 5 and
// at most 1000 (measure_candidates splits them into rounds).
int auto_measure_steps(double predicted_seconds);

// --measure: mpirun (FSDPC_MPIRUN, else the first on PATH); "" if none.
std::string find_mpirun();
// The fsdpc CLI that --measure and the probes run under mpirun:
// FSDPC_EXECUTABLE, else this process when it is fsdpc, else fsdpc on PATH;
// fsdpc::Error when there is none.
std::string fsdpc_executable();
// `s` quoted for the shell.
std::string shell_quote(const std::string& s);
// Runs `mpirun -np world <this fsdpc> <args>` with every rank on this host
// (unbound, oversubscribed past the cores), standard output dropped and
// standard error into `stderr_file`; returns its exit code (128 + a signal).
int run_under_mpirun(const std::string& mpirun, int world, const std::string& args, const std::string& stderr_file);
// The probes' statistics (link-probe, matmul-probe): the median of `v`
// (not empty), and the largest of every rank's `mine` (collective over
// MPI_COMM_WORLD).
double median(std::vector<double> v);
double slowest_rank(double mine);
// The last non-blank line of `file`, or "(no output)".
std::string last_line(const std::string& file);
// A probe of this host run under mpirun on `world` ranks (link-probe,
// matmul-probe), in a fresh temporary folder that is removed after: `input`
// (if not empty) is written to DIR/input, `args(DIR)` gives the probe's
// arguments, and what the probe wrote to DIR/out.json is returned.
// fsdpc::Error says why it gave nothing: no mpirun, its exit code and last
// stderr line, or no output.
std::string run_probe(int world, const std::string& input, const std::function<std::string(const std::string&)>& args);

// One logged step of a --measure run: the optimizer's count after it (from
// 1 in a fresh run), its time, and whether the replicas exchanged after it
// (--log-json's "outer_step").
struct LoggedStep {
  int64_t step = 0;
  double ms = 0;
  bool outer = false;
};

// DiLoCo under --measure: the --outer-steps its runs use (0 without DiLoCo),
// 2F(TAU + 1) steps, at least 4, at most H. A round's outer work is the same
// for any H, and an H of 500 would run minutes before the first exchange.
int measure_round_steps(const DilocoOptions& d);

// A candidate's measured step from its runs (one per interleaved round):
// the median step after the warm-ups; for DiLoCo (d enabled), the median
// step without an exchange plus whole rounds' extra time spread over H, a
// round being steps qh + 1 .. (q + 1)h for q >= 1 (so a run needs 2h steps).
void summarise_runs(const std::vector<std::vector<LoggedStep>>& runs, const DilocoOptions& d, Measurement& m);

// Runs `mpirun -np world fsdpc train <model_flags> <candidate flags> --steps
// K` for each candidate that fits (in order, progress on stderr) and fills
// its `measured`; a failing run is recorded in its row, never thrown.
// `steps` 0: each candidate runs auto_measure_steps(its predicted step), in
// three interleaved rounds.
void measure_candidates(const AdviseSetup& s, const std::string& mpirun, const std::string& model_flags, int steps,
                        std::vector<Candidate>& cs);

// --hardware NAME|FILE|local: a shipped profile (hardware/NAME.json, found
// beside the installed binary or in the source tree), a file, or this host
// measured (cached). `world` is the ranks that share this host under local.
HardwareProfile load_hardware(const std::string& spec, int world);

// Seconds of host time per launch beyond the work, through the Interpreter
// and the CPU executor (runtime/planner/launch_overhead.cpp): a plain statement's
// kernel, a fused region's, a matmul's; and the element-operations per
// second a fused region computes, elementwise and with row reductions.
struct LaunchOverheads {
  double statement = 0, region = 0, matmul = 0;
  double elementwise_rate = 0, row_region_rate = 0;
};
LaunchOverheads measure_launch_overheads();

// The measurement behind `--hardware local`, for `world` ranks on this host.
HardwareProfile measure_local_hardware(int world);

}  // namespace fsdpc
