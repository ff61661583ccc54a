// Tracer and Tensor: capture state and the handle ops are called on.
#include "frontend/tensor.h"

#include "ir/error.h"

namespace fsdpc {

int64_t Tensor::size(int64_t d) const {
  int64_t r = rank();
  if (d < -r || d >= r) fail("dimension ", d, " out of range for ", name(), " of shape ", shape_str(shape()));
  return shape()[static_cast<size_t>(d < 0 ? d + r : d)];
}

Tracer& Tensor::tracer() const {
  FSDPC_CHECK(tracer_) << "use of a default-constructed Tensor";
  return *tracer_;
}

Tracer::Tracer(std::string trace_name, Device device) : builder_(trace_), device_(device) {
  trace_.name = std::move(trace_name);
  trace_.provenance = "trace";
}

Tensor Tracer::input(const std::string& name, Shape shape, DType dtype) {
  Proxy p;
  p.name = name;
  p.type = TensorType{std::move(shape), dtype, device_, DistType::none, false};
  return Tensor(this, builder_.add_arg(std::move(p)));
}

Tensor Tracer::param(const std::string& path, Shape shape, DType dtype, bool requires_grad) {
  if (path.empty()) fail("a parameter needs a non-empty module path");
  Proxy p;
  p.name = param_proxy_name(path);
  p.type = TensorType{std::move(shape), dtype, device_, DistType::none, false};
  p.param_path = path;
  p.requires_grad = requires_grad;
  return Tensor(this, builder_.add_arg(std::move(p)));
}

Tensor Tracer::record(OpId op, std::vector<Operand> inputs, Attrs attrs) {
  FSDPC_CHECK(!finished_) << "recording on a finished tracer";
  return Tensor(this, builder_.emit1(op, std::move(inputs), std::move(attrs)));
}

Trace Tracer::finish(const std::vector<Tensor>& outputs) {
  FSDPC_CHECK(!finished_) << "Tracer::finish called twice";
  finished_ = true;
  std::vector<ReturnTree> items;
  for (const Tensor& t : outputs) {
    FSDPC_CHECK(&t.tracer() == this) << "returning a tensor from another tracer";
    items.push_back(ReturnTree::leaf(t.name()));
  }
  trace_.returns = items.size() == 1 ? items[0] : ReturnTree::tuple(std::move(items));
  return std::move(trace_);
}

}  // namespace fsdpc
