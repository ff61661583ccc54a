// What every rank of a training run must agree on before its first collective
// (runtime/reliability/consistency.h compares it across ranks): the options that change
// the math, the collectives or when they happen, the model, the data and
// checkpoint files, and the compiled traces.
#pragma once

#include "frontend/jit.h"
#include "frontend/model.h"
#include "runtime/reliability/consistency.h"
#include "frontend/trainer/train_options.h"

namespace fsdpc {

// --log-every, --log-json, --mem-cap and --save-state may differ across ranks.
// Each entry is named by its `fsdpc train` flag.
LaunchFingerprint launch_fingerprint(const TrainOptions& t, const JitOptions& o, const Model& model, int world);
// The forward and backward traces (and the no_sync / accumulate pairs).
void add_traces(LaunchFingerprint& f, const EngineTraces& t);

}  // namespace fsdpc
