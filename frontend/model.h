// A Model is a Module with named inputs and a forward that returns the
// trace's outputs; capture() runs it under a Tracer and returns the trace.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontend/module.h"
#include "passes/tensor_parallel_plan.h"

namespace fsdpc {

struct CaptureOptions {
  std::optional<int64_t> batch;  // model default when unset
  std::optional<int64_t> seq;    // sequence models only
  Device device;
};

struct ModelInput {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

class Model : public Module {
 public:
  virtual std::string name() const = 0;
  // The inputs' names and shapes for these options; rejects options that do
  // not fit the model (a sequence longer than its context, ...).
  virtual std::vector<ModelInput> inputs(const CaptureOptions& options) const = 0;
  // Records the computation; returns what the trace returns (first: the loss,
  // for models that compute one).
  virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs) = 0;
  // How tensor parallelism (--tp) cuts this model's parameters: its
  // family's plan, by Hugging Face's parameter names for the families in
  // frontend/models/. None by default: every parameter stays whole.
  virtual TensorParallelPlan tensor_parallel_plan() const { return {}; }
};

// Captures `model`: inputs become the first trace arguments, then every
// parameter in named_parameters() order; the result is verified.
Trace capture(Model& model, const CaptureOptions& options = {});

// A model made of one Layer applied to a single input "x" of shape
// [batch, features...] (e.g. the FSDP tutorial's Sequential MLP).
class LayerModel : public Model {
 public:
  LayerModel(std::string name, std::unique_ptr<Layer> layer, Shape feature_shape, int64_t default_batch);
  std::string name() const override { return name_; }
  std::vector<ModelInput> inputs(const CaptureOptions& options) const override;
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;

 private:
  std::string name_;
  Layer* layer_;
  Shape feature_shape_;
  int64_t default_batch_;
};

}  // namespace fsdpc
