// The checks and defaults of TrainOptions (frontend/trainer/train_options.h).
#include "frontend/trainer/train_options.h"

#include <cstdlib>
#include <filesystem>

#include "executors/comm/mpi_world.h"
#include "frontend/trainer/train_profile.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/lr_schedule.h"

namespace fsdpc {

const char* checkpoint_kind_name(CheckpointKind k) {
  switch (k) {
    case CheckpointKind::full: return "full";
    case CheckpointKind::sharded: return "sharded";
  }
  return "?";
}

LrSchedule train_lr_schedule(const TrainOptions& o) {
  LrSchedule s = o.engine.lr_schedule;
  if (s.decay_steps <= 0) s.decay_steps = o.steps;
  return s;
}

std::optional<CheckpointKind> parse_checkpoint_kind(const std::string& name) {
  for (CheckpointKind k : {CheckpointKind::full, CheckpointKind::sharded})
    if (name == checkpoint_kind_name(k)) return k;
  return std::nullopt;
}

double train_timeout(const TrainOptions& o) { return o.timeout_s > 0 ? o.timeout_s : collective_timeout(); }

std::string flight_dir(const TrainOptions& o) {
  if (!o.flight_dir.empty()) return o.flight_dir;
  if (const char* env = std::getenv("FSDPC_FLIGHT_DIR"); env && *env) return env;
  return o.save.empty() ? "fsdpc-flight" : o.save;
}

void check_train_options(const TrainOptions& o, bool has_model) {
  namespace fs = std::filesystem;
  // The model first: without one nothing else matters (fsdpc train's first check).
  if (!has_model && o.init.empty() && o.resume.empty() && o.model.empty() && o.config.empty())
    fail("one of --model or --config is required");
  train_timeout(o);  // a bad FSDPC_TIMEOUT_S
  if (o.steps < 1) fail("--steps ", o.steps, ": expected at least 1");
  if (o.eval_every > 0 && o.val_data.empty())
    fail("--eval-every ", o.eval_every, ": there is nothing to evaluate without --val-data FILE");
  if (o.data_dtype != TokenDtype::automatic && o.data.empty() && o.val_data.empty())
    fail("--data-dtype ", token_dtype_name(o.data_dtype), ": there is no --data or --val-data FILE to read");
  check_lr_schedule(train_lr_schedule(o), o.engine.optimizer.lr);
  check_profile_args(o);
  std::error_code ec;
  if (!o.resume.empty() && !fs::is_directory(o.resume, ec)) fail("--resume ", o.resume, ": is not a folder");
  if (!o.init.empty() && !fs::exists(o.init, ec)) fail("--init ", o.init, ": no such file or folder");
  for (const auto& [flag, path] : {std::pair{"--data", &o.data}, std::pair{"--val-data", &o.val_data}})
    if (!path->empty() && !fs::is_regular_file(*path, ec)) fail(flag, " ", *path, ": no such file");
  // What the run writes, checked before its first step: a run must not
  // train for an hour and then find that it cannot save.
  if (!o.save.empty()) check_writable_folder("--save", o.save);
  if (!o.flight_dir.empty()) check_writable_folder("--flight-dir", o.flight_dir);
  if (!o.log_json.empty()) check_writable_file("--log-json", o.log_json);
  if (!o.save_state.empty()) check_writable_file("--save-state", o.save_state);
}

}  // namespace fsdpc
