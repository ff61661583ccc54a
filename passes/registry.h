// The list of passes, with the one-line description `fsdpc passes` prints.
// Pipelines (passes/pipeline.h) name stages by these names.
#pragma once

#include <string>
#include <vector>

namespace fsdpc {

struct PassInfo {
  std::string name;
  std::string description;
};

const std::vector<PassInfo>& pass_registry();

}  // namespace fsdpc
