// Launch geometry (launch.h).
#include "executors/cuda/launch.h"

#include <algorithm>

#include "ir/error.h"

namespace fsdpc::cuda {

Launch launch_1d(int64_t n, int block) {
  FSDPC_CHECK(n >= 0) << "negative element count " << n;
  FSDPC_CHECK(block > 0 && block <= kMaxBlock && block % kWarp == 0) << "bad block size " << block;
  if (n == 0) return {};
  const int64_t blocks = (n + block - 1) / block;
  return {static_cast<uint32_t>(std::min(blocks, kMaxGrid)), static_cast<uint32_t>(block)};
}

Launch launch_rows(int64_t rows, int64_t cols) {
  FSDPC_CHECK(rows >= 0 && cols >= 0) << "negative shape " << rows << "x" << cols;
  if (rows == 0) return {};
  int block = kWarp;
  while (block < kMaxBlock && block < cols) block *= 2;
  return {static_cast<uint32_t>(std::min(rows, kMaxGrid)), static_cast<uint32_t>(block)};
}

}  // namespace fsdpc::cuda
