// The target a trace is compiled and run for: the executor family (cpu: the
// CPU kernels and MPI collectives; cuda: the CUDA kernels and NCCL
// collectives) and, from it, the device its tensors live on. A user's
// `auto` is a TargetRequest, resolved once where it enters (fsdpc train,
// fsdpc dump, the Trainer); below that edge the passes, the claim pass, the
// runtime and the planner take a Target and decide by it, never by a name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/types.h"

namespace fsdpc {

enum class Target : uint8_t { cpu, cuda };

// What a user asks for: a target, or automatic (`--executor auto`).
enum class TargetRequest : uint8_t { cpu, cuda, automatic };

// "cpu", "cuda": the compute executor's name, the prefix its statements
// print with (cpu_linear), and how reports, logs and hardware profiles name
// the target; and its inverse (nullopt for anything else).
std::string_view target_name(Target t);
std::optional<Target> parse_target(std::string_view text);
// Every name, in the order of the enum ("cpu or cuda" in messages).
std::vector<std::string> target_names();

// "cpu", "cuda", "auto": the spellings of --executor, and their inverse
// (nullopt for anything else; the caller names the flag or field).
std::string_view target_request_name(TargetRequest r);
std::optional<TargetRequest> parse_target_request(std::string_view text);
// Every spelling, in the order of the enum (for CLI11's IsMember).
std::vector<std::string> target_request_names();

// The request that names `t`.
TargetRequest request_of(Target t);

// automatic: cuda when `cuda_available` (this build has the CUDA executor
// and the runtime sees a device), else cpu. The others name their target.
// executors/claim.h's resolve_target(TargetRequest) supplies the answer.
Target resolve_target(TargetRequest r, bool cuda_available);

// Where the target's tensors live: the CPU, or CUDA device 0. Every rank's
// trace says cuda:0 (one process per GPU, and a trace is the same on every
// rank); the process picks its physical GPU (executors/cuda/device.h), so a
// Target carries no device index.
Device target_device(Target t);

}  // namespace fsdpc
