// capture() and the single-layer model wrapper.
#include "frontend/model.h"

#include "ir/error.h"
#include "ir/verifier.h"

namespace fsdpc {

Trace capture(Model& model, const CaptureOptions& options) {
  Tracer tracer("computation", options.device);
  std::vector<Tensor> inputs;
  for (const ModelInput& in : model.inputs(options)) inputs.push_back(tracer.input(in.name, in.shape, in.dtype));
  model.bind(tracer);
  Trace trace = tracer.finish(model.forward(inputs));
  verify(trace);
  return trace;
}

LayerModel::LayerModel(std::string name, std::unique_ptr<Layer> layer, Shape feature_shape,
                       int64_t default_batch)
    : name_(std::move(name)), feature_shape_(std::move(feature_shape)), default_batch_(default_batch) {
  // Registered under "" so parameter paths are the layer's own ("0.weight").
  layer_ = &register_module("", std::move(layer));
}

std::vector<ModelInput> LayerModel::inputs(const CaptureOptions& options) const {
  if (options.seq) fail("model '", name_, "' has no sequence dimension; drop --seq");
  int64_t batch = options.batch.value_or(default_batch_);
  if (batch <= 0) fail("batch size must be positive, got ", batch);
  Shape shape{batch};
  shape.insert(shape.end(), feature_shape_.begin(), feature_shape_.end());
  return {ModelInput{"x", shape, DType::f32}};
}

std::vector<Tensor> LayerModel::forward(const std::vector<Tensor>& inputs) {
  return {layer_->forward(inputs.at(0))};
}

}  // namespace fsdpc
