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
// Threads: each rank's kernels (oneDNN's, and the loops of the others over
// large tensors) run on cpu_threads() OpenMP threads; oneDNN is held to that
// count on every thread that calls a kernel, whatever OMP_NUM_THREADS says.
// Results depend on the thread count only where oneDNN's do (a gemm may
// split its sums by thread): the executor's own loops split over elements
// and rows, never inside one sum. Kernels of one process must not run
// concurrently: they share one oneDNN stream.
const Executor& cpu_executor();

// The threads of this rank: FSDPC_CPU_THREADS when set (fsdpc::Error unless
// a whole number from 1 to 4096), else the cores in the process's affinity
// mask divided by the ranks on this host, at least 1, so ranks that
// oversubscribe the cores get one thread each.
int cpu_threads();
// The ranks sharing this host (the engine asks MPI: MPI_COMM_TYPE_SHARED).
// Until told, the launcher's OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS
// is used, else 1.
void set_cpu_ranks_per_host(int ranks);

// "oneDNN 2.6.3 (OpenMP, 1 thread)": what the matmuls run on, for benchmarks
// and logs.
std::string cpu_backend_info();

// "bf16 matmuls on oneDNN's brg:avx512_core_bf16 (ISA avx512_core_bf16)":
// the kernel oneDNN picks for bf16 products on this CPU (detected at run
// time; ONEDNN_MAX_CPU_ISA caps it). Without AVX-512 it is oneDNN's
// reference kernel, and the line says so.
std::string cpu_bf16_matmul_info();

}  // namespace fsdpc
