// The engine's keep_gathered step (Engine members, runtime/engine.h): the
// parameters gathered once before the step's micro-batches and the summed
// gradients reduced once after them, each by a step-level trace
// (passes/gather_once.h) that the executor runs as it runs the
// synchronising step's collectives.
#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"

namespace fsdpc {

void Engine::gather_parameters() {
  const Trace& t = gathered_->gather;
  std::unordered_map<std::string, const Param*> by_path;
  for (const Param& p : params_) by_path.emplace(p.plan.path, &p);
  std::vector<TensorValue> args;
  for (const Proxy& a : t.args) {
    auto it = by_path.find(a.param_path);
    FSDPC_CHECK(it != by_path.end()) << "gather: no shard of " << a.param_path;
    args.push_back(it->second->value);
  }
  ProfileSpan span(profiler_, "gather");
  std::vector<TensorValue> full = interpreter_->run(t, std::move(args));
  FSDPC_CHECK(full.size() == t.args.size()) << "gather returned " << full.size() << " values";
  for (size_t i = 0; i < full.size(); ++i) gathered_values_[t.args[i].param_path] = std::move(full[i]);
}

std::vector<TensorValue> Engine::reduce_gradients(std::vector<TensorValue> local) {
  gathered_values_.clear();  // the last backward is done: the full parameters go first
  const Trace& t = gathered_->reduce;
  // `local` holds one gradient per parameter that wants one, in argument
  // order, as the reduce trace's arguments are.
  FSDPC_CHECK(local.size() == t.args.size()) << "reduce: " << local.size() << " gradients for " << t.args.size();
  size_t g = 0;
  for (const Param& p : params_) {
    if (!p.requires_grad) continue;
    FSDPC_CHECK(t.args.at(g).name == "grad_" + param_proxy_name(p.plan.path))
        << "reduce: argument " << g << " is not the gradient of " << p.plan.path;
    ++g;
  }
  ProfileSpan span(profiler_, "reduce");
  std::vector<TensorValue> shards = interpreter_->run(t, std::move(local));
  for (TensorValue& s : shards) allocator_.recategorize(*s.storage, MemCategory::gradients);
  return shards;
}

}  // namespace fsdpc
