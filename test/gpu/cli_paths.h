// Where the GPU tests find the fsdpc CLI and mpirun: the build tree's, as
// compiled in (FSDPC_BIN, FSDPC_MPIEXEC), unless environment variables of
// the same names say otherwise. tools/gpu_check.sh sets them when the tests
// run from the GPU bundle (tools/gpu_bundle.sh) on a machine where the build
// tree's paths do not exist.
#pragma once

#include <cstdlib>
#include <string>

namespace fsdpc::gpu_test {

inline std::string env_or(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? v : built;
}

inline std::string fsdpc_bin() { return env_or("FSDPC_BIN", FSDPC_BIN); }
inline std::string mpiexec() { return env_or("FSDPC_MPIEXEC", FSDPC_MPIEXEC); }

}  // namespace fsdpc::gpu_test
