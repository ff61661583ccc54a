// The reductions the MPI executor runs: MPI_SUM and MPI_MAX for the dtypes
// MPI can add (f32, f64, i64, i32), and user-defined MPI_Ops for bf16 and f16,
// which MPI has no datatype for (they travel as MPI_UINT16_T).
//
// Each bf16 (f16) op combines two values the way NCCL's bf16 reductions do:
// both widened to f32 (exact), summed (or compared) in f32, the result
// rounded once to bf16 (f16), to nearest, ties to even (executors/bf16.h).
// A sum is thus rounded at every pairwise combination, not once at the end,
// so its bits depend on which partial sums are combined: the order below.
// (f32's 24 significand bits are at least 2p + 2 for bf16's p = 8 and f16's
// p = 11, so rounding twice gives the correctly rounded sum of the two.) max
// is exact; a NaN on either side wins (the lower rank's when both are), and
// +0 wins over -0.
//
// The order. MPI assumes every op is associative, so how partial results are
// grouped is the implementation's. With Open MPI (4.1; coll/libnbc runs the
// non-blocking collectives the executor issues) it is one binomial tree over
// the group's ranks: in round r = 1, 2, ... each rank k with k % 2^r == 0
// that has a partner k + 2^(r-1) in the group computes
//     acc[k] = acc[k] (+) acc[k + 2^(r-1)]      (lower rank on the left)
// and rank 0's acc is the result, broadcast (all_reduce) or scattered in
// blocks (reduce_scatter), so every rank gets the same bytes. With x_i the
// input of the group's rank i:
//     2 ranks: x0 (+) x1
//     3 ranks: (x0 (+) x1) (+) x2
//     4 ranks: (x0 (+) x1) (+) (x2 (+) x3)
//     8 ranks: ((x0 (+) x1) (+) (x2 (+) x3)) (+) ((x4 (+) x5) (+) (x6 (+) x7))
// MPI_Ireduce_scatter_block always does this. MPI_Iallreduce does it for
// every size only because the ops are created non-commutative: a
// commutative op of 64 KiB or more on 4 ranks or more gets Rabenseifner's
// algorithm instead, whose grouping and operand order per block are its own
// (a probe found it grouping like the tree on 4 ranks, but nothing promises
// that). test/mpi/collectives_mpi_test.cpp checks these bits at 2, 3 and 4
// ranks, under and over 64 KiB. Forcing a libnbc algorithm by MCA parameter
// (coll_libnbc_iallreduce_algorithm) may change the grouping. The price: a
// tree sends the whole tensor log2(p) times up and down, where a ring would
// send about twice its size; bf16 halves the bytes anyway.
#pragma once

#include <mpi.h>

#include "ir/types.h"

namespace fsdpc {

enum class MpiReduction { sum, max };

// Whether the MPI executor reduces tensors of `d`: f32, f64, i64, i32, bf16,
// and f16 where the compiler has _Float16 (GCC and Clang on x86-64 and
// AArch64).
bool mpi_reduces(DType d);
// The list above, for messages: "f32, f64, i64, i32, bf16 and f16".
const char* mpi_reducible_dtypes();

// The MPI_Op that reduces `d` with `r`: MPI_SUM or MPI_MAX where MPI has the
// type, ours (created by mpi_init()) for bf16 and f16. `d` must be one
// mpi_reduces() admits (FSDPC_CHECK).
MPI_Op mpi_reduce_op(DType d, MpiReduction r);

namespace detail {
// Called once by mpi_init(), with MPI initialized: creates the bf16 and f16
// ops, and registers their MPI_Op_free to run at the start of MPI_Finalize
// (as the delete callback of an attribute on MPI_COMM_SELF, which MPI
// deletes first thing in MPI_Finalize, whoever calls it).
void create_mpi_reduce_ops();
}  // namespace detail

}  // namespace fsdpc
