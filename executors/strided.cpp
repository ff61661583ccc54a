// Row-major strides and dim coalescing (strided.h).
#include "executors/strided.h"

namespace fsdpc {

Strides row_major_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

void push_coalesced(std::vector<StridedDim>& dims, StridedDim d) {
  if (d.size == 1) return;
  if (!dims.empty() && dims.back().src == d.src * d.size && dims.back().dst == d.dst * d.size)
    dims.back() = StridedDim{dims.back().size * d.size, d.src, d.dst};
  else
    dims.push_back(d);
}

}  // namespace fsdpc
