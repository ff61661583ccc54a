// The staging plans of nccl_staging.h.
#include "executors/comm/nccl_staging.h"

#include <cstring>

namespace fsdpc {

std::vector<Copy2D> gather_unpack_plan(int64_t outer, int64_t inner_bytes, int members) {
  std::vector<Copy2D> plan;
  const auto o = static_cast<size_t>(outer), inner = static_cast<size_t>(inner_bytes);
  if (o == 0 || inner == 0) return plan;
  for (int m = 0; m < members; ++m) {
    const auto mm = static_cast<size_t>(m);
    // Member m's block is contiguous; its rows go every `members` rows.
    plan.push_back({mm * inner, inner * static_cast<size_t>(members), mm * o * inner, inner, inner, o});
  }
  return plan;
}

std::vector<Copy2D> scatter_pack_plan(int64_t outer, int64_t chunk_bytes, int members) {
  std::vector<Copy2D> plan;
  const auto o = static_cast<size_t>(outer), chunk = static_cast<size_t>(chunk_bytes);
  if (o == 0 || chunk == 0) return plan;
  for (int m = 0; m < members; ++m) {
    const auto mm = static_cast<size_t>(m);
    // Member m's chunk of every row, gathered into one contiguous block.
    plan.push_back({mm * o * chunk, chunk, mm * chunk, chunk * static_cast<size_t>(members), chunk, o});
  }
  return plan;
}

void apply_on_host(const std::vector<Copy2D>& plan, void* dst, const void* src) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (const Copy2D& c : plan)
    for (size_t r = 0; r < c.height; ++r)
      std::memcpy(d + c.dst_offset + r * c.dst_pitch, s + c.src_offset + r * c.src_pitch, c.width);
}

}  // namespace fsdpc
