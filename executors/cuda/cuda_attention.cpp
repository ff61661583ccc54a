// scaled_dot_product_attention on cuBLAS: per group of heads (a bounded
// score scratch, nn_plan.h) one strided-batched GEMM for the scores q·kᵀ
// into f32, the scaled and causally masked softmax of kernels/softmax.cu
// (in place for f32; into a bf16 copy for bf16 operands, which the second
// GEMM needs), and a strided-batched GEMM of the probabilities with v.
// Row-major [T, D] is column-major [D, T] to cuBLAS, so scoresᵀ = k·qᵀ is
// (kᵀ)ᵀ·(qᵀ) and outᵀ = vᵀ·pᵀ, with no transposed copies.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_kernels.h"
#include "executors/cuda/kernels/softmax.h"
#include "executors/cuda/nn_plan.h"

namespace fsdpc::cuda {

namespace {

// One cuBLAS handle per device and host thread (threads must not share a
// handle concurrently), created on first use and deliberately never
// destroyed: at thread or process exit the CUDA runtime may already be
// gone. The handle binds to the device current at creation.
cublasHandle_t cublas_handle(int device) {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  if (auto it = handles.find(device); it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  FSDPC_CUBLAS_CHECK(cublasCreate(&h));
  handles.emplace(device, h);
  return h;
}

// One column-major strided-batched GEMM, C = op(A)·op(B), f32 accumulation.
struct Gemm {
  cublasOperation_t op_a = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  cudaDataType_t a_type = CUDA_R_32F;
  int lda = 0;
  long long a_step = 0;
  const void* b = nullptr;
  cudaDataType_t b_type = CUDA_R_32F;
  int ldb = 0;
  long long b_step = 0;
  void* c = nullptr;
  cudaDataType_t c_type = CUDA_R_32F;
  int ldc = 0;
  long long c_step = 0;
  int batch = 0;
};

void run_gemm(cublasHandle_t h, const Gemm& g) {
  const float one = 1.0f, zero = 0.0f;
  FSDPC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, g.op_a, CUBLAS_OP_N, g.m, g.n, g.k, &one, g.a, g.a_type, g.lda,
                                                g.a_step, g.b, g.b_type, g.ldb, g.b_step, &zero, g.c, g.c_type,
                                                g.ldc, g.c_step, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

const char* at(const TensorView& v, int64_t elements, int64_t elem_size) {
  return static_cast<const char*>(v.data) + elements * elem_size;
}

// The attention of one group of `heads` matrices from h0: scores, softmax,
// times v. `scores` holds heads·Tq·Tk floats; `probs` the bf16 copy (or
// the scores themselves for f32).
struct Chunk {
  int64_t h0, heads;
};

void attend(cublasHandle_t h, cudaStream_t s, const AttentionPlan& p, const Views& in, const TensorView& out,
            bool bf, float scale, bool causal, float* scores, void* probs, Chunk ch) {
  const int64_t es = bf ? 2 : 4;
  const cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_32F;
  const auto heads = static_cast<int>(ch.heads), tq = static_cast<int>(p.tq), tk = static_cast<int>(p.tk);
  const auto d = static_cast<int>(p.d), dv = static_cast<int>(p.dv);
  if (p.d == 0) {
    // No features: every score is 0 (cuBLAS wants k >= 1 and a positive lda).
    FSDPC_CUDA_CHECK(cudaMemsetAsync(scores, 0, sizeof(float) * ch.heads * p.s_step, s));
  } else {
    run_gemm(h, Gemm{.op_a = CUBLAS_OP_T, .m = tk, .n = tq, .k = d,
                     .a = at(in[1], ch.h0 * p.k_step, es), .a_type = t, .lda = d, .a_step = p.k_step,
                     .b = at(in[0], ch.h0 * p.q_step, es), .b_type = t, .ldb = d, .b_step = p.q_step,
                     .c = scores, .c_type = CUDA_R_32F, .ldc = tk, .c_step = p.s_step, .batch = heads});
  }
  const SoftmaxRows sm{.rows = ch.heads * p.tq, .cols = p.tk, .scale = scale, .causal = causal,
                       .rows_per_matrix = p.tq};
  if (bf)
    launch_softmax_rows(scores, static_cast<__nv_bfloat16*>(probs), sm, s);
  else
    launch_softmax_rows(scores, scores, sm, s);
  run_gemm(h, Gemm{.op_a = CUBLAS_OP_N, .m = dv, .n = tq, .k = tk,
                   .a = at(in[2], ch.h0 * p.v_step, es), .a_type = t, .lda = dv, .a_step = p.v_step,
                   .b = probs, .b_type = t, .ldb = tk, .b_step = p.s_step,
                   .c = static_cast<char*>(out.data) + ch.h0 * p.o_step * es, .c_type = t, .ldc = dv,
                   .c_step = p.o_step, .batch = heads});
}

}  // namespace

FSDPC_CUDA_KERNEL(sdpa_kernel) {
  const DType dt = in[0].type->dtype;
  if (dt != DType::f32 && dt != DType::bf16)
    fail("cuda_scaled_dot_product_attention: q has dtype ", dtype_name(dt), "; expected f32 or bf16");
  for (size_t i = 1; i < 3; ++i)
    if (in[i].type->dtype != dt)
      fail("cuda_scaled_dot_product_attention: ", i == 1 ? "k" : "v", " has dtype ",
           dtype_name(in[i].type->dtype), " but q has ", dtype_name(dt), "; expected the same");
  if (out[0].type->dtype != dt)
    fail("cuda_scaled_dot_product_attention: the output has dtype ", dtype_name(out[0].type->dtype),
         " but q has ", dtype_name(dt));
  const AttentionPlan p =
      plan_attention(in[0].type->shape, in[1].type->shape, in[2].type->shape, kAttentionScoreFloats);
  if (p.empty()) return;
  if (!p.fits_int)
    fail("cuda_scaled_dot_product_attention: q ", type_str(*in[0].type), ", k ", type_str(*in[1].type), ", v ",
         type_str(*in[2].type), " have a dimension beyond cuBLAS's int range");
  const bool bf = dt == DType::bf16;
  const int64_t es = bf ? 2 : 4;
  CudaContext& c = cuda_context(ctx);
  const cudaStream_t s = c.compute();
  if (p.tk == 0) {  // no keys: nothing is attended, the output is 0 (as the reference's)
    FSDPC_CUDA_CHECK(cudaMemsetAsync(out[0].data, 0, static_cast<size_t>(p.batch * p.o_step * es), s));
    return;
  }
  const bool causal = b.attrs.get_bool_or("is_causal", false);
  const auto scale =
      static_cast<float>(b.attrs.get_double_or("scale", 1.0 / std::sqrt(static_cast<double>(p.d))));

  int current = -1;
  FSDPC_CUDA_CHECK(cudaGetDevice(&current));
  FSDPC_CHECK(current == c.device()) << "attention on device " << c.device() << " while " << current
                                     << " is current";
  cublasHandle_t h = cublas_handle(c.device());
  FSDPC_CUBLAS_CHECK(cublasSetStream(h, s));
  FSDPC_CUBLAS_CHECK(cublasSetMathMode(h, c.allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));

  // Scores (f32) and, for bf16, the probabilities the second GEMM reads,
  // 256-byte aligned, from the rank's scratch (accounted as activations; at
  // most kAttentionScoreFloats floats, or one matrix's).
  const size_t score_bytes = (sizeof(float) * static_cast<size_t>(p.group * p.s_step) + 255) / 256 * 256;
  const size_t prob_bytes = bf ? sizeof(__nv_bfloat16) * static_cast<size_t>(p.group * p.s_step) : 0;
  const std::shared_ptr<void> held = c.scratch(score_bytes + prob_bytes);
  void* scratch = held.get();
  auto* scores = static_cast<float*>(scratch);
  void* probs = bf ? static_cast<void*>(static_cast<char*>(scratch) + score_bytes) : scratch;
  for (int64_t h0 = 0; h0 < p.batch; h0 += p.group)
    attend(h, s, p, in, out[0], bf, scale, causal, scores, probs, {h0, std::min(p.group, p.batch - h0)});
}

}  // namespace fsdpc::cuda
