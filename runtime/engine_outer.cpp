// The engine's DiLoCo outer step (Engine members, runtime/engine.h): each
// round starts from an anchor, a copy of the parameters; after the updates
// whose turn it is, a fragment's outer traces (passes/outer_step.h) average
// the replicas' distance from its anchor and move the anchor by Nesterov
// SGD, and the fragment's parameters go on from the new anchor (or, after a
// delay, from a mix of it and where the replica got meanwhile). The anchor
// and the outer momentum are sharded as the parameters are, held as
// optimizer state. With a delay the futures of an exchange, and the buffers
// its collectives read, are held here from the step that issues them to the
// step that lands them: a future crosses from one trace to another.
#include <algorithm>
#include <exception>

#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"

namespace fsdpc {

bool OuterStep::runs_after(int64_t k) const {
  if (k <= 0 || every <= 0) return false;
  for (const OuterFragment& f : fragments)
    if (k % every == f.offset || (delay > 0 && k > delay && (k - delay) % every == f.offset)) return true;
  return false;
}

OuterStep lower_outer_step(const OuterStep& o, Target target, FusionMode fusion) {
  OuterStep low = o;
  for (OuterFragment& f : low.fragments)
    for (Trace* t : f.traces()) *t = execution_trace(*t, target, fusion);
  return low;
}

void Engine::bind_outer_step() {
  std::unordered_map<std::string, size_t> by_path;
  for (size_t i = 0; i < params_.size(); ++i) by_path.emplace(params_[i].plan.path, i);
  outer_params_.clear();
  outer_slot_.clear();
  fragment_slots_.clear();
  outer_momentum_ = false;
  for (const OuterFragment& f : outer_->fragments) {
    // The momenta are read by the update (or the whole step); every
    // parameter by the issue (or the whole step), in the order of the
    // update's returns.
    for (const Proxy& a : (f.delayed() ? f.update : f.step).args)
      outer_momentum_ = outer_momentum_ || a.name.rfind("momentum_", 0) == 0;
    std::vector<size_t> slots;
    for (const Proxy& a : (f.delayed() ? f.issue : f.step).args) {
      if (!a.is_param()) continue;
      auto it = by_path.find(a.param_path);
      FSDPC_CHECK(it != by_path.end() && params_[it->second].requires_grad) << "outer: no trained shard of "
                                                                            << a.param_path;
      FSDPC_CHECK(!outer_slot_.count(a.name)) << "outer: " << a.name << " in two fragments";
      outer_slot_[a.name] = outer_params_.size();
      slots.push_back(outer_params_.size());
      outer_params_.push_back(it->second);
    }
    FSDPC_CHECK(slots.size() == f.params.size()) << "outer: a fragment's traces and parameters differ";
    fragment_slots_.push_back(std::move(slots));
  }
}

void Engine::start_outer_round() {
  anchors_.clear();
  outer_momenta_.clear();
  in_flight_.clear();
  for (size_t i : outer_params_) {
    const TensorValue& theta = params_[i].value;
    const size_t bytes = static_cast<size_t>(numel(theta.type.shape)) * dtype_size(theta.type.dtype);
    anchors_.push_back(allocate_tensor(allocator_, theta.type, MemCategory::optimizer_state));
    backend().copy(anchors_.back().data(), theta.data(), bytes);
    if (!outer_momentum_) continue;
    outer_momenta_.push_back(allocate_tensor(allocator_, theta.type, MemCategory::optimizer_state));
    backend().zero(outer_momenta_.back().data(), bytes);
  }
}

// `first` (landed means, or nothing), then the trace's own arguments by name.
std::vector<TensorValue> Engine::outer_args(const Trace& t, std::vector<TensorValue> first, bool take_state) {
  std::vector<TensorValue> args;
  size_t k = 0;
  auto state = [&](std::vector<TensorValue>& v, const std::string& param) {
    TensorValue& s = v.at(outer_slot_.at(param));
    return take_state ? std::move(s) : s;
  };
  for (const Proxy& a : t.args) {
    if (a.is_param()) args.push_back(params_[outer_params_[outer_slot_.at(a.name)]].value);
    else if (a.name.rfind("anchor_", 0) == 0) args.push_back(state(anchors_, a.name.substr(7)));
    else if (a.name.rfind("momentum_", 0) == 0) args.push_back(state(outer_momenta_, a.name.substr(9)));
    else args.push_back(std::move(first.at(k++)));
  }
  FSDPC_CHECK(k == first.size()) << t.name << ": " << first.size() << " values handed in, " << k << " read";
  return args;
}

void Engine::outer_update(size_t fragment, const Trace& t, std::vector<TensorValue> landed) {
  // The old anchors and momenta move into the trace, whose dels free them
  // once read: they and the new ones are never all live at once.
  std::vector<TensorValue> outs = interpreter_->run(t, outer_args(t, std::move(landed), true));
  const std::vector<size_t>& slots = fragment_slots_.at(fragment);
  const size_t n = slots.size();
  FSDPC_CHECK(outs.size() == n * (outer_momentum_ ? 2 : 1) || outs.size() == n * (outer_momentum_ ? 3 : 2))
      << t.name << ": " << outs.size() << " returns for " << n << " parameters";
  for (size_t j = 0; j < outs.size(); ++j) {
    const size_t slot = slots[j % n];
    if (j < n) {
      allocator_.recategorize(*outs[j].storage, MemCategory::optimizer_state);
      anchors_[slot] = outs[j];
    } else if (outer_momentum_ && j < 2 * n) {
      allocator_.recategorize(*outs[j].storage, MemCategory::optimizer_state);
      outer_momenta_[slot] = outs[j];
    }
  }
  // The fragment goes on from the new anchor, or from its mix with where
  // the replica got while the exchange was in flight (the last n returns).
  const bool mixed = outs.size() > n * (outer_momentum_ ? 2 : 1);
  for (size_t j = 0; j < n; ++j) {
    const TensorValue& theta = params_[outer_params_[slots[j]]].value;
    const TensorValue& from = mixed ? outs[outs.size() - n + j] : anchors_[slots[j]];
    backend().copy(theta.data(), from.data(),
                   static_cast<size_t>(numel(theta.type.shape)) * dtype_size(theta.type.dtype));
  }
}

void Engine::land(OuterExchange& x) {
  if (x.landed) return;
  const Trace& t = outer_->fragments.at(x.fragment).land;
  // The futures first; the wires (the collectives' inputs) are read until
  // the waits and go after them.
  std::vector<TensorValue> futures(x.held.begin(), x.held.begin() + static_cast<std::ptrdiff_t>(t.args.size()));
  x.held = interpreter_->run(t, std::move(futures));
  x.landed = true;
}

bool Engine::outer_after_update(int64_t k) {
  if (!outer_->runs_after(k)) return false;
  ProfileSpan span(profiler_, "outer");
  for (size_t i = 0; i < in_flight_.size();) {
    OuterExchange& x = in_flight_[i];
    if (x.lands_at != k) {
      ++i;
      continue;
    }
    land(x);
    outer_update(x.fragment, outer_->fragments[x.fragment].update, std::move(x.held));
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (size_t f = 0; f < outer_->fragments.size(); ++f) {
    const OuterFragment& frag = outer_->fragments[f];
    if (k % outer_->every != frag.offset) continue;
    if (!frag.delayed()) {
      outer_update(f, frag.step, {});
      continue;
    }
    std::vector<TensorValue> held = interpreter_->run(frag.issue, outer_args(frag.issue, {}, false));
    for (TensorValue& v : held) allocator_.recategorize(*v.storage, MemCategory::communication);
    in_flight_.push_back({f, k + outer_->delay, false, std::move(held)});
  }
  return true;
}

void Engine::land_in_flight() {
  for (OuterExchange& x : in_flight_) land(x);
}

std::vector<std::pair<size_t, int64_t>> Engine::in_flight_after(int64_t k) const {
  std::vector<std::pair<size_t, int64_t>> out;
  for (size_t f = 0; outer_ && outer_->delay > 0 && f < outer_->fragments.size(); ++f)
    // Issued after a count k0 in (k - delay, k], k0 > 0, its turn.
    for (int64_t k0 = std::max<int64_t>(1, k - outer_->delay + 1); k0 <= k; ++k0)
      if (k0 % outer_->every == outer_->fragments[f].offset) out.emplace_back(f, k0 + outer_->delay);
  return out;
}

}  // namespace fsdpc
