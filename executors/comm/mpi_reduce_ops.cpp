// The bf16 and f16 MPI_Ops: mpi_reduce_ops.h says what they compute, and in
// which order MPI applies them.
#include "executors/comm/mpi_reduce_ops.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "executors/bf16.h"
#include "executors/comm/mpi_check.h"
#include "executors/comm/world.h"
#include "ir/error.h"

// GCC and Clang define the _Float16 macros where they have the type.
#if defined(__FLT16_MANT_DIG__)
#define FSDPC_MPI_F16 1
#else
#define FSDPC_MPI_F16 0
#endif

namespace fsdpc {
namespace {

// A 2-byte float widened to f32 (exact) and an f32 rounded back to it (to
// nearest, ties to even; a NaN stays a quiet NaN).
// `quiet` is the top significand bit, set in a quiet NaN.
struct Bf16 {
  static constexpr uint16_t quiet = 0x0040;
  static float widen(uint16_t h) { return bf16_to_f32(h); }
  static uint16_t narrow(float f) { return f32_to_bf16(f); }
};
#if FSDPC_MPI_F16
struct F16 {
  static constexpr uint16_t quiet = 0x0200;
  static float widen(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
  static uint16_t narrow(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
};
#endif

template <class T>
uint16_t sum_of(uint16_t a, uint16_t b) {
  return T::narrow(T::widen(a) + T::widen(b));
}

// Exact; NaN wins (a's when both are, quieted, its payload kept), +0 wins
// over -0. The NaN is quieted by its bits: GCC folds narrow(widen(a)) for
// f16 to `a`, which would keep a signalling NaN.
template <class T>
uint16_t max_of(uint16_t a, uint16_t b) {
  const float x = T::widen(a), y = T::widen(b);
  if (std::isnan(x)) return a | T::quiet;
  if (std::isnan(y)) return b | T::quiet;
  if (x == y) return a & b;  // the same bits, or +0 and -0: -0 only when both are
  return x > y ? a : b;
}

// An MPI_User_function: inout[i] = in[i] (+) inout[i], where MPI passes the
// lower rank's partial result as `in` (mpi_reduce_ops.h). Called inside MPI,
// which cannot unwind an exception: a type other than the MPI_UINT16_T the
// executor sends is a bug, and aborts.
template <uint16_t (*Combine)(uint16_t, uint16_t)>
void combine(void* in, void* inout, int* len, MPI_Datatype* type) {
  FSDPC_CHECK(*type == MPI_UINT16_T) << "fsdpc's bf16/f16 MPI_Op applied to a datatype other than MPI_UINT16_T";
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = Combine(a[i], b[i]);
}

// [bf16, f16][sum, max]; MPI_OP_NULL until created, and again once freed.
MPI_Op g_ops[2][2] = {{MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL}};

int slot(DType d) { return d == DType::bf16 ? 0 : 1; }
int slot(MpiReduction r) { return r == MpiReduction::sum ? 0 : 1; }

// MPI_COMM_SELF's attribute is deleted at the start of MPI_Finalize.
int free_ops(MPI_Comm, int, void*, void*) {
  for (auto& row : g_ops)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL) FSDPC_MPI_CHECK(MPI_Op_free(&op));  // sets op to MPI_OP_NULL
  return MPI_SUCCESS;
}

}  // namespace

bool mpi_reduces(DType d) {
  switch (d) {
    case DType::f32:
    case DType::f64:
    case DType::i64:
    case DType::i32:
    case DType::bf16: return true;
    case DType::f16: return FSDPC_MPI_F16 != 0;
    default: return false;
  }
}

const char* mpi_reducible_dtypes() {
  return FSDPC_MPI_F16 ? "f32, f64, i64, i32, bf16 and f16"
                       : "f32, f64, i64, i32 and bf16 (f16 needs a compiler with _Float16)";
}

MPI_Op mpi_reduce_op(DType d, MpiReduction r) {
  FSDPC_CHECK(mpi_reduces(d)) << "MPI does not reduce " << dtype_name(d);
  if (d != DType::bf16 && d != DType::f16) return r == MpiReduction::sum ? MPI_SUM : MPI_MAX;
  mpi_init();
  const MPI_Op op = g_ops[slot(d)][slot(r)];
  FSDPC_CHECK(op != MPI_OP_NULL) << "the " << dtype_name(d) << " MPI_Ops are not created, or already freed";
  return op;
}

namespace detail {

void create_mpi_reduce_ops() {
  FSDPC_CHECK(g_ops[0][0] == MPI_OP_NULL) << "the bf16/f16 MPI_Ops are created once per process";
  // Non-commutative: the order is then one binomial tree for every size
  // (mpi_reduce_ops.h).
  constexpr int kCommute = 0;
  FSDPC_MPI_CHECK(MPI_Op_create(combine<sum_of<Bf16>>, kCommute, &g_ops[0][0]));
  FSDPC_MPI_CHECK(MPI_Op_create(combine<max_of<Bf16>>, kCommute, &g_ops[0][1]));
#if FSDPC_MPI_F16
  FSDPC_MPI_CHECK(MPI_Op_create(combine<sum_of<F16>>, kCommute, &g_ops[1][0]));
  FSDPC_MPI_CHECK(MPI_Op_create(combine<max_of<F16>>, kCommute, &g_ops[1][1]));
#endif
  // Freed at MPI_Finalize, ours (atexit) or that of whoever initialized MPI.
  // The keyval is released at once; the attribute keeps it until deleted.
  int keyval = MPI_KEYVAL_INVALID;
  FSDPC_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_ops, &keyval, nullptr));
  FSDPC_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr));
  FSDPC_MPI_CHECK(MPI_Comm_free_keyval(&keyval));
}

}  // namespace detail

}  // namespace fsdpc
