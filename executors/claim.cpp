// claim: the executor pass of docs/design.md. Each statement goes to the first
// executor, in priority order, that claims it as it is; a composite nobody
// claims whole is replaced by its decomposition, whose statements are
// claimed in turn; an unclaimed prim is an error naming the op.
//
// Pre:  a trace whose synchronize statements were lowered (after grad).
// Post: every statement but `del` (the runtime's) has an executor and prints
//       with its prefix; composites are claimed whole or decomposed. Where a
//       decomposition was inlined into a trace that has dels, the dels are
//       placed again (passes/del.h), so that its intermediates die at their
//       last use instead of living to the end of the trace.
//
//   t0 = layer_norm(x, w, b, eps=1e-05)        t0 = cpu_layer_norm(x, w, b, eps=1e-05)
//   ft1 = all_gather(t_w, group=dp, ...)   ->  ft1 = mpi_all_gather(t_w, group=dp, ...)
//   del t7                                     del t7
#include "executors/claim.h"

#include <algorithm>
#include <array>
#include <utility>

#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "passes/del.h"
#include "passes/fold_transpose.h"
#include "passes/fuse.h"
#ifdef FSDPC_HAVE_CUDA
#include "executors/comm/nccl_executor.h"
#include "executors/cuda/cuda_executor.h"
#include "executors/cuda/device.h"
#include "executors/cuda/stream_plan.h"
#endif

namespace fsdpc {

namespace {

const Executor* first_claiming(const BoundSymbol& b, const std::vector<const Executor*>& executors) {
  for (const Executor* e : executors)
    if (e->claims(b)) return e;
  return nullptr;
}

std::string executor_list(const std::vector<const Executor*>& executors) {
  std::string names;
  for (const Executor* e : executors) names += (names.empty() ? "" : ", ") + std::string(e->name());
  return names.empty() ? "none" : names;
}

void claim_into(const BoundSymbol& b, const std::vector<const Executor*>& executors,
                std::vector<BoundSymbol>& out, bool& decomposed) {
  if (b.op == OpId::Del) {
    out.push_back(b);
    return;
  }
  if (b.op == OpId::Synchronize)
    fail("claim: synchronize must be lowered by grad before execution (statement defining ",
         b.outputs.empty() ? "?" : b.outputs[0].name, ")");
  if (const Executor* e = first_claiming(b, executors)) {
    out.push_back(b);
    out.back().executor = e->name();
    return;
  }
  if (op_info(b.op).composite && !b.subsymbols.empty()) {
    decomposed = true;
    for (const BoundSymbol& sub : b.subsymbols) claim_into(sub, executors, out, decomposed);
    return;
  }
  std::string types;
  for (const Proxy& o : b.outputs) types += (types.empty() ? "" : ", ") + type_str(o.type);
  fail("no executor claims ", op_name(b.op), op_info(b.op).composite ? " (and it has no decomposition)" : "",
       " producing ", types.empty() ? "nothing" : types, " (executors: ", executor_list(executors), ")");
}

}  // namespace

Trace claim(const Trace& trace, const std::vector<const Executor*>& executors) {
  Trace out = without_statements(trace, "exec");
  bool decomposed = false;
  for (const BoundSymbol& b : trace.bsyms) claim_into(b, executors, out.bsyms, decomposed);
  const bool has_dels =
      std::any_of(trace.bsyms.begin(), trace.bsyms.end(), [](const BoundSymbol& b) { return b.op == OpId::Del; });
  if (!decomposed || !has_dels) return out;
  out = insert_dels(out);
  out.provenance = "exec";
  return out;
}

std::vector<const Executor*> executors_for(Target target) {
  switch (target) {
    case Target::cpu: return {&cpu_executor(), &mpi_executor()};
    case Target::cuda:
#ifdef FSDPC_HAVE_CUDA
      return {&cuda_executor(), &nccl_executor()};
#else
      fail("--executor cuda: this build has no CUDA executor (configure with the CUDA toolkit)");
#endif
  }
  fail("executors_for: target ", static_cast<int>(target), " is not a Target");
}

bool cuda_available() {
#ifdef FSDPC_HAVE_CUDA
  return cuda::query_devices().count > 0;
#else
  return false;
#endif
}

Target resolve_target(TargetRequest r) {
  return resolve_target(r, r == TargetRequest::automatic && cuda_available());
}

namespace {

constexpr std::array<std::string_view, 2> kFusionModeNames = {"none", "auto"};
static_assert(static_cast<size_t>(FusionMode::automatic) + 1 == kFusionModeNames.size());

}  // namespace

std::string_view fusion_mode_name(FusionMode m) { return kFusionModeNames[static_cast<size_t>(m)]; }

std::optional<FusionMode> parse_fusion_mode(std::string_view text) {
  for (size_t i = 0; i < kFusionModeNames.size(); ++i)
    if (kFusionModeNames[i] == text) return static_cast<FusionMode>(i);
  return std::nullopt;
}

std::vector<std::string> fusion_mode_names() { return {kFusionModeNames.begin(), kFusionModeNames.end()}; }

Trace execution_trace(const Trace& trace, Target target, FusionMode fusion) {
  Trace claimed = claim(trace, executors_for(target));
  // Each step's input is dropped: its statements move into the next trace.
  if (fusion == FusionMode::automatic && has_fusion_executor(target)) claimed = fuse(std::move(claimed), target);
  if (fusion == FusionMode::automatic && folds_transposes(target))
    claimed = fold_transposes(std::move(claimed), target);
  switch (target) {
    case Target::cpu: return claimed;
    case Target::cuda:
#ifdef FSDPC_HAVE_CUDA
      return cuda::plan_streams(std::move(claimed));
#else
      return claimed;  // unreachable: executors_for refused cuda
#endif
  }
  return claimed;
}

}  // namespace fsdpc
