// --strategy, --mesh, --wrap, --bucketing, --prefetch, --max-inflight,
// --bucket-mb, --precision, --reduce-dtype, --gather-dtype, --remat, --loss-chunk, --tp, --pp, --outer-*: shared by
// fsdpc dump and fsdpc train.
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "ir/error.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

void add_sharding_options(CLI::App* cmd, ShardingArgs& s) {
  cmd->add_option("--strategy", s.strategy, "zero3 | zero2 | no_shard | hybrid | hybrid_zero2")
      ->check(CLI::IsMember({"zero3", "zero2", "no_shard", "hybrid", "hybrid_zero2"}))->capture_default_str();
  cmd->add_option("--mesh", s.mesh, "R,S: R replicas of S-way sharding (hybrid strategies)");
  cmd->add_option("--tp", s.tp,
                  "T: tensor parallelism over T adjacent ranks (column/row-parallel attention and MLP); the "
                  "world is (data-parallel ranks) x T, the data-parallel part laid out by --strategy and --mesh")
      ->capture_default_str();
  cmd->add_flag("--sequence-parallel", s.sequence_parallel,
               "With --tp: Megatron's sequence parallelism (norms and residuals hold S/T positions a rank; "
               "reduce_scatter and all_gather over the sequence instead of all_reduce)");
  cmd->add_option("--pp", s.pp,
                  "P: pipeline parallelism over P stages of contiguous blocks; the world is P x (one stage's ranks), "
                  "each stage laid out by --strategy, --mesh and --tp (stages outermost)")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--pp-balance", s.pp_balance, "With --pp: blocks per stage, as 3,3,2 (default: balanced by parameters)");
  cmd->add_option("--pp-schedule", s.pp_schedule,
                  "With --pp (train): 1f1b (PipeDream-Flush: at most P - s micro-batches held on stage s) | gpipe "
                  "(every forward, then every backward); --grad-accum sets the micro-batches")
      ->check(CLI::IsMember({"1f1b", "gpipe"}))->capture_default_str();
  cmd->add_option("--wrap", s.wrap, "FSDP units: block | size:N | none")->capture_default_str();
  cmd->add_option("--bucketing", s.bucketing, "none | unit")->check(CLI::IsMember({"none", "unit"}))
      ->capture_default_str();
  cmd->add_option("--prefetch", s.prefetch, "All_gathers issued K units ahead")->capture_default_str();
  cmd->add_option("--max-inflight", s.max_inflight, "At most M all_gathers (and M reductions) outstanding")
      ->capture_default_str();
  cmd->add_option("--bucket-mb", s.bucket_mb, "DDP gradient bucket size in MiB")->capture_default_str();
  cmd->add_option("--precision", s.precision,
                  "f32 | bf16 (mixed: parameters gathered and matmuls run in bf16, f32 master weights)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--reduce-dtype", s.reduce_dtype,
                  "With --precision bf16: the dtype gradients are reduced in, f32 (as FSDP2's "
                  "MixedPrecisionPolicy(reduce_dtype=float32)) | bf16 (half the reduce_scatter's bytes)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--gather-dtype", s.gather_dtype,
                  "What the parameters' all_gathers move: param (their dtype: f32, or bf16 with --precision bf16) | "
                  "int8 (blocks of 256 int8 codes with an f32 scale, ZeRO++'s qwZ: a quarter of f32's bytes, half "
                  "of bf16's; gradients stay unquantized)")
      ->check(CLI::IsMember({"param", "int8"}))
      ->capture_default_str();
  cmd->add_option("--remat", s.remat,
                  "Activation checkpointing: none | block (recompute each unit from its input) | selective (keep "
                  "matmul and attention outputs) | auto[:BYTES] (minimum cut; with BYTES, the least recomputation "
                  "whose activation peak fits)")
      ->capture_default_str();
  add_loss_chunk_option(cmd, s.loss_chunk);
  add_diloco_options(cmd, s.diloco);
}

void add_diloco_options(CLI::App* cmd, DilocoArgs& d) {
  cmd->add_option("--outer-steps", d.numbers.outer_steps,
                  "H: DiLoCo on a hybrid mesh: the replicas train apart, without the per-step all_reduce over "
                  "replicate, and meet every H steps in an outer step (the outer trace); 0: off. The paper uses 500")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--outer-lr", d.numbers.outer_lr, "With --outer-steps: the outer SGD's learning rate")
      ->capture_default_str();
  cmd->add_option("--outer-momentum", d.numbers.outer_momentum,
                  "With --outer-steps: the outer SGD's Nesterov momentum (0: none)")
      ->capture_default_str();
  cmd->add_option("--outer-dtype", d.dtype,
                  "With --outer-steps: what crosses between replicas, f32 (an all_reduce) | bf16 (each replica's "
                  "change rounded to bf16 and all-gathered, summed in f32: half the bytes at 2 replicas) | int8 "
                  "(the change in int8 blocks of 256 with an f32 scale each, all-gathered, summed in f32: a quarter)")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}))->capture_default_str();
  cmd->add_option("--outer-fragments", d.numbers.outer_fragments,
                  "F: Streaming DiLoCo: the model in F fragments of whole FSDP units (see --wrap), fragment f "
                  "meeting f*H/F steps into each round, so an exchange moves 1/F of the model; 1: all at once")
      ->capture_default_str();
  cmd->add_option("--outer-delay", d.numbers.outer_delay,
                  "TAU: Streaming DiLoCo: a fragment's exchange stays in flight for TAU inner steps before it "
                  "lands (the replicas train meanwhile); 0: it lands at once. Below --outer-steps")
      ->capture_default_str();
  cmd->add_option("--outer-mix", d.numbers.outer_mix,
                  "ALPHA: a landed fragment becomes ALPHA * the replica's own + (1 - ALPHA) * the new anchor; "
                  "default 0.5 (the paper's) with --outer-delay, 0 without")
      ->check(CLI::NonNegativeNumber);
}

namespace {

std::vector<int> parse_balance(const std::string& list) {
  std::vector<int> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      fail("--pp-balance '", list, "': '", item, "' is not a whole number; expected blocks per stage, as 3,3,2");
    out.push_back(n);
  }
  return out;
}

}  // namespace

DilocoOptions DilocoArgs::options() const {
  DilocoOptions o = numbers;
  o.outer_dtype = dtype == "int8" ? DType::i8 : *parse_dtype(dtype);  // CLI11 admitted f32, bf16, int8 only
  return o;
}

PipelineOptions sharding_pipeline(const ShardingArgs& s, int world, const std::string& world_source) {
  if (s.pp < 1) fail("--pp must be at least 1, got ", s.pp);
  if (world % s.pp != 0)
    fail("--pp ", s.pp, " does not divide the world of ", world, " ranks (",
         world_source.empty() ? "--world-size" : world_source, "): the world is pp x (one stage's ranks)");
  if (!s.pp_balance.empty() && s.pp < 2) fail("--pp-balance lists blocks per pipeline stage; it needs --pp 2 or more");
  PipelineOptions o = stage_pipeline(s, world / s.pp,
                                     world_source.empty() || s.pp == 1
                                         ? world_source
                                         : world_source + " over --pp " + std::to_string(s.pp) + " stages");
  o.pp = s.pp;
  if (!s.pp_balance.empty()) o.pp_balance = parse_balance(s.pp_balance);
  return o;
}

PipelineOptions stage_pipeline(const ShardingArgs& s, int world, const std::string& world_source) {
  PipelineOptions o;
  auto strategy = parse_strategy(s.strategy);
  FSDPC_CHECK(strategy) << "CLI11 admitted strategy " << s.strategy;
  o.strategy = *strategy;
  if (s.tp < 1) fail("--tp must be at least 1, got ", s.tp);
  if (is_hybrid(o.strategy)) {
    if (s.mesh.empty()) fail("--strategy ", s.strategy, " needs --mesh R,S");
    o.mesh = parse_mesh(s.mesh);
    o.mesh.tp = s.tp;
    if (!world_source.empty() && o.mesh.world() != world)
      fail("--mesh ", s.mesh, (s.tp > 1 ? " with --tp " + std::to_string(s.tp) : std::string()), " has ",
           o.mesh.world(), " ranks but ", world_source);
  } else {
    if (!s.mesh.empty()) fail("--mesh applies to hybrid strategies; ", s.strategy, " runs on a flat world");
    if (world % s.tp != 0)
      fail("--tp ", s.tp, " does not divide the world of ", world, " ranks (",
           world_source.empty() ? "--world-size" : world_source, "): the world is (data-parallel ranks) x T");
    o.mesh = flat_mesh(world / s.tp);
    o.mesh.tp = s.tp;
  }
  o.wrap = s.wrap;
  o.bucketing = s.bucketing == "unit";
  o.prefetch = s.prefetch;
  o.max_inflight = s.max_inflight;
  o.bucket_mb = s.bucket_mb;
  o.precision = *parse_dtype(s.precision);
  o.int8_gathers = s.gather_dtype == "int8";
  o.reduce_dtype = *parse_dtype(s.reduce_dtype);
  if (o.reduce_dtype != DType::f32 && o.reduce_dtype != o.precision)
    fail("--reduce-dtype ", s.reduce_dtype, " needs --precision ", s.reduce_dtype,
         ": gradients are reduced in f32 or in the training precision");
  o.remat = parse_remat(s.remat);
  o.loss_chunk = parse_loss_chunk(s.loss_chunk);
  o.sequence_parallel = s.sequence_parallel;
  o.diloco = s.diloco.options();
  const char* keep = std::getenv("FSDPC_KEEP_COLLECTIVES");
  o.keep_collectives = keep && std::string_view(keep) == "1";
  return o;
}

}  // namespace fsdpc::cli
