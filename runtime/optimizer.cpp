// SGD and AdamW on the local shard (see runtime/optimizer.h).
#include "runtime/optimizer.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

std::optional<OptimizerOptions::Kind> parse_optimizer_kind(const std::string& name) {
  if (name == "adamw") return OptimizerOptions::Kind::adamw;
  if (name == "sgd") return OptimizerOptions::Kind::sgd;
  return std::nullopt;
}

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

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) fail("optimizer: invalid learning rate ", lr);
  options_.lr = lr;
}

// `zeroed`: the buffers of a new state are zeroed (for state(), which a
// checkpoint load fills or a save reads), else left uninitialised: the first
// update writes them without reading (AdamwStep::first, SgdStep::first),
// which saves a pass over them.
Optimizer::State& Optimizer::state_for(const ParamRef& p, bool zeroed, bool* created) {
  auto [it, inserted] = state_.try_emplace(p.name);
  State& s = it->second;
  if (created) *created = inserted;
  if (!inserted) {
    FSDPC_CHECK(s.numel == p.numel) << "optimizer: parameter '" << p.name << "' changed from " << s.numel
                                    << " to " << p.numel << " elements";
    return s;
  }
  s.numel = p.numel;
  int64_t bytes = p.numel * static_cast<int64_t>(sizeof(float));
  bool adamw = options_.kind == OptimizerOptions::Kind::adamw;
  auto make = [&] {
    return zeroed ? allocator_.allocate_zeroed(bytes, MemCategory::optimizer_state)
                  : allocator_.allocate(bytes, MemCategory::optimizer_state);
  };
  if (adamw || options_.momentum != 0) s.buf0 = make();
  if (adamw) s.buf1 = make();
  return s;
}

void Optimizer::step(const std::vector<ParamRef>& params, float grad_scale) {
  for (const ParamRef& p : params) {
    if (p.grad == nullptr) continue;
    FSDPC_CHECK(p.param != nullptr && p.numel >= 0) << "optimizer: bad parameter '" << p.name << "'";
    if (options_.kind == OptimizerOptions::Kind::adamw)
      step_adamw(p, grad_scale);
    else
      step_sgd(p, grad_scale);
  }
  ++steps_;
}

// The arithmetic is the device's (DeviceBackend::sgd_update, adamw_update):
// one pass over each shard; the step counts and bias corrections are kept
// here, on the host.
void Optimizer::step_sgd(const ParamRef& p, float grad_scale) {
  // A new momentum buffer is not read: the first step copies the gradient.
  State& s = state_for(p, /*zeroed=*/false, nullptr);
  ++s.step;
  float* buf = s.buf0 ? floats(s.buf0) : nullptr;
  SgdStep step{options_.lr, options_.momentum, options_.weight_decay, s.step == 1};
  step.grad_scale = grad_scale;
  allocator_.backend().sgd_update(p.param, p.grad, buf, p.numel, step);
}

void Optimizer::step_adamw(const ParamRef& p, float grad_scale) {
  bool created = false;
  State& s = state_for(p, /*zeroed=*/false, &created);
  ++s.step;
  const double t = static_cast<double>(s.step);
  AdamwStep step{options_.lr,
                 options_.beta1,
                 options_.beta2,
                 options_.eps,
                 options_.weight_decay,
                 options_.lr / (1.0 - std::pow(options_.beta1, t)),
                 std::sqrt(1.0 - std::pow(options_.beta2, t))};
  step.grad_scale = grad_scale;
  step.first = created;  // moments read as the zeros they would hold
  allocator_.backend().adamw_update(p.param, p.grad, floats(s.buf0), floats(s.buf1), p.numel, step);
}

Optimizer::StateView Optimizer::state(const ParamRef& p) {
  State& s = state_for(p, /*zeroed=*/true, nullptr);
  auto data = [](const std::shared_ptr<Storage>& b) { return b ? static_cast<float*>(b->data()) : nullptr; };
  return StateView{s.step, data(s.buf0), data(s.buf1), s.numel};
}

void Optimizer::set_param_step(const std::string& name, int64_t step) {
  auto it = state_.find(name);
  FSDPC_CHECK(it != state_.end()) << "no optimizer state for " << name;
  it->second.step = step;
}

}  // namespace fsdpc
