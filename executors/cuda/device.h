// What the CUDA runtime can see on this machine, asked without failing when
// there is no driver or no device (a build machine without a GPU).
#pragma once

#include <string>

namespace fsdpc::cuda {

struct DeviceQuery {
  int count = 0;       // usable devices
  std::string reason;  // why count is 0, from the runtime's own error string
};

DeviceQuery query_devices();

}  // namespace fsdpc::cuda
