// The engine's DiLoCo outer step (Engine members, runtime/engine.h): each
// round starts from an anchor, a copy of the parameters; every `every`-th
// optimizer step, the outer trace (passes/outer_step.h) averages the
// replicas' distance from it and moves it by Nesterov SGD, and the
// parameters start the next round from the new anchor. The anchor and the
// outer momentum are sharded as the parameters are, held as optimizer state.
#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"

namespace fsdpc {

void Engine::bind_outer_step() {
  std::unordered_map<std::string, size_t> by_path;
  for (size_t i = 0; i < params_.size(); ++i) by_path.emplace(params_[i].plan.path, i);
  const Trace& t = outer_->trace;
  outer_params_.clear();
  for (size_t i = 0; i < t.args.size(); ++i) {
    const Proxy& a = t.args[i];
    if (!a.is_param()) {
      // anchor_<p> and momentum_<p> follow their parameter.
      FSDPC_CHECK(!outer_params_.empty() && (a.name.rfind("anchor_", 0) == 0 || a.name.rfind("momentum_", 0) == 0))
          << "outer: unexpected argument " << a.name;
      continue;
    }
    auto it = by_path.find(a.param_path);
    FSDPC_CHECK(it != by_path.end() && params_[it->second].requires_grad) << "outer: no trained shard of "
                                                                          << a.param_path;
    outer_params_.push_back(it->second);
  }
  const size_t per = t.args.size() / outer_params_.size();
  FSDPC_CHECK((per == 2 || per == 3) && per * outer_params_.size() == t.args.size())
      << "outer: " << t.args.size() << " arguments for " << outer_params_.size() << " parameters";
  FSDPC_CHECK(t.returns.items.size() == (per - 1) * outer_params_.size()) << "outer: return count";
}

void Engine::start_outer_round() {
  const bool momentum = outer_->trace.args.size() == 3 * outer_params_.size();
  anchors_.clear();
  outer_momenta_.clear();
  for (size_t i : outer_params_) {
    const TensorValue& theta = params_[i].value;
    const size_t bytes = static_cast<size_t>(numel(theta.type.shape)) * dtype_size(theta.type.dtype);
    anchors_.push_back(allocate_tensor(allocator_, theta.type, MemCategory::optimizer_state));
    backend().copy(anchors_.back().data(), theta.data(), bytes);
    if (!momentum) continue;
    outer_momenta_.push_back(allocate_tensor(allocator_, theta.type, MemCategory::optimizer_state));
    backend().zero(outer_momenta_.back().data(), bytes);
  }
}

void Engine::outer_step() {
  const Trace& t = outer_->trace;
  const bool momentum = !outer_momenta_.empty();
  std::vector<TensorValue> args;
  // The old anchor and momentum move into the trace, whose dels free them
  // once read: they and the new ones are never all live at once.
  for (size_t j = 0; j < outer_params_.size(); ++j) {
    args.push_back(params_[outer_params_[j]].value);
    args.push_back(std::move(anchors_[j]));
    if (momentum) args.push_back(std::move(outer_momenta_[j]));
  }
  anchors_.clear();
  outer_momenta_.clear();
  ProfileSpan span(profiler_, "outer");
  std::vector<TensorValue> outs = interpreter_->run(t, std::move(args));
  const size_t n = outer_params_.size();
  for (size_t j = 0; j < outs.size(); ++j) {
    allocator_.recategorize(*outs[j].storage, MemCategory::optimizer_state);
    (j < n ? anchors_ : outer_momenta_).push_back(std::move(outs[j]));
  }
  // The next round starts from the new anchor.
  for (size_t j = 0; j < n; ++j) {
    const TensorValue& theta = params_[outer_params_[j]].value;
    backend().copy(theta.data(), anchors_[j].data(),
                   static_cast<size_t>(numel(theta.type.shape)) * dtype_size(theta.type.dtype));
  }
}

}  // namespace fsdpc
