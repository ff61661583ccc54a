// The claim pass: binds every statement of a trace to an executor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "executors/executor.h"
#include "ir/target.h"
#include "ir/trace.h"

namespace fsdpc {

Trace claim(const Trace& trace, const std::vector<const Executor*>& executors);

// The executors a target runs with, in priority order: cpu is the CPU
// kernels and MPI collectives, cuda the CUDA kernels and NCCL collectives.
// Throws fsdpc::Error for cuda in a build without the CUDA executor.
std::vector<const Executor*> executors_for(Target target);

// Whether this build has the CUDA executor and the runtime sees a device.
bool cuda_available();

// `--executor auto` resolved here, once: resolve_target(r, cuda_available())
// (ir/target.h), the device query only made for automatic.
Target resolve_target(TargetRequest r);

// `--fusion`: none, every statement its own kernel; automatic ("auto"), the
// fusible statements of a target with a fusion executor grouped into regions
// (passes/fuse.h), and on cpu the transposes its matmul reads in place
// folded into it (passes/fold_transpose.h).
enum class FusionMode : uint8_t { none, automatic };

// "none", "auto": the spellings of --fusion, and their inverse (nullopt for
// anything else). Every spelling in the order of the enum, for IsMember.
std::string_view fusion_mode_name(FusionMode m);
std::optional<FusionMode> parse_fusion_mode(std::string_view text);
std::vector<std::string> fusion_mode_names();

// The execution trace of a final (scheduled, del-placed) trace: claimed by
// executors_for(target), under FusionMode::automatic fused (and folded), and
// on cuda given its stream plan (executors/cuda/stream_plan.h), after
// fusion. The trace's tensors must already live on target_device(target)
// (passes/place.h).
Trace execution_trace(const Trace& trace, Target target, FusionMode fusion = FusionMode::none);

}  // namespace fsdpc
