// SGD and AdamW on the local shard (see runtime/optimizer.h).
#include "runtime/optimizer.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

namespace {
void check_options(const OptimizerOptions& o) {
  // `!(x >= 0)` also rejects NaN.
  if (!(o.lr >= 0)) fail("optimizer: invalid learning rate ", o.lr);
  if (!(o.weight_decay >= 0)) fail("optimizer: invalid weight_decay ", o.weight_decay);
  if (!(o.momentum >= 0)) fail("optimizer: invalid momentum ", o.momentum);
  if (o.kind == OptimizerOptions::Kind::adamw) {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) fail("optimizer: invalid beta1 ", o.beta1, " (must be in [0, 1))");
    if (!(o.beta2 >= 0 && o.beta2 < 1)) fail("optimizer: invalid beta2 ", o.beta2, " (must be in [0, 1))");
    if (!(o.eps >= 0)) fail("optimizer: invalid eps ", o.eps);
  }
}

float* floats(const std::shared_ptr<Storage>& s) { return static_cast<float*>(s->data()); }
}  // namespace

Optimizer::Optimizer(const OptimizerOptions& options, Allocator& allocator)
    : options_(options), allocator_(allocator) {
  check_options(options_);
}

Optimizer::State& Optimizer::state_for(const ParamRef& p) {
  auto [it, inserted] = state_.try_emplace(p.name);
  State& s = it->second;
  if (!inserted) {
    FSDPC_CHECK(s.numel == p.numel) << "optimizer: parameter '" << p.name << "' changed from " << s.numel
                                    << " to " << p.numel << " elements";
    return s;
  }
  s.numel = p.numel;
  int64_t bytes = p.numel * static_cast<int64_t>(sizeof(float));
  bool adamw = options_.kind == OptimizerOptions::Kind::adamw;
  if (adamw || options_.momentum != 0) s.buf0 = allocator_.allocate_zeroed(bytes, MemCategory::optimizer_state);
  if (adamw) s.buf1 = allocator_.allocate_zeroed(bytes, MemCategory::optimizer_state);
  return s;
}

void Optimizer::step(const std::vector<ParamRef>& params) {
  for (const ParamRef& p : params) {
    if (p.grad == nullptr) continue;
    FSDPC_CHECK(p.param != nullptr && p.numel >= 0) << "optimizer: bad parameter '" << p.name << "'";
    if (options_.kind == OptimizerOptions::Kind::adamw)
      step_adamw(p);
    else
      step_sgd(p);
  }
  ++steps_;
}

// Arithmetic in double, state kept in float: the float rounding then happens
// once per stored value rather than once per operation.
void Optimizer::step_sgd(const ParamRef& p) {
  State& s = state_for(p);
  ++s.step;
  const double lr = options_.lr, wd = options_.weight_decay, mu = options_.momentum;
  float* buf = s.buf0 ? floats(s.buf0) : nullptr;
  const bool first = s.step == 1;
  for (int64_t i = 0; i < p.numel; ++i) {
    double g = static_cast<double>(p.grad[i]) + wd * static_cast<double>(p.param[i]);
    if (buf) {
      // torch: the buffer starts as a copy of the first (decayed) gradient.
      double b = first ? g : mu * static_cast<double>(buf[i]) + g;
      buf[i] = static_cast<float>(b);
      g = b;
    }
    p.param[i] = static_cast<float>(static_cast<double>(p.param[i]) - lr * g);
  }
}

void Optimizer::step_adamw(const ParamRef& p) {
  State& s = state_for(p);
  ++s.step;
  const double lr = options_.lr, wd = options_.weight_decay, eps = options_.eps;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double t = static_cast<double>(s.step);
  const double step_size = lr / (1.0 - std::pow(b1, t));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(b2, t));
  const double decay = 1.0 - lr * wd;
  float* m = floats(s.buf0);
  float* v = floats(s.buf1);
  for (int64_t i = 0; i < p.numel; ++i) {
    double g = p.grad[i];
    double x = static_cast<double>(p.param[i]) * decay;
    double mi = b1 * static_cast<double>(m[i]) + (1.0 - b1) * g;
    double vi = b2 * static_cast<double>(v[i]) + (1.0 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    double denom = std::sqrt(vi) / bias_correction2_sqrt + eps;
    p.param[i] = static_cast<float>(x - step_size * mi / denom);
  }
}

Optimizer::StateView Optimizer::state(const ParamRef& p) {
  State& s = state_for(p);
  auto data = [](const std::shared_ptr<Storage>& b) { return b ? static_cast<float*>(b->data()) : nullptr; };
  return StateView{s.step, data(s.buf0), data(s.buf1), s.numel};
}

void Optimizer::set_param_step(const std::string& name, int64_t step) {
  auto it = state_.find(name);
  FSDPC_CHECK(it != state_.end()) << "no optimizer state for " << name;
  it->second.step = step;
}

}  // namespace fsdpc
