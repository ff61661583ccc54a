// How many threads this rank's CPU kernels and oneDNN run on: the cores this
// process may run on shared among the ranks on its host, so one process on a
// many-core machine uses them all and N ranks on it do not oversubscribe.
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"

namespace fsdpc {

namespace {

std::atomic<int> g_ranks_per_host{0};  // 0: not told, ask the launcher's environment
std::atomic<int> g_threads{0};         // 0: not resolved yet

// The cores in this process's affinity mask (taskset, cgroups cpusets,
// mpirun --bind-to), which may be fewer than the machine has.
int affinity_cores() {
  for (int size = 1024; size <= 1 << 16; size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    const bool ok = sched_getaffinity(0, bytes, set) == 0;
    const int n = ok ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (ok) return n;
    // EINVAL: the kernel's mask is wider than `size` CPUs; retry wider.
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

// Launchers name the ranks on this host before MPI is up: Open MPI, then
// MPICH/Hydra. 1 when started without one.
int launcher_ranks_per_host() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(name)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  return 1;
}

// FSDPC_CPU_THREADS, when set: a positive integer, or fsdpc::Error.
int env_threads() {
  const char* env = std::getenv("FSDPC_CPU_THREADS");
  if (!env) return 0;
  const std::string text = env;
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || v < 1 || v > 4096)
    fail("FSDPC_CPU_THREADS='", text, "': expected a whole number of threads from 1 to 4096 (unset: the cores of this rank)");
  return static_cast<int>(v);
}

int resolve_threads() {
  if (const int n = env_threads()) return n;
  const int ranks = g_ranks_per_host.load() > 0 ? g_ranks_per_host.load() : launcher_ranks_per_host();
  return std::max(1, affinity_cores() / ranks);  // oversubscribed ranks get 1
}

}  // namespace

int cpu_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = resolve_threads();  // throws for a bad FSDPC_CPU_THREADS, every time it is asked
    g_threads.store(n);
  }
  return n;
}

void set_cpu_ranks_per_host(int ranks) {
  FSDPC_CHECK(ranks >= 1) << "ranks per host " << ranks;
  g_ranks_per_host.store(ranks);
  g_threads.store(0);
}

}  // namespace fsdpc
