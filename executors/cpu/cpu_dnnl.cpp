// oneDNN for the CPU executor: one engine and one stream created once, a
// primitive cache keyed by shape and attributes, the OpenMP threads of this
// rank (cpu_threads.cpp), and the gemm / eltwise / softmax calls the kernel
// families share.
#include "executors/cpu/cpu_dnnl.h"

#include "executors/bf16.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "executors/cpu/cpu_executor.h"
#include "executors/cpu/cpu_kernels.h"
#include "ir/error.h"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

namespace fsdpc::cpu {

namespace {

struct KeyHash {
  size_t operator()(const PrimKey& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the integers
    for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mu;  // guards the cache; kernels themselves run one at a time
  std::unordered_map<PrimKey, CachedPrimitive, KeyHash> cache;
};

// OpenMP's thread count is an ICV of the calling thread, and oneDNN sizes
// its work split by it when a primitive is created and when it runs, so
// every thread that builds or runs a primitive sets it, again whenever the
// count changed (the engine learns the ranks per host after the first
// kernels may have run). With one thread libgomp starts no workers: nothing
// spins beside MPI's progress.
void pin_threads() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  thread_local int pinned = 0;
  const int n = cpu_threads();
  if (pinned != n) {
    omp_set_num_threads(n);
    pinned = n;
  }
#endif
}

CachedPrimitive just(dnnl::primitive p) {
  CachedPrimitive c;
  c.primitive = std::move(p);
  return c;
}

DnnlState& state() {
  pin_threads();
  static DnnlState s;
  return s;
}

}  // namespace

dnnl::engine& dnnl_engine() { return state().engine; }

int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

CachedPrimitive& cached_primitive(const PrimKey& key, const std::function<CachedPrimitive()>& make) {
  DnnlState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.cache.find(key);
  if (it == s.cache.end()) it = s.cache.emplace(key, make()).first;
  return it->second;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* data) {
  return dnnl::memory(md, dnnl_engine(), const_cast<void*>(data));
}

dnnl::memory::data_type dnnl_type(DType d) {
  if (d == DType::f32) return dnnl::memory::data_type::f32;
  FSDPC_CHECK(d == DType::bf16) << "oneDNN is called with f32 or bf16, not " << dtype_name(d);
  return dnnl::memory::data_type::bf16;
}

dnnl::memory::desc desc_of(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides, DType d) {
  return dnnl::memory::desc(dims, dnnl_type(d), strides);
}

dnnl::memory::desc desc_of(const dnnl::memory::dims& dims, DType d) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return desc_of(dims, strides, d);
}

dnnl::memory::desc f32_desc(const dnnl::memory::dims& dims) { return desc_of(dims, DType::f32); }

void execute(dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  DnnlState& s = state();
  p.execute(s.stream, args);
  s.stream.wait();
}

void eltwise(dnnl::algorithm alg, float alpha, float beta, const float* src, float* dst, int64_t n) {
  if (n == 0) return;
  const dnnl::memory::desc md = f32_desc({n});
  const PrimKey key{int64_t(PrimTag::eltwise), int64_t(alg), float_bits(alpha), float_bits(beta), n};
  dnnl::primitive& p = cached_primitive(key, [&] {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
    return just(dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, dnnl_engine())));
  }).primitive;
  execute(p, {{DNNL_ARG_SRC, wrap(md, src)}, {DNNL_ARG_DST, wrap(md, dst)}});
}

namespace {

// From this many rows on, a gemm packs its right operand into oneDNN's
// blocked layout first: the pack is one pass over b, paid back by faster
// inner kernels (2x for a weight gradient, K = tokens); below it the pass
// costs more than it saves. Measured on AVX-512 with sgemm_bench's shapes.
constexpr int64_t kPackRows = 512;

// [batch, rows, cols] with these strides. A single entry is described in
// 2-D: oneDNN picks faster kernels for it (+15-20% on a weight gradient).
dnnl::memory::desc batched_desc(int64_t batch, int64_t rows, int64_t cols, int64_t step, int64_t row_stride,
                                int64_t col_stride, DType d) {
  if (batch == 1) return desc_of({rows, cols}, {row_stride, col_stride}, d);
  return desc_of({batch, rows, cols}, {step, row_stride, col_stride}, d);
}

CachedPrimitive make_gemm(const Gemm& g, const dnnl::memory::desc& a_md, const dnnl::memory::desc& b_md,
                          const dnnl::memory::desc* bias_md, const dnnl::memory::desc& c_md, int64_t m) {
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (g.scale != 1.0f) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, g.scale, 0.0f);
  if (g.accumulate) ops.append_sum(1.0f);  // after the scale: c's old value is added unscaled
  if (ops.len() > 0) attr.set_post_ops(ops);
  const dnnl::memory::desc want_b =
      m >= kPackRows ? dnnl::memory::desc(b_md.dims(), b_md.data_type(), dnnl::memory::format_tag::any)
                     : b_md;
  const dnnl::matmul::desc d =
      bias_md ? dnnl::matmul::desc(a_md, want_b, *bias_md, c_md) : dnnl::matmul::desc(a_md, want_b, c_md);
  const dnnl::matmul::primitive_desc pd(d, attr, dnnl_engine());
  CachedPrimitive c = just(dnnl::matmul(pd));
  if (pd.weights_desc() != b_md) {
    c.weights_desc = pd.weights_desc();
    const dnnl::reorder::primitive_desc pack(dnnl_engine(), b_md, dnnl_engine(), c.weights_desc);
    c.weights_reorder = dnnl::reorder(pack);
  }
  return c;
}

}  // namespace

void gemm(const Gemm& g, const void* a, const void* b, const void* bias, void* c) {
  FSDPC_CHECK(g.batched_b || (g.a_step == 0 && g.c_step == 0)) << "a shared-b gemm folds packed rows";
  // A shared right operand folds the batch into the rows: one bigger gemm.
  // A transposed a cannot fold (its rows are not contiguous): b is then
  // broadcast over the batch, a [1, k, n] operand.
  const bool fold_rows = !g.batched_b && !g.a_transposed;
  const int64_t batch = fold_rows ? 1 : g.batch, m = fold_rows ? g.batch * g.m : g.m;
  const int64_t k = g.k, n = g.n;
  const bool broadcast_b = !g.batched_b && batch > 1;
  const int64_t sa = g.a_step ? g.a_step : m * k, sb = g.b_step ? g.b_step : k * n;
  const int64_t sc = g.c_step ? g.c_step : m * n;
  if (batch == 0 || m == 0 || n == 0) return;
  FSDPC_CHECK(g.out == g.bias) << "a gemm's bias has its output's dtype";
  if (k == 0) {  // an empty sum; oneDNN is not asked about zero-sized reductions
    FSDPC_CHECK(!g.accumulate || !bias) << "an accumulating gemm with a bias";
    if (g.accumulate) return;  // c += 0
    auto value = [&](int64_t j) {
      if (!bias) return 0.0f;
      return g.scale * (g.bias == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(bias)[j])
                                              : static_cast<const float*>(bias)[j]);
    };
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = p * sc + r * n + j;
          if (g.out == DType::bf16)
            static_cast<uint16_t*>(c)[at] = f32_to_bf16(value(j));
          else
            static_cast<float*>(c)[at] = value(j);
        }
    return;
  }
  const DType in = g.in;
  const auto a_md =
      g.a_transposed ? batched_desc(batch, m, k, sa, 1, m, in) : batched_desc(batch, m, k, sa, k, 1, in);
  const int64_t b_rows = g.b_transposed ? 1 : n, b_cols = g.b_transposed ? k : 1;
  const auto b_md = broadcast_b ? desc_of({1, k, n}, {sb, b_rows, b_cols}, in)
                                : batched_desc(batch, k, n, sb, b_rows, b_cols, in);
  const auto c_md = batched_desc(batch, m, n, sc, n, 1, g.out);
  const auto bias_md = batch == 1 ? desc_of({1, n}, g.bias) : desc_of({1, 1, n}, g.bias);
  const PrimKey key{int64_t(PrimTag::gemm), batch, m, k, n, g.a_transposed, g.b_transposed, broadcast_b,
                    bias != nullptr, float_bits(g.scale), sa, sb, sc, int64_t(g.in), int64_t(g.out),
                    g.accumulate};
  CachedPrimitive& p =
      cached_primitive(key, [&] { return make_gemm(g, a_md, b_md, bias ? &bias_md : nullptr, c_md, m); });
  dnnl::memory b_mem = wrap(b_md, b);
  if (p.weights_reorder) {
    const int64_t floats = static_cast<int64_t>((p.weights_desc.get_size() + sizeof(float) - 1) / sizeof(float));
    dnnl::memory packed = wrap(p.weights_desc, scratch_floats(floats, 2));
    execute(p.weights_reorder, {{DNNL_ARG_FROM, b_mem}, {DNNL_ARG_TO, packed}});
    b_mem = packed;
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, wrap(a_md, a)}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, wrap(c_md, c)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap(bias_md, bias));
  execute(p.primitive, args);
}

bool bf16_products_native() {
  static const bool native = [] {
    const auto a = desc_of({16, 16}, DType::bf16);
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, a, f32_desc({16, 16})), dnnl_engine());
      return true;
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      return false;
    }
  }();
  return native;
}

void softmax_3d(const float* x, void* y, int64_t outer, int64_t n, int64_t inner, bool log, DType out) {
  if (outer == 0 || n == 0 || inner == 0) return;
  const auto md = f32_desc({outer, n, inner});
  const auto out_md = desc_of({outer, n, inner}, out);
  const PrimKey key{int64_t(PrimTag::softmax), outer, n, inner, log, int64_t(out)};
  dnnl::primitive& p = cached_primitive(key, [&] {
    const auto alg = log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
    dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, out_md, 1);
    return just(dnnl::softmax_v2_forward(dnnl::softmax_v2_forward::primitive_desc(d, dnnl_engine())));
  }).primitive;
  execute(p, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(out_md, y)}});
}

}  // namespace fsdpc::cpu

namespace fsdpc {

std::string cpu_backend_info() {
  cpu::dnnl_engine();  // pins the threads first
  const dnnl_version_t* v = dnnl_version();
  std::string runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : "other";
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 0;  // not ours to set: see cpu_executor.h
#endif
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" + runtime + ", " + std::to_string(threads) + " thread" +
         (threads == 1 ? "" : "s") + ")";
}

std::string cpu_bf16_matmul_info() {
  using namespace cpu;
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  const char* name = isa == dnnl::cpu_isa::avx512_core_amx    ? "avx512_core_amx"
                     : isa == dnnl::cpu_isa::avx512_core_bf16 ? "avx512_core_bf16"
                     : isa == dnnl::cpu_isa::avx512_core_vnni ? "avx512_core_vnni"
                     : isa == dnnl::cpu_isa::avx512_core      ? "avx512_core"
                     : isa == dnnl::cpu_isa::avx2_vnni        ? "avx2_vnni"
                     : isa == dnnl::cpu_isa::avx2             ? "avx2"
                                                              : "below avx2";
  auto impl = [](DType in, DType out) {
    const auto a = desc_of({64, 64}, in);
    return std::string(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, a, desc_of({64, 64}, out)), dnnl_engine())
                           .impl_info_str());
  };
  if (bf16_products_native())
    return "bf16 matmuls on oneDNN's " + impl(DType::bf16, DType::f32) + " (ISA " + name + ")";
  return std::string("bf16 matmuls widened to f32 on oneDNN's ") + impl(DType::f32, DType::f32) + " (ISA " + name +
         ": oneDNN has no bf16 kernel below AVX-512; bf16 is stored, computed in f32)";
}

}  // namespace fsdpc
