// The engine's keep_gathered step (Engine members, runtime/engine.h): the
// parameters gathered once before the step's micro-batches and the summed
// gradients reduced once after them, each by a step-level trace
// (passes/gather_once.h) that the executor runs as it runs the
// synchronising step's collectives.
#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"

namespace fsdpc {

void Engine::bind_gathered_step() {
  std::unordered_map<std::string, size_t> by_path;
  for (size_t i = 0; i < params_.size(); ++i) by_path.emplace(params_[i].plan.path, i);
  gather_params_.clear();
  for (const Proxy& a : gathered_->gather.args) {
    auto it = by_path.find(a.param_path);
    FSDPC_CHECK(it != by_path.end()) << "gather: no shard of " << a.param_path;
    gather_params_.push_back(it->second);
  }
  // The step's summed gradients come one per parameter that wants one, in
  // argument order: the reduce trace's arguments must be in that order.
  const Trace& reduce = gathered_->reduce;
  size_t g = 0;
  for (const Param& p : params_) {
    if (!p.requires_grad) continue;
    FSDPC_CHECK(g < reduce.args.size() && reduce.args[g].name == "grad_" + param_proxy_name(p.plan.path))
        << "reduce: argument " << g << " is not the gradient of " << p.plan.path;
    ++g;
  }
  FSDPC_CHECK(g == reduce.args.size()) << "reduce: " << reduce.args.size() << " arguments for " << g << " gradients";
}

void Engine::gather_parameters() {
  const Trace& t = gathered_->gather;
  std::vector<TensorValue> args;
  for (size_t i : gather_params_) args.push_back(params_[i].value);
  ProfileSpan span(profiler_, "gather");
  std::vector<TensorValue> full = interpreter_->run(t, std::move(args));
  FSDPC_CHECK(full.size() == t.args.size()) << "gather returned " << full.size() << " values";
  for (size_t i = 0; i < full.size(); ++i) gathered_values_[t.args[i].param_path] = std::move(full[i]);
}

std::vector<TensorValue> Engine::reduce_gradients(std::vector<TensorValue> local) {
  gathered_values_.clear();  // the last backward is done: the full parameters go first
  const Trace& t = gathered_->reduce;
  // One gradient per parameter that wants one, in argument order, as the
  // reduce trace's arguments are (bind_gathered_step checked them).
  FSDPC_CHECK(local.size() == t.args.size()) << "reduce: " << local.size() << " gradients for " << t.args.size();
  ProfileSpan span(profiler_, "reduce");
  std::vector<TensorValue> shards = interpreter_->run(t, std::move(local));
  for (TensorValue& s : shards) allocator_.recategorize(*s.storage, MemCategory::gradients);
  return shards;
}

}  // namespace fsdpc
