// The tracing API: a Tracer owns the trace being captured and Tensor handles
// record ops on it as they are called, so a forward function is plain C++.
// Every op is shape-checked when it is recorded (the IR's meta functions);
// numpy-style broadcasting is made explicit with broadcast_in_dim here, so
// the IR itself never broadcasts implicitly.
#pragma once

#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/trace.h"

namespace fsdpc {

class Tracer;

class Tensor {
 public:
  Tensor() = default;
  Tensor(Tracer* tracer, Proxy proxy) : tracer_(tracer), proxy_(std::move(proxy)) {}

  const std::string& name() const { return proxy_.name; }
  const TensorType& type() const { return proxy_.type; }
  const Shape& shape() const { return proxy_.type.shape; }
  DType dtype() const { return proxy_.type.dtype; }
  int64_t rank() const { return static_cast<int64_t>(proxy_.type.shape.size()); }
  // Size of dimension `d`; negative counts from the end, as in PyTorch.
  int64_t size(int64_t d) const;
  Tracer& tracer() const;
  bool valid() const { return tracer_ != nullptr; }

 private:
  Tracer* tracer_ = nullptr;
  Proxy proxy_;
};

class Tracer {
 public:
  explicit Tracer(std::string trace_name = "computation", Device device = {});
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // A model input, e.g. input("idx", {B, T}, DType::i64).
  Tensor input(const std::string& name, Shape shape, DType dtype = DType::f32);
  // A parameter named by its module path; the proxy is t_<path with _>.
  Tensor param(const std::string& path, Shape shape, DType dtype = DType::f32,
               bool requires_grad = true);

  // Records `op` with exactly one output.
  Tensor record(OpId op, std::vector<Operand> inputs, Attrs attrs = {});

  // Ends capture: the trace returns `outputs` (one: a bare name; several: a tuple).
  Trace finish(const std::vector<Tensor>& outputs);

  const Device& device() const { return device_; }

 private:
  Trace trace_;
  TraceBuilder builder_;
  Device device_;
  bool finished_ = false;
};

// ---- elementwise (numpy broadcasting; a double is a scalar literal) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor to_dtype(const Tensor& a, DType dtype);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator-(const Tensor& a);

// ---- reductions (negative dims count from the end) ----
Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
Tensor amax(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);

// ---- shape ----
// `shape` may hold one -1, inferred from the element count.
Tensor reshape(const Tensor& a, Shape shape);
Tensor permute(const Tensor& a, std::vector<int64_t> dims);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
// numpy rules: trailing dims aligned, size-1 dims stretched.
Tensor broadcast_to(const Tensor& a, const Shape& shape);
// Python's a[start:end] along one dim (negative start/end count from the end).
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor pad(const Tensor& a, std::vector<int64_t> lo, std::vector<int64_t> hi, double value = 0.0);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
// Splits `a` along `dim` into equal chunks of size `size`.
std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim);

// ---- indexing, matmul, creation ----
Tensor take(const Tensor& a, const Tensor& idx, int64_t dim = 0);
Tensor index_add(const Tensor& a, const Tensor& idx, const Tensor& src, int64_t dim = 0);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor full(Tracer& tr, Shape shape, double value, DType dtype = DType::f32);
Tensor zeros(Tracer& tr, Shape shape, DType dtype = DType::f32);
Tensor arange(Tracer& tr, int64_t length, DType dtype = DType::i64);

// ---- composites (recorded whole, with their decomposition) ----
Tensor linear(const Tensor& x, const Tensor& w);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor gelu(const Tensor& x);  // tanh approximation
Tensor softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
// Hugging Face's LlamaRMSNorm over the last dim: the mean square in f32,
// x * rsqrt(ms + eps) cast back to x's dtype, times weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool is_causal, double scale);
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

}  // namespace fsdpc
