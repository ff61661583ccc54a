// claim: the executor pass of docs/design.md. Each statement goes to the first
// executor, in priority order, that claims it as it is; a composite nobody
// claims whole is replaced by its decomposition, whose statements are
// claimed in turn; an unclaimed prim is an error naming the op.
//
// Pre:  a trace whose synchronize statements were lowered (after grad).
// Post: every statement but `del` (the runtime's) has an executor and prints
//       with its prefix; composites are claimed whole or decomposed.
//
//   t0 = layer_norm(x, w, b, eps=1e-05)        t0 = cpu_layer_norm(x, w, b, eps=1e-05)
//   ft1 = all_gather(t_w, group=dp, ...)   ->  ft1 = mpi_all_gather(t_w, group=dp, ...)
//   del t7                                     del t7
#include "executors/claim.h"

#include <utility>

#include "executors/comm/mpi_executor.h"
#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
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
                std::vector<BoundSymbol>& out) {
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
    for (const BoundSymbol& sub : b.subsymbols) claim_into(sub, executors, out);
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
  for (const BoundSymbol& b : trace.bsyms) claim_into(b, executors, out.bsyms);
  return out;
}

std::vector<const Executor*> executors_for(const std::string& name) {
  if (name == "cpu") return {&cpu_executor(), &mpi_executor()};
#ifdef FSDPC_HAVE_CUDA
  if (name == "cuda") return {&cuda_executor(), &nccl_executor()};
#else
  if (name == "cuda") fail("--executor cuda: this build has no CUDA executor (configure with the CUDA toolkit)");
#endif
  fail("--executor '", name, "': expected cpu, cuda or auto");
}

std::string resolve_executor(const std::string& name) {
  if (name != "auto") return name;
#ifdef FSDPC_HAVE_CUDA
  if (cuda::query_devices().count > 0) return "cuda";
#endif
  return "cpu";
}

Device executor_device(const std::string& executor) {
  if (executor == "cuda") return Device{DeviceKind::cuda, 0};
  return Device{};
}

void check_fusion_mode(const std::string& fusion) {
  if (fusion != "none" && fusion != "auto") fail("--fusion '", fusion, "': expected none or auto");
}

Trace execution_trace(const Trace& trace, const std::string& executor, const std::string& fusion) {
  check_fusion_mode(fusion);
  Trace claimed = claim(trace, executors_for(executor));
  // Each step's input is dropped: its statements move into the next trace.
  if (fusion == "auto" && has_fusion_executor(executor)) claimed = fuse(std::move(claimed), executor);
  if (fusion == "auto" && folds_transposes(executor)) claimed = fold_transposes(std::move(claimed), executor);
#ifdef FSDPC_HAVE_CUDA
  if (executor == "cuda") return cuda::plan_streams(std::move(claimed));
#endif
  return claimed;
}

}  // namespace fsdpc
