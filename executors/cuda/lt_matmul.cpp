// GEMM planning (pure host code) and its execution on cuBLASLt, with the
// descriptors and the heuristic's algorithm cached per problem, since the
// heuristic query costs far more than the launch it chooses for.
#include "executors/cuda/lt_matmul.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "executors/cuda/cuda_check.h"
#include "executors/cuda/cuda_context.h"
#include "ir/error.h"

namespace fsdpc::cuda {

int64_t GemmPlan::calls() const {
  int64_t c = 1;
  for (const OuterLoop& l : outer) c *= l.count;
  return c;
}

bool GemmPlan::empty() const { return m == 0 || n == 0 || batch == 0 || calls() == 0; }

namespace {

// One batch dim after broadcasting: its size and each operand's step.
struct BatchDim {
  int64_t size = 1;
  int64_t sa = 0, sb = 0, sc = 0;
};

// Batch dims of a and b (right-aligned, size 1 broadcasts) with contiguous
// steps, outermost first; fills out's batch part.
std::vector<BatchDim> broadcast_batch(const Shape& a, const Shape& b, const GemmPlan& p, Shape& out) {
  const size_t ra = a.size() - 2, rb = b.size() - 2, r = std::max(ra, rb);
  std::vector<BatchDim> dims(r);
  int64_t step_a = p.m * p.k, step_b = p.k * p.n, step_c = p.m * p.n;
  out.assign(r, 1);
  for (size_t i = r; i-- > 0;) {
    const int64_t da = i + ra >= r ? a[i + ra - r] : 1;
    const int64_t db = i + rb >= r ? b[i + rb - r] : 1;
    FSDPC_CHECK(da == db || da == 1 || db == 1)
        << "matmul batch dims do not broadcast: " << shape_str(a) << " and " << shape_str(b);
    const int64_t size = da == 1 ? db : da;
    dims[i] = {size, da == 1 ? 0 : step_a, db == 1 ? 0 : step_b, step_c};
    step_a *= da;
    step_b *= db;
    step_c *= size;
    out[i] = size;
  }
  return dims;
}

// Drops size-1 dims and merges a dim into the one outside it when every
// operand steps over both as over one (broadcast dims merge too: 0 = 0 * n).
std::vector<BatchDim> merge_batch(const std::vector<BatchDim>& dims) {
  std::vector<BatchDim> merged;
  for (const BatchDim& d : dims) {
    if (d.size == 1) continue;
    if (!merged.empty()) {
      BatchDim& o = merged.back();
      if (o.sa == d.sa * d.size && o.sb == d.sb * d.size && o.sc == d.sc * d.size) {
        o = {o.size * d.size, d.sa, d.sb, d.sc};
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

}  // namespace

GemmPlan plan_matmul(const Shape& a, const Shape& b, bool trans_a, bool trans_b) {
  FSDPC_CHECK(a.size() >= 2 && b.size() >= 2)
      << "matmul operands must be at least 2-D: " << shape_str(a) << " and " << shape_str(b);
  const size_t ra = a.size(), rb = b.size();
  GemmPlan p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.m = trans_a ? a[ra - 1] : a[ra - 2];
  p.k = trans_a ? a[ra - 2] : a[ra - 1];
  p.n = trans_b ? b[rb - 2] : b[rb - 1];
  const int64_t kb = trans_b ? b[rb - 1] : b[rb - 2];
  FSDPC_CHECK(p.k == kb) << "matmul inner dims differ: " << shape_str(a) << (trans_a ? "^T" : "") << " and "
                         << shape_str(b) << (trans_b ? "^T" : "");
  p.lda = a[ra - 1];
  p.ldb = b[rb - 1];
  p.ldc = p.n;

  const std::vector<BatchDim> dims = merge_batch(broadcast_batch(a, b, p, p.out));
  p.out.push_back(p.m);
  p.out.push_back(p.n);
  for (const BatchDim& d : dims)
    if (d.size == 0) {  // no entries: nothing to run, nothing to loop over
      p.batch = 0;
      return p;
    }
  if (dims.empty()) return p;  // one matrix product

  // The innermost dim is cuBLASLt's batch; the rest are host loops. Only
  // IR-illegal broadcasts (or > 2^31 entries) ever leave a loop.
  const BatchDim& inner = dims.back();
  const size_t loops = dims.size() - (inner.size <= kMaxLtBatch ? 1 : 0);
  for (size_t i = 0; i < loops; ++i) p.outer.push_back({dims[i].size, dims[i].sa, dims[i].sb, dims[i].sc});
  if (loops == dims.size()) return p;
  p.batch = inner.size;
  p.stride_a = inner.sa;
  p.stride_b = inner.sb;
  p.stride_c = inner.sc;

  // A shared right operand over row blocks of a and c that follow each
  // other in memory: the batch is just more rows.
  const bool fold = p.outer.empty() && p.stride_b == 0 && !trans_a && p.stride_a == p.m * p.k &&
                    p.stride_c == p.m * p.n && p.batch * p.m <= kMaxLtBatch;
  if (fold) {
    p.m *= p.batch;
    p.batch = 1;
    p.stride_a = p.stride_c = 0;
  }
  return p;
}

GemmPlan plan_linear(const Shape& x, const Shape& w, bool has_bias) {
  FSDPC_CHECK(!x.empty() && w.size() == 2 && x.back() == w[1])
      << "linear shapes do not fit: x " << shape_str(x) << ", w " << shape_str(w);
  GemmPlan p;
  p.m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) p.m *= x[i];
  p.k = x.back();
  p.n = w[0];
  p.trans_b = true;  // w [out, in] is B^T stored row-major
  p.lda = p.k;
  p.ldb = p.k;
  p.ldc = p.n;
  p.bias = has_bias;
  p.out.assign(x.begin(), x.end() - 1);
  p.out.push_back(p.n);
  return p;
}

LtProblem lt_problem(const GemmPlan& p) {
  FSDPC_CHECK(p.batch >= 0 && p.batch <= kMaxLtBatch) << "batch " << p.batch << " out of cuBLASLt's range";
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  LtProblem lt;
  // Row-major B [k, n] is column-major [n, k]: already op(A) of C^T = B^T A^T;
  // stored [n, k] it reads as [k, n] and needs a transpose.
  lt.a = p.trans_b ? LtMatrix{u(p.k), u(p.n), p.ldb, p.stride_b, true}
                   : LtMatrix{u(p.n), u(p.k), p.ldb, p.stride_b, false};
  lt.b = p.trans_a ? LtMatrix{u(p.m), u(p.k), p.lda, p.stride_a, true}
                   : LtMatrix{u(p.k), u(p.m), p.lda, p.stride_a, false};
  lt.d = LtMatrix{u(p.n), u(p.m), p.ldc, p.stride_c, false};
  lt.batch = static_cast<int32_t>(p.batch);
  return lt;
}

uint32_t lt_alignment(const void* ptr, int64_t elem_bytes, const std::vector<int64_t>& element_steps) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr);
  for (int64_t s : element_steps) bits |= static_cast<uint64_t>(s * elem_bytes);
  uint32_t align = 256;
  while (align > 1 && bits % align != 0) align /= 2;
  return align;
}

namespace {

// Everything the descriptors and the heuristic's choice depend on. Pointer
// alignments are in it because the chosen algorithm may require them.
struct LtKey {
  int64_t m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
  bool trans_a, trans_b, bias, tf32;
  DType dtype, out_dtype;
  uint32_t align_a, align_b, align_c, align_bias;
  int device;
  size_t workspace;
  bool operator==(const LtKey&) const = default;
};

struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.batch, k.stride_a, k.stride_b, k.stride_c})
      mix(static_cast<uint64_t>(v));
    mix(uint64_t{k.trans_a} | uint64_t{k.trans_b} << 1 | uint64_t{k.bias} << 2 | uint64_t{k.tf32} << 3);
    mix(static_cast<uint64_t>(k.dtype) | static_cast<uint64_t>(k.out_dtype) << 8);
    mix(uint64_t{k.align_a} | uint64_t{k.align_b} << 16 | uint64_t{k.align_c} << 32 | uint64_t{k.align_bias} << 48);
    mix(static_cast<uint64_t>(k.device));
    mix(k.workspace);
    return static_cast<size_t>(h);
  }
};

struct LtEntry {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A, B and C = D
  cublasLtMatmulAlgo_t algo{};
};

// Per process, never destroyed: descriptors are small host objects, and
// destroying them from a static destructor could run after cuBLASLt's own
// teardown. The mutex also covers the per-call bias pointer on a cached
// descriptor and the launch that reads it.
struct LtCache {
  std::mutex mu;
  std::unordered_map<LtKey, LtEntry, LtKeyHash> entries;
};

LtCache& lt_cache() {
  static LtCache* cache = new LtCache;
  return *cache;
}

cudaDataType_t lt_type(DType d) {
  FSDPC_CHECK(d == DType::f32 || d == DType::bf16) << "cuBLASLt matmul on " << dtype_name(d);
  return d == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
}

cublasLtMatrixLayout_t make_layout(const LtMatrix& m, cudaDataType_t type, int32_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  FSDPC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, m.rows, m.cols, m.ld));
  if (batch > 1) {
    const int64_t stride = m.batch_stride;  // 0: the same matrix for every entry
    FSDPC_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    FSDPC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                        &stride, sizeof stride));
  }
  return layout;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  FSDPC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  FSDPC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
}

LtEntry make_entry(CudaContext& ctx, const GemmPlan& plan, const LtKey& key, const void* bias) {
  const LtProblem lt = lt_problem(plan);
  const cudaDataType_t type = lt_type(key.dtype), out_type = lt_type(key.out_dtype);
  LtEntry e;
  const cublasComputeType_t compute = key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FSDPC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&e.desc, compute, CUDA_R_32F));
  set_desc<int32_t>(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, lt.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc<int32_t>(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, lt.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (plan.bias) {
    // bias[n] runs along D's rows (n x m column-major): one value per
    // output feature, the same for every batch entry (batch stride 0).
    set_desc<uint32_t>(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc<int32_t>(e.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, out_type);
    // The heuristic reads the pointer's alignment from it.
    set_desc<const void*>(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  e.a = make_layout(lt.a, type, lt.batch);
  e.b = make_layout(lt.b, type, lt.batch);
  e.d = make_layout(lt.d, out_type, lt.batch);

  cublasLtMatmulPreference_t pref = nullptr;
  FSDPC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  set_pref<uint64_t>(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, key.workspace);
  // cuBLASLt's A is our B and its B our A.
  set_pref<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_pref<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_pref<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  set_pref<uint32_t>(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(ctx.lt(), e.desc, e.a, e.b, e.d, e.d, pref, 1, &result, &found);
  FSDPC_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  // NOT_SUPPORTED means no algorithm: say which problem had none.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) FSDPC_CUBLAS_CHECK(status);
  FSDPC_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS)
      << "cuBLASLt has no algorithm for " << dtype_name(key.dtype) << " -> " << dtype_name(key.out_dtype) << " C[" << plan.m << ", " << plan.n
      << "] = A" << (plan.trans_a ? "^T" : "") << " B" << (plan.trans_b ? "^T" : "") << " (k " << plan.k
      << ", batch " << plan.batch << (plan.bias ? ", bias" : "") << ", alignments " << key.align_a << "/"
      << key.align_b << "/" << key.align_c << " bytes)";
  e.algo = result.algo;
  return e;
}

// K = 0: C = 0 (+ bias on every row). The output is contiguous (the
// planners make it so): zero it, or copy the bias to row 0 and double the
// filled rows until all are, log2(rows) copies on the stream.
void fill_empty_product(const GemmPlan& plan, const void* bias, void* c, DType dtype, cudaStream_t stream) {
  const int64_t elem = dtype_size(dtype);
  const int64_t rows = numel(plan.out) / plan.n;
  auto* out = static_cast<char*>(c);
  if (!bias) {
    FSDPC_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(rows * plan.n * elem), stream));
    return;
  }
  const size_t row_bytes = static_cast<size_t>(plan.n * elem);
  FSDPC_CUDA_CHECK(cudaMemcpyAsync(out, bias, row_bytes, cudaMemcpyDeviceToDevice, stream));
  for (int64_t done = 1; done < rows;) {
    const int64_t count = std::min(done, rows - done);
    FSDPC_CUDA_CHECK(cudaMemcpyAsync(out + done * row_bytes, out, count * row_bytes, cudaMemcpyDeviceToDevice,
                                     stream));
    done += count;
  }
}

// The outer loops' element offsets of call `index` (outermost loop first,
// the last one fastest, as a row-major index).
void outer_offsets(const GemmPlan& plan, int64_t index, int64_t& off_a, int64_t& off_b, int64_t& off_c) {
  off_a = off_b = off_c = 0;
  for (size_t i = plan.outer.size(); i-- > 0;) {
    const OuterLoop& l = plan.outer[i];
    const int64_t j = index % l.count;
    index /= l.count;
    off_a += j * l.step_a;
    off_b += j * l.step_b;
    off_c += j * l.step_c;
  }
}

}  // namespace

void lt_matmul(CudaContext& ctx, const GemmPlan& plan, const void* a, const void* b, const void* bias, void* c,
               DType dtype, DType out_dtype) {
  FSDPC_CHECK((bias != nullptr) == plan.bias) << "lt_matmul: bias pointer and plan disagree";
  lt_type(dtype);  // rejects other dtypes before any work
  lt_type(out_dtype);
  FSDPC_CHECK(out_dtype == dtype || out_dtype == DType::f32)
      << "lt_matmul: " << dtype_name(dtype) << " operands into " << dtype_name(out_dtype);
  FSDPC_CHECK(plan.beta == 0.0f || plan.beta == 1.0f) << "lt_matmul: beta " << plan.beta << " (0 or 1)";
  FSDPC_CHECK(plan.beta == 0.0f || !plan.bias) << "lt_matmul: a bias added into an accumulating product";
  if (plan.empty()) return;
  if (plan.k == 0 && plan.beta != 0.0f) return;  // C + 0
  if (plan.k == 0) {
    FSDPC_CHECK(plan.ldc == plan.n) << "lt_matmul: an empty product into a strided output";
    fill_empty_product(plan, bias, c, out_dtype, ctx.compute());
    return;
  }
  const int64_t elem = dtype_size(dtype), out_elem = dtype_size(out_dtype);
  std::vector<int64_t> steps_a{plan.stride_a}, steps_b{plan.stride_b}, steps_c{plan.stride_c};
  for (const OuterLoop& l : plan.outer) {
    steps_a.push_back(l.step_a);
    steps_b.push_back(l.step_b);
    steps_c.push_back(l.step_c);
  }
  const LtKey key{.m = plan.m, .n = plan.n, .k = plan.k,
                  .lda = plan.lda, .ldb = plan.ldb, .ldc = plan.ldc,
                  .batch = plan.batch, .stride_a = plan.stride_a, .stride_b = plan.stride_b, .stride_c = plan.stride_c,
                  .trans_a = plan.trans_a, .trans_b = plan.trans_b, .bias = plan.bias,
                  .tf32 = dtype == DType::f32 && ctx.allow_tf32(),
                  .dtype = dtype,
                  .out_dtype = out_dtype,
                  .align_a = lt_alignment(a, elem, steps_a),
                  .align_b = lt_alignment(b, elem, steps_b),
                  .align_c = lt_alignment(c, out_elem, steps_c),
                  .align_bias = bias ? lt_alignment(bias, out_elem, {}) : 0u,
                  .device = ctx.device(),
                  .workspace = ctx.workspace_bytes()};

  LtCache& cache = lt_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.entries.find(key);
  if (it == cache.entries.end()) it = cache.entries.emplace(key, make_entry(ctx, plan, key, bias)).first;
  LtEntry& e = it->second;
  if (bias) set_desc<const void*>(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);

  // beta is a host scalar of the call, not of the descriptor: the cached
  // algorithm serves both (C and D are the same matrix either way).
  const float alpha = plan.alpha, beta = plan.beta;
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  auto* pc = static_cast<char*>(c);
  for (int64_t call = 0, calls = plan.calls(); call < calls; ++call) {
    int64_t off_a = 0, off_b = 0, off_c = 0;
    outer_offsets(plan, call, off_a, off_b, off_c);
    void* out = pc + off_c * out_elem;
    // C^T = B^T A^T: our b is cuBLASLt's A, our a its B; C is D.
    FSDPC_CUBLAS_CHECK(cublasLtMatmul(ctx.lt(), e.desc, &alpha, pb + off_b * elem, e.a, pa + off_a * elem, e.b,
                                      &beta, out, e.d, out, e.d, &e.algo, ctx.workspace(), ctx.workspace_bytes(),
                                      ctx.compute()));
  }
}

}  // namespace fsdpc::cuda
