// Capturing your own model: write the forward pass in plain C++ with modules
// and tensor ops, capture it, and print the trace fsdpc will compile.
#include <cstdio>

#include "frontend/layers.h"
#include "frontend/model.h"
#include "ir/printer.h"

using namespace fsdpc;

// A two-layer classifier head with a residual connection.
class ResidualHead : public Model {
 public:
  ResidualHead() {
    norm_ = &register_module("norm", std::make_unique<LayerNorm>(32));
    fc1_ = &register_module("fc1", std::make_unique<Linear>(32, 32));
    fc2_ = &register_module("fc2", std::make_unique<Linear>(32, 10));
  }
  std::string name() const override { return "residual_head"; }
  std::vector<ModelInput> inputs(const CaptureOptions& o) const override {
    return {{"x", {o.batch.value_or(16), 32}, DType::f32}, {"labels", {o.batch.value_or(16)}, DType::i64}};
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor h = in[0] + gelu(fc1_->forward(norm_->forward(in[0])));
    return {cross_entropy(fc2_->forward(h), in[1])};
  }

 private:
  LayerNorm* norm_;
  Linear* fc1_;
  Linear* fc2_;
};

int main() {
  ResidualHead model;
  std::fputs(print_trace(capture(model)).c_str(), stdout);
  return 0;
}
