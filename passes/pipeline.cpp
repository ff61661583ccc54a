// The default pipeline, one pass per line, top to bottom.
#include "passes/pipeline.h"

#include "ir/error.h"
#include "ir/verifier.h"
#include "passes/fsdp.h"
#include "passes/grad.h"
#include "passes/split.h"

namespace fsdpc {

namespace {
const Trace& checked(const Trace& t, const char* stage) {
  try {
    verify(t);
  } catch (const Error& e) {
    FSDPC_CHECK(false) << "the " << stage << " pass produced an invalid trace: " << e.what();
  }
  return t;
}

void validate(const PipelineOptions& o) {
  if (o.prefetch < 0) fail("--prefetch must be >= 0, got ", o.prefetch);
  if (o.max_inflight < 1) fail("--max-inflight must be >= 1, got ", o.max_inflight);
  if (!(o.bucket_mb > 0)) fail("--bucket-mb must be positive, got ", o.bucket_mb);
  if (o.mesh.world() < 1) fail("world size must be at least 1");
}
}  // namespace

std::vector<std::string> stage_names() {
  return {"trace", "fsdp", "grad", "split"};
}

std::vector<Stage> compile(const Trace& captured, const PipelineOptions& o) {
  validate(o);
  std::vector<Stage> stages;
  stages.push_back({"trace", {captured}});
  Trace sharded = fsdp(captured, FsdpOptions{o.strategy, o.mesh});
  stages.push_back({"fsdp", {checked(sharded, "fsdp")}});
  Trace joint = grad(sharded, GradOptions{o.sync_grads, o.accumulate_grads});
  stages.push_back({"grad", {checked(joint, "grad")}});
  SplitResult fb = split(joint, SplitOptions{regathers_in_backward(o.strategy)});
  stages.push_back({"split", {checked(fb.forward, "split"), checked(fb.backward, "split")}});
  return stages;
}

}  // namespace fsdpc
