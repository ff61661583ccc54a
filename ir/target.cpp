// The spellings of Target and TargetRequest: the one table they are printed
// from and parsed by.
#include "ir/target.h"

#include <array>

namespace fsdpc {

namespace {

// Indexed by the enum; a new enumerator fails the size check below. A
// request is a target's name or "auto".
constexpr std::array<std::string_view, 2> kTargetNames = {"cpu", "cuda"};
static_assert(static_cast<size_t>(Target::cuda) + 1 == kTargetNames.size());
constexpr std::string_view kAutomatic = "auto";

}  // namespace

std::string_view target_name(Target t) { return kTargetNames[static_cast<size_t>(t)]; }

std::optional<Target> parse_target(std::string_view text) {
  for (size_t i = 0; i < kTargetNames.size(); ++i)
    if (kTargetNames[i] == text) return static_cast<Target>(i);
  return std::nullopt;
}

std::vector<std::string> target_names() { return {kTargetNames.begin(), kTargetNames.end()}; }

std::string_view target_request_name(TargetRequest r) {
  switch (r) {
    case TargetRequest::cpu: return target_name(Target::cpu);
    case TargetRequest::cuda: return target_name(Target::cuda);
    case TargetRequest::automatic: return kAutomatic;
  }
  return kAutomatic;  // unreachable: every request is listed
}

std::optional<TargetRequest> parse_target_request(std::string_view text) {
  if (text == kAutomatic) return TargetRequest::automatic;
  if (const std::optional<Target> t = parse_target(text)) return request_of(*t);
  return std::nullopt;
}

std::vector<std::string> target_request_names() {
  std::vector<std::string> names = target_names();
  names.emplace_back(kAutomatic);
  return names;
}

TargetRequest request_of(Target t) {
  switch (t) {
    case Target::cpu: return TargetRequest::cpu;
    case Target::cuda: return TargetRequest::cuda;
  }
  return TargetRequest::cpu;  // unreachable: every Target is listed
}

Target resolve_target(TargetRequest r, bool cuda_available) {
  switch (r) {
    case TargetRequest::cpu: return Target::cpu;
    case TargetRequest::cuda: return Target::cuda;
    case TargetRequest::automatic: return cuda_available ? Target::cuda : Target::cpu;
  }
  return Target::cpu;  // unreachable: every request is listed
}

Device target_device(Target t) {
  switch (t) {
    case Target::cpu: return Device{DeviceKind::cpu, 0};
    case Target::cuda: return Device{DeviceKind::cuda, 0};
  }
  return Device{};  // unreachable: every Target is listed
}

}  // namespace fsdpc
