// The CPU executor ("cpu"): float32 kernels for every compute op, the six
// composites and pack/unpack. matmul, linear, attention's matmuls, softmax,
// gelu, exp and tanh run on oneDNN; the rest are loops the compiler
// vectorises (layer_norm too: its double statistics are more accurate).
#pragma once

#include <string>

#include "executors/executor.h"

namespace fsdpc {

// Claims every op the CPU runs whole when its dtypes are supported (float math
// in f32; indices i32/i64; comparisons and where over bool; conversions among
// f32, f64, i32, i64 and bool) and its tensors live on the CPU. Never claims
// synchronize, the collectives, wait or del.
//
// Threads: a process runs one rank on one core, so the kernels are
// single-threaded and oneDNN is held to one OpenMP thread on every thread
// that calls a kernel (omp_set_num_threads(1), whatever OMP_NUM_THREADS says;
// Debian's libdnnl uses OpenMP). FSDPC_CPU_THREADS=N gives oneDNN N threads
// instead, for a single process on a many-core machine. Kernels of one
// process must not run concurrently: they share one oneDNN stream.
const Executor& cpu_executor();

// "oneDNN 2.6.3 (OpenMP, 1 thread)": what the matmuls run on, for benchmarks
// and logs.
std::string cpu_backend_info();

}  // namespace fsdpc
