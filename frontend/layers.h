// The basic torch.nn-style layers models are built from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/module.h"

namespace fsdpc {

// PyTorch's nn.Linear: weight [out, in], y = x @ weight^T + bias.
// Initialised as PyTorch does: uniform(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;

 private:
  bool bias_;
};

// Hugging Face's Conv1D (GPT-2's projections): weight [in, out],
// y = x @ weight + bias; weight ~ normal(0, init_std), bias 0.
class Conv1D : public Layer {
 public:
  Conv1D(int64_t in_features, int64_t out_features, double init_std = 0.02);
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};

class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};

// GELU with the tanh approximation (GPT-2's "gelu_new").
class GELU : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};

// LayerNorm over the last dimension; weight 1, bias 0.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t features, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;

 private:
  double eps_;
};

// Embedding table [num, dim]; forward gathers rows by integer index.
class Embedding : public Layer {
 public:
  Embedding(int64_t num, int64_t dim, double init_std = 0.02);
  Tensor forward(const Tensor& idx) override;
  const Tensor& weight() const { return param("weight"); }
};

// Chains layers; children are named "0", "1", ... as in nn.Sequential.
class Sequential : public Layer {
 public:
  Sequential() = default;
  Sequential& add(std::unique_ptr<Layer> layer);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<Layer*> layers_;
};

}  // namespace fsdpc
