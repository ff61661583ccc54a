// Forward functions and initialisation schemes of the basic layers.
#include "frontend/layers.h"

#include <cmath>

namespace fsdpc {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias) : bias_(bias) {
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  register_param("weight", {out_features, in_features}, Init::uniform(bound));
  if (bias_) register_param("bias", {out_features}, Init::uniform(bound));
}

Tensor Linear::forward(const Tensor& x) {
  return bias_ ? linear(x, param("weight"), param("bias")) : linear(x, param("weight"));
}

Conv1D::Conv1D(int64_t in_features, int64_t out_features, double init_std) {
  register_param("weight", {in_features, out_features}, Init::normal(init_std));
  register_param("bias", {out_features}, Init::zeros());
}

Tensor Conv1D::forward(const Tensor& x) { return matmul(x, param("weight")) + param("bias"); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor GELU::forward(const Tensor& x) { return gelu(x); }

LayerNorm::LayerNorm(int64_t features, double eps) : eps_(eps) {
  register_param("weight", {features}, Init::ones());
  register_param("bias", {features}, Init::zeros());
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, param("weight"), param("bias"), eps_);
}

Embedding::Embedding(int64_t num, int64_t dim, double init_std) {
  register_param("weight", {num, dim}, Init::normal(init_std));
}

Tensor Embedding::forward(const Tensor& idx) { return take(param("weight"), idx, 0); }

Sequential& Sequential::add(std::unique_ptr<Layer> layer) {
  layers_.push_back(&register_module(std::to_string(layers_.size()), std::move(layer)));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Layer* layer : layers_) h = layer->forward(h);
  return h;
}

}  // namespace fsdpc
