// Parameter registration, path naming and binding for Module.
#include "frontend/module.h"

#include "ir/error.h"

namespace fsdpc {

namespace {
// A child registered under "" is transparent: its parameters keep their own
// paths (a model wrapping one Sequential still names them "0.weight").
std::string child_prefix(const std::string& prefix, const std::string& name) {
  return name.empty() ? prefix : prefix + name + ".";
}
}  // namespace

std::vector<NamedParam> Module::named_parameters() const {
  std::vector<NamedParam> out;
  collect("", out);
  return out;
}

void Module::collect(const std::string& prefix, std::vector<NamedParam>& out) const {
  for (const ParamSpec& p : params_) out.push_back({prefix + p.name, &p});
  for (const auto& [name, child] : children_) child->collect(child_prefix(prefix, name), out);
}

void Module::bind(Tracer& tracer, const std::string& prefix) {
  bound_.clear();
  for (const ParamSpec& p : params_)
    bound_[p.name] = tracer.param(prefix + p.name, p.shape, p.dtype, p.requires_grad);
  for (auto& [name, child] : children_) child->bind(tracer, child_prefix(prefix, name));
}

const Tensor& Module::param(const std::string& name) const {
  auto it = bound_.find(name);
  FSDPC_CHECK(it != bound_.end()) << "parameter '" << name << "' used before Module::bind";
  return it->second;
}

bool Module::has_param(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return true;
  return false;
}

void Module::set_requires_grad(bool requires_grad) {
  for (ParamSpec& p : params_) p.requires_grad = requires_grad;
  for (auto& [name, child] : children_) child->set_requires_grad(requires_grad);
}

void Module::register_param(std::string name, Shape shape, Init init) {
  for (int64_t d : shape)
    if (d <= 0) fail("parameter '", name, "' has a non-positive dimension in ", shape_str(shape));
  FSDPC_CHECK(!has_param(name)) << "parameter '" << name << "' registered twice";
  params_.push_back(ParamSpec{std::move(name), std::move(shape), DType::f32, init, true});
}

}  // namespace fsdpc
