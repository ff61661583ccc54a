// Module: a node of a model with named parameters and named children, as in
// torch.nn. Parameter paths are the dotted paths users know from PyTorch
// state dicts ("h.0.attn.c_attn.weight"); binding a module to a Tracer turns
// each parameter into a trace argument named after its path.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace fsdpc {

// How a parameter is initialised (used by the runtime; recorded here because
// the module knows it): normal(0, scale), uniform(-scale, scale), 0 or 1.
struct Init {
  enum class Kind { normal, uniform, zeros, ones };
  Kind kind = Kind::zeros;
  double scale = 0.0;
  static Init normal(double std) { return {Kind::normal, std}; }
  static Init uniform(double bound) { return {Kind::uniform, bound}; }
  static Init zeros() { return {Kind::zeros, 0.0}; }
  static Init ones() { return {Kind::ones, 0.0}; }
};

struct ParamSpec {
  std::string name;  // local name ("weight")
  Shape shape;
  DType dtype = DType::f32;
  Init init;
  bool requires_grad = true;
};

struct NamedParam {
  std::string path;  // full dotted path
  const ParamSpec* spec;
};

class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  // Every parameter, depth first: own parameters, then each child in
  // registration order (PyTorch's state_dict order).
  std::vector<NamedParam> named_parameters() const;
  // Creates every parameter as a trace argument of `tracer`, named by path.
  void bind(Tracer& tracer, const std::string& prefix = "");
  // The bound tensor of a local parameter; fails if bind() was not called.
  const Tensor& param(const std::string& name) const;
  bool has_param(const std::string& name) const;

  void set_requires_grad(bool requires_grad);

 protected:
  void register_param(std::string name, Shape shape, Init init);
  template <class M>
  M& register_module(std::string name, std::unique_ptr<M> child) {
    M& ref = *child;
    children_.emplace_back(std::move(name), std::move(child));
    return ref;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedParam>& out) const;

  std::vector<ParamSpec> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  std::unordered_map<std::string, Tensor> bound_;
};

// A module whose forward maps one tensor to one tensor (what Sequential chains).
class Layer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
};

}  // namespace fsdpc
