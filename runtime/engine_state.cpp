// The engine's state in and out (Engine members, runtime/engine.h):
// parameters loaded from a full checkpoint, each rank's shards and optimizer
// state saved and restored at any (pp, dp, tp), and the full parameters
// gathered to rank 0, each through the tensor-parallel layout
// (passes/tensor_parallel_plan.h) and FSDP's rows.
#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_executor.h"
#include "ir/error.h"
#include "passes/tensor_parallel_plan.h"
#include "runtime/io/checkpoint_parts.h"
#include "runtime/engine.h"
#include "runtime/io/safetensors.h"

namespace fsdpc {

void Engine::load_parameters(const ShardFill& fill) {
  for (Param& p : params_) {
    const Shape& full = p.plan.full_shape;
    std::vector<float> host(static_cast<size_t>(numel(p.value.type.shape)));
    if (p.tp_split) {
      // The file holds the full parameter: read it whole, cut this rank's
      // tp part, then take the part's FSDP rows (zero padding past its end).
      std::vector<float> whole(static_cast<size_t>(numel(full)));
      fill(p.plan.path, full, 0, full.empty() ? 1 : full[0], whole.data());
      take_rows(p, cut_tp_part(p, whole), host);
    } else {
      const int64_t rows = p.group.empty() ? (full.empty() ? 1 : full[0]) : p.value.type.shape[0];
      fill(p.plan.path, full, p.row_begin, rows, host.data());
    }
    to_device(p.value, host);
  }
  anchors_.clear();  // DiLoCo: a new round starts from these parameters
  outer_momenta_.clear();
  land_in_flight();  // no collective is dropped in flight
  in_flight_.clear();
}

void Engine::save_rank_state(const std::string& dir, int64_t step) {
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> meta = {{"step", std::to_string(step)},
                                             {"world", std::to_string(world())},
                                             {"tp", std::to_string(options_.mesh.tp)},
                                             // A pipeline stage's file holds its stage's parameters only.
                                             {"pp", std::to_string(options_.mesh.pp)},
                                             {"seed", std::to_string(options_.seed)},
                                             {"optimizer_steps", std::to_string(optimizer_->steps())}};
  // DiLoCo: the replicas' parameters and inner optimizer states differ, so
  // each rank file says whose they are; the anchor and outer momentum (the
  // same on every replica) are kept while a round is under way.
  const bool outer_state = outer_ && !anchors_.empty();
  if (outer_) {
    meta["outer_replicas"] = std::to_string(options_.mesh.replicas);
    meta["outer_replica"] = std::to_string(mpi_->groups().rank_in("replicate"));
    meta["outer_steps"] = std::to_string(outer_->every);
    meta["outer_anchors"] = outer_state ? "1" : "0";
    meta["outer_fragments"] = std::to_string(outer_->fragments.size());
    meta["outer_delay"] = std::to_string(outer_->delay);
    // Streaming DiLoCo: an exchange in flight lands now (its waits, not its
    // update, which stays at its step), and its landed means are saved: the
    // run goes on exactly as it would have, and a resume lands nothing.
    land_in_flight();
    meta["outer_in_flight"] = std::to_string(in_flight_.size());
  }
  // Host copies of every shard and state buffer (device memory on a GPU),
  // kept alive until the file is written.
  std::vector<std::vector<float>> host;
  host.reserve(5 * params_.size());
  auto add = [&](const std::string& name, const Shape& shape, const float* device_data) {
    host.emplace_back(static_cast<size_t>(numel(shape)));
    backend().copy_to_host(host.back().data(), device_data, host.back().size() * sizeof(float));
    tensors.push_back({name, shape, host.back().data()});
  };
  for (Param& p : params_) {
    const Shape& shape = p.value.type.shape;
    add(p.plan.path, shape, static_cast<const float*>(p.value.data()));
    // The rows are of this rank's tp part when tensor parallelism cut the
    // parameter: the file says which part, so any layout can place them.
    PartPlacement where;
    where.row_begin = p.row_begin;
    if (p.tp_split) {
      where.tp = options_.mesh.tp;
      where.tp_rank = mpi_->groups().rank_in("tp");
      where.split = *p.tp_split;
    }
    write_placement(meta, p.plan.path, where);
    if (!p.requires_grad) continue;
    Optimizer::StateView st = optimizer_->state({p.plan.path, nullptr, nullptr, numel(shape)});
    meta[p.plan.path + ".step"] = std::to_string(st.step);
    if (st.buf0) add(p.plan.path + ".state0", shape, st.buf0);  // placed as the parameter's rows
    if (st.buf1) add(p.plan.path + ".state1", shape, st.buf1);
  }
  for (size_t j = 0; outer_state && j < outer_params_.size(); ++j) {
    const Param& p = params_[outer_params_[j]];
    add(p.plan.path + ".outer_anchor", p.value.type.shape, static_cast<const float*>(anchors_[j].data()));
    if (!outer_momenta_.empty())
      add(p.plan.path + ".outer_momentum", p.value.type.shape, static_cast<const float*>(outer_momenta_[j].data()));
  }
  for (const OuterExchange& x : in_flight_) {
    const OuterFragment& f = outer_->fragments[x.fragment];
    for (size_t i = 0; i < x.held.size(); ++i) {
      const Param& p = params_[outer_params_[outer_slot_.at(f.landed_params.at(i))]];
      add(p.plan.path + ".outer_landed", p.value.type.shape, static_cast<const float*>(x.held[i].data()));
    }
  }
  write_safetensors(dir + "/rank-" + std::to_string(rank()) + ".safetensors", tensors, meta);
}

void Engine::read_state(const RankFiles& rf, const Param& p, const std::string& name, float* device_out) {
  const Shape& shape = p.value.type.shape;
  const int64_t rows = shape.empty() ? 1 : shape[0], cols = rows ? numel(shape) / rows : 0;
  const int64_t full_rows = p.plan.full_shape.empty() ? 1 : p.plan.full_shape[0];
  // Rows of the full parameter in every file and wanted here: read only
  // this rank's rows. Otherwise tp parts were written or are wanted: put
  // the full tensor together from the files, then cut this rank's part.
  const bool parts = p.tp_split || rf.holds_tp_parts(p.plan.path);
  std::vector<float> host(static_cast<size_t>(rows * cols));
  if (!parts) {
    rf.read_rows(name, p.plan.path, full_rows, p.row_begin, rows, cols, host.data());
  } else {
    std::vector<float> whole = rf.read_full(name, p.plan.path, p.plan.full_shape, options_.tensor_parallel_plan);
    take_rows(p, p.tp_split ? cut_tp_part(p, whole) : whole, host);
  }
  backend().copy_from_host(device_out, host.data(), host.size() * sizeof(float));
}

// A checkpoint written under DiLoCo holds each replica's own parameters and
// inner optimizer state (they differ within a round): a DiLoCo run reads
// its own replica's files, and needs as many replicas; a synchronous run
// takes replica 0's, but only at a round's end, where the parameters agree.
// Returns whether the files hold the anchor and outer momentum to go on from.
bool Engine::select_outer_replica(RankFiles& rf, const std::string& dir) {
  if (!rf.has_meta(0, "outer_replicas")) return false;
  const int64_t replicas = rf.meta(0, "outer_replicas"), every = rf.meta(0, "outer_steps");
  const int64_t steps = rf.meta(0, "optimizer_steps");
  if (outer_) {
    if (replicas != options_.mesh.replicas)
      fail(dir, ": written by ", replicas, " DiLoCo replicas, whose parameters and optimizer states differ; this run has ",
           options_.mesh.replicas, " (resume with --mesh ", replicas, ",S)");
    rf.keep_only("outer_replica", mpi_->groups().rank_in("replicate"));
    return rf.meta(0, "outer_anchors") == 1;
  }
  if (replicas > 1 && steps % every != 0)
    fail(dir, ": written at step ", steps, ", inside a DiLoCo round of ", every,
         " steps, where the replicas' parameters differ; resume it with --outer-steps, or from a round's end");
  // Streaming DiLoCo's fragments meet at different steps: at no step do the
  // replicas agree on every one.
  if (replicas > 1 && ((rf.has_meta(0, "outer_fragments") && rf.meta(0, "outer_fragments") > 1) ||
                       (rf.has_meta(0, "outer_delay") && rf.meta(0, "outer_delay") > 0)))
    fail(dir, ": written by Streaming DiLoCo (--outer-fragments or --outer-delay), whose replicas' parameters never "
              "all agree; resume it with the same --outer-* flags");
  rf.keep_only("outer_replica", 0);
  return false;
}

int64_t Engine::load_rank_state(const std::string& dir) {
  RankFiles rf(dir);
  // Data and sampling are functions of (seed, step): another seed would not
  // continue the same run.
  if (rf.meta(0, "seed") != static_cast<int64_t>(options_.seed))
    fail(dir, ": the checkpoint was trained with --seed ", rf.meta(0, "seed"), ", this run has --seed ",
         options_.seed);
  const bool outer_anchors = select_outer_replica(rf, dir);
  for (Param& p : params_) {
    const Shape& shape = p.value.type.shape;
    auto read = [&](const std::string& name, float* device_out) { read_state(rf, p, name, device_out); };
    read(p.plan.path, static_cast<float*>(p.value.data()));
    if (!p.requires_grad) continue;
    Optimizer::StateView st = optimizer_->state({p.plan.path, nullptr, nullptr, numel(shape)});
    if (st.buf0) read(p.plan.path + ".state0", st.buf0);
    if (st.buf1) read(p.plan.path + ".state1", st.buf1);
    optimizer_->set_param_step(p.plan.path, rf.param_meta(p.plan.path, p.plan.path + ".step"));
  }
  optimizer_->set_steps(rf.meta(0, "optimizer_steps"));
  anchors_.clear();
  outer_momenta_.clear();
  land_in_flight();
  in_flight_.clear();
  if (outer_anchors) {
    // The round under way goes on from its anchor and the outer momentum;
    // without them (a checkpoint of synchronous training, or one written
    // before the first step) the next step starts a round.
    start_outer_round();
    for (size_t j = 0; j < outer_params_.size(); ++j) {
      const Param& p = params_[outer_params_[j]];
      read_state(rf, p, p.plan.path + ".outer_anchor", static_cast<float*>(anchors_[j].data()));
      if (!outer_momenta_.empty())
        read_state(rf, p, p.plan.path + ".outer_momentum", static_cast<float*>(outer_momenta_[j].data()));
    }
    // Streaming DiLoCo: the exchanges in flight after this count were landed
    // when it was saved; their updates run at their steps.
    const std::vector<std::pair<size_t, int64_t>> due = in_flight_after(optimizer_->steps());
    const int64_t saved = rf.has_meta(0, "outer_in_flight") ? rf.meta(0, "outer_in_flight") : 0;
    if (saved > 0 || !due.empty()) {
      if (saved != static_cast<int64_t>(due.size()) ||
          rf.meta(0, "outer_fragments") != static_cast<int64_t>(outer_->fragments.size()) ||
          rf.meta(0, "outer_delay") != outer_->delay || rf.meta(0, "outer_steps") != outer_->every)
        fail(dir, ": written at step ", rf.meta(0, "step"), " with other Streaming DiLoCo settings (--outer-steps ",
             rf.meta(0, "outer_steps"), ", --outer-fragments ",
             rf.has_meta(0, "outer_fragments") ? rf.meta(0, "outer_fragments") : 1, ", --outer-delay ",
             rf.has_meta(0, "outer_delay") ? rf.meta(0, "outer_delay") : 0, "); this run has ", outer_->every, ", ",
             outer_->fragments.size(), " and ", outer_->delay,
             ", with exchanges in flight at this step: resume with the same flags, or from a step without one");
    }
    for (const auto& [fragment, lands_at] : due) {
      const OuterFragment& f = outer_->fragments[fragment];
      OuterExchange x{fragment, lands_at, true, {}};
      for (size_t i = 0; i < f.landed_params.size(); ++i) {
        const Param& p = params_[outer_params_[outer_slot_.at(f.landed_params[i])]];
        x.held.push_back(allocate_tensor(allocator_, f.update.args.at(i).type, MemCategory::communication));
        read_state(rf, p, p.plan.path + ".outer_landed", static_cast<float*>(x.held.back().data()));
      }
      in_flight_.push_back(std::move(x));
    }
  }
  return rf.meta(0, "step");
}

// This rank's rows of `tensor` (its tp part, or the full parameter) into
// `host`: rows [row_begin, row_begin + its rows), 0 past the end (padding).
void Engine::take_rows(const Param& p, const std::vector<float>& tensor, std::vector<float>& host) const {
  const Shape& shape = p.value.type.shape;
  const int64_t row = shape.empty() || shape[0] == 0 ? 1 : numel(shape) / shape[0];
  const int64_t size = static_cast<int64_t>(tensor.size());
  const int64_t begin = std::min(size, p.row_begin * row);
  const int64_t n = std::min(size - begin, static_cast<int64_t>(host.size()));
  std::fill(host.begin(), host.end(), 0.0f);
  std::copy_n(tensor.begin() + begin, n, host.begin());
}

std::vector<float> Engine::cut_tp_part(const Param& p, const std::vector<float>& whole) const {
  const int tp = options_.mesh.tp;
  const TensorParallelSplit& split = *p.tp_split;
  // A padded vocabulary's padding rows stay 0.
  std::vector<float> part(static_cast<size_t>(numel(tensor_parallel_part_shape(split, p.plan.full_shape, tp))), 0.0f);
  for (const TensorParallelRun& r : tensor_parallel_runs(split, p.plan.full_shape, tp, mpi_->groups().rank_in("tp")))
    std::copy_n(whole.begin() + r.full, r.count, part.begin() + r.part);
  return part;
}

// The tp ranks' parts of parameter `p` (each rank passes its whole part),
// put back together on tp rank 0 as the full tensor; the others get an
// empty vector. Every rank of every tp group calls it.
std::vector<float> Engine::gather_tp_parts(const Param& p, std::vector<float> part) {
  const int tp = options_.mesh.tp;
  const TensorParallelSplit& split = *p.tp_split;
  const int64_t n = numel(tensor_parallel_part_shape(split, p.plan.full_shape, tp));
  part.resize(static_cast<size_t>(n));  // a shard group's other members hold no rows
  MPI_Comm comm = mpi_->groups().comm("tp");
  const bool tp_root = mpi_->groups().rank_in("tp") == 0;
  std::vector<float> parts(tp_root ? static_cast<size_t>(n * tp) : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  FSDPC_MPI_CHECK(MPI_Igather(part.data(), static_cast<int>(n), MPI_FLOAT, tp_root ? parts.data() : nullptr,
                              static_cast<int>(n), MPI_FLOAT, 0, comm, &request));
  CollectiveWatch* watch = collective_watch();
  const uint64_t id = watch ? watch->issued({"gather", "full_state_dict", "", "tp", comm, n, "f32",
                                             n * static_cast<int64_t>(sizeof(float))})
                            : 0;
  mpi_wait_watched(&request, id);
  if (watch) watch->completed(id);
  if (!tp_root) return {};
  std::vector<float> full(static_cast<size_t>(numel(p.plan.full_shape)));
  for (int t = 0; t < tp; ++t)  // the real rows only: a padded vocabulary's padding is dropped
    for (const TensorParallelRun& r : tensor_parallel_runs(split, p.plan.full_shape, tp, t))
      std::copy_n(parts.begin() + (t * n + r.part), r.count, full.begin() + r.full);
  return full;
}

std::map<std::string, HostTensor> Engine::full_state_dict() {
  std::map<std::string, HostTensor> out;
  // World rank 0, or with pipeline stages the first rank of each stage.
  const bool root = rank() % options_.mesh.stage_world() == 0;
  for (const Param& p : params_) {
    const std::vector<float> local = to_host(p.value);
    const float* d = local.data();
    const int64_t n = numel(p.value.type.shape);
    std::vector<float> full;
    if (p.group.empty()) {
      full = local;
    } else {
      // Each shard group gathers its rows on its first member; world rank 0
      // is the first member of its group (other replicas gather and drop).
      MPI_Comm comm = mpi_->groups().comm(p.group);
      const bool group_root = mpi_->groups().rank_in(p.group) == 0;
      if (group_root) full.resize(static_cast<size_t>(n * mpi_->groups().size(p.group)));
      MPI_Request request = MPI_REQUEST_NULL;
      FSDPC_MPI_CHECK(MPI_Igather(d, static_cast<int>(n), MPI_FLOAT, group_root ? full.data() : nullptr,
                                  static_cast<int>(n), MPI_FLOAT, 0, comm, &request));
      CollectiveWatch* watch = collective_watch();
      const uint64_t id = watch ? watch->issued({"gather", "full_state_dict", "", p.group, comm, n, "f32",
                                                 n * static_cast<int64_t>(sizeof(float))})
                                : 0;
      mpi_wait_watched(&request, id);
      if (watch) watch->completed(id);
      // Drop the padding rows (of this tp rank's part, when tp cut it).
      full.resize(static_cast<size_t>(
          p.tp_split ? numel(tensor_parallel_part_shape(*p.tp_split, p.plan.full_shape,
                                                        options_.mesh.tp))
                     : numel(p.plan.full_shape)));
    }
    if (p.tp_split) full = gather_tp_parts(p, std::move(full));
    if (root) out[p.plan.path] = HostTensor::floats(p.plan.full_shape, std::move(full));
  }
  if (options_.mesh.pp > 1) send_stage_state(out);
  return out;
}

}  // namespace fsdpc
