// The CUDA fusion executor on a GPU (label gpu; skipped without one): every
// distinct fusion region of gpt2-tiny run as its NVRTC-compiled kernel
// against the same statements run one by one as the CUDA executor's own
// kernels, on the same random inputs; then gpt2-tiny trained with
// --fusion auto against --fusion none.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <unordered_map>

#include "executors/claim.h"
#include "executors/cuda/cuda_context.h"
#include "executors/cuda/cuda_executor.h"
#include "executors/cuda/cuda_fusion.h"
#include "executors/fusion/nvrtc_compiler.h"
#include "executors/fusion/region.h"
#include "frontend/models/registry.h"
#include "passes/pipeline.h"
#include "passes/place.h"
#include "train_losses.h"

using namespace fsdpc;

namespace {

#define CHECK_CUDA(call) REQUIRE((call) == cudaSuccess)

// A device buffer holding `t`'s bytes, freed with the case.
struct DeviceTensor {
  TensorType type;
  void* data = nullptr;
  explicit DeviceTensor(const TensorType& t) : type(t) {
    const size_t bytes = std::max<size_t>(1, static_cast<size_t>(numel(t.shape) * dtype_size(t.dtype)));
    CHECK_CUDA(cudaMalloc(&data, bytes));
  }
  ~DeviceTensor() { cudaFree(data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  size_t bytes() const { return static_cast<size_t>(numel(type.shape) * dtype_size(type.dtype)); }
  std::vector<std::byte> host() const {
    std::vector<std::byte> h(bytes());
    if (!h.empty()) CHECK_CUDA(cudaMemcpy(h.data(), data, h.size(), cudaMemcpyDeviceToHost));
    return h;
  }
};

// One of each distinct region (by signature) of gpt2-tiny's zero3 traces,
// with its input types.
std::vector<std::pair<BoundSymbol, std::vector<TensorType>>> regions() {
  CaptureOptions co;
  co.batch = 2;
  co.seq = 16;
  PipelineOptions o;
  o.mesh = flat_mesh(2);
  o.bucketing = true;
  const std::vector<Trace> traces = compile(place(capture(*make_model("gpt2-tiny"), co), Device{}), o).back().traces;
  std::map<std::string, std::pair<BoundSymbol, std::vector<TensorType>>> unique;
  for (const Trace& t : traces) {
    const Trace fused = execution_trace(t, Target::cpu, FusionMode::automatic);
    std::unordered_map<std::string, TensorType> types;
    for (const Proxy& a : fused.args) types[a.name] = a.type;
    for (const BoundSymbol& b : fused.bsyms) {
      if (b.op == OpId::Fusion) {
        std::vector<TensorType> in;
        for (const Operand& x : b.inputs) in.push_back(types.at(x.name));
        unique.emplace(fusion::describe_region(b, in).signature(), std::make_pair(b, in));
      }
      for (const Proxy& p : b.outputs) types[p.name] = p.type;
    }
  }
  std::vector<std::pair<BoundSymbol, std::vector<TensorType>>> out;
  for (auto& [sig, r] : unique) out.push_back(std::move(r));
  return out;
}

void fill_random(DeviceTensor& t, std::mt19937& rng) {
  const int64_t n = numel(t.type.shape);
  std::vector<std::byte> h(t.bytes());
  if (t.type.dtype == DType::boolean) {
    for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = std::byte(rng() & 1);
  } else {
    REQUIRE(t.type.dtype == DType::f32);
    std::uniform_real_distribution<float> u(0.05f, 2.0f);  // positive: log, sqrt and pow stay finite
    for (int64_t i = 0; i < n; ++i) {
      const float v = (rng() & 1 ? 1.0f : -1.0f) * u(rng);
      std::memcpy(h.data() + 4 * i, &v, 4);
    }
  }
  if (!h.empty()) CHECK_CUDA(cudaMemcpy(t.data, h.data(), h.size(), cudaMemcpyHostToDevice));
}

void check_close(const DeviceTensor& fused, const DeviceTensor& unfused, const std::string& name) {
  const std::vector<std::byte> a = fused.host(), b = unfused.host();
  REQUIRE(a.size() == b.size());
  if (fused.type.dtype == DType::boolean) {
    CHECK(a == b);
    return;
  }
  const size_t n = a.size() / 4;
  std::vector<float> xs(n), ys(n);
  std::memcpy(xs.data(), a.data(), 4 * n);
  std::memcpy(ys.data(), b.data(), 4 * n);
  // Relative 1e-5, with a floor of 1e-6 of the tensor's scale: the fused
  // kernel keeps f64 where the unfused ones round each intermediate to f32,
  // which shows most where a difference cancels to near zero.
  double scale = 0;
  for (float y : ys)
    if (std::isfinite(y)) scale = std::max(scale, static_cast<double>(std::abs(y)));
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = xs[i], y = ys[i];
    const bool ok = (std::isnan(x) && std::isnan(y)) || x == y || std::abs(x - y) <= 1e-5 * std::abs(y) + 1e-6 * scale;
    if (!ok && bad++ < 5) FAIL_CHECK(name << "[" << i << "]: fused " << x << ", unfused " << y);
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("every gpt2-tiny region: the fused kernel matches the unfused CUDA kernels", "[gpu][fusion]") {
  cuda::CudaContext ctx;
  const Executor& ex = cuda_executor();
  std::mt19937 rng(7);
  const auto rs = regions();
  REQUIRE(!rs.empty());
  for (const auto& [b, in_types] : rs) {
    INFO(b.outputs[0].name << " = fusion of " << b.subsymbols.size() << " statements");
    std::unordered_map<std::string, std::unique_ptr<DeviceTensor>> env;
    std::vector<TensorView> in;
    for (size_t i = 0; i < b.inputs.size(); ++i) {
      auto t = std::make_unique<DeviceTensor>(in_types[i]);
      fill_random(*t, rng);
      in.push_back({t->data, &t->type});
      env[b.inputs[i].name] = std::move(t);
    }
    std::vector<std::unique_ptr<DeviceTensor>> fused;
    std::vector<TensorView> out;
    for (const Proxy& p : b.outputs) {
      fused.push_back(std::make_unique<DeviceTensor>(p.type));
      out.push_back({fused.back()->data, &fused.back()->type});
    }
    cuda::fusion_kernel(ctx, b, in, out);
    // The same statements, one CUDA kernel each, intermediates materialised.
    for (const BoundSymbol& s : b.subsymbols) {
      std::vector<TensorView> sin, sout;
      for (const Operand& o : s.inputs) {
        if (o.is_scalar()) sin.push_back({});
        else sin.push_back({env.at(o.name)->data, &env.at(o.name)->type});
      }
      for (const Proxy& p : s.outputs) {
        auto t = std::make_unique<DeviceTensor>(p.type);
        sout.push_back({t->data, &t->type});
        env[p.name] = std::move(t);
      }
      KernelFn k = ex.kernel(s.op);
      REQUIRE(k);
      k(ctx, s, sin, sout);
    }
    ctx.synchronize();
    CHECK_CUDA(cudaGetLastError());
    for (size_t m = 0; m < b.outputs.size(); ++m) check_close(*fused[m], *env.at(b.outputs[m].name), b.outputs[m].name);
  }
  const fusion::NvrtcStats st = fusion::nvrtc_stats();
  std::printf("gpu_fusion_test: %zu regions, %lld compiled by NVRTC in %.3f s\n", rs.size(),
              static_cast<long long>(st.compiled), st.compile_s);
}

TEST_CASE("gpt2-tiny trained with --fusion auto on a GPU matches --fusion none to 1e-5", "[gpu][fusion][train]") {
  const std::vector<double> unfused = gpu_test::train("", "--executor cuda --fusion none", "unfused");
  const std::vector<double> fused = gpu_test::train("", "--executor cuda --fusion auto", "fused");
  gpu_test::check_losses(fused, unfused, 1e-5);
}
