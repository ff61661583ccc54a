// Statement-by-statement execution of claimed traces.
#include "runtime/interpreter.h"

#include <chrono>
#include <unordered_map>

#include "ir/error.h"
#include "runtime/profiler.h"

namespace fsdpc {

TensorValue allocate_tensor(Allocator& allocator, const TensorType& type, MemCategory category) {
  return TensorValue{allocator.allocate(numel(type.shape) * dtype_size(type.dtype), category), type};
}

Interpreter::Interpreter(Allocator& allocator, std::vector<const Executor*> executors, KernelContext& context,
                         std::function<void()> progress)
    : allocator_(allocator), executors_(std::move(executors)), context_(context), progress_(std::move(progress)) {}

KernelFn Interpreter::kernel_for(const BoundSymbol& b) const {
  for (const Executor* e : executors_)
    if (e->name() == b.executor) {
      KernelFn k = e->kernel(b.op);
      FSDPC_CHECK(k) << b.executor << " claimed " << op_name(b.op) << " but has no kernel";
      return k;
    }
  fail("statement ", symbol_name(b.op, b.executor), ": ",
       b.executor.empty() ? "not claimed by any executor (run the claim pass)"
                          : "executor '" + b.executor + "' is not available in this runtime");
}

std::vector<TensorValue> Interpreter::run(const Trace& trace, std::vector<TensorValue> args) {
  if (args.size() != trace.args.size())
    fail(trace.name, ": expected ", trace.args.size(), " arguments, got ", args.size());
  std::unordered_map<std::string, TensorValue> env;
  for (size_t i = 0; i < args.size(); ++i) {
    const Proxy& p = trace.args[i];
    if (args[i].type.shape != p.type.shape || args[i].type.dtype != p.type.dtype)
      fail(trace.name, ": argument ", i + 1, " (", p.name, "): expected ", dtype_name(p.type.dtype),
           shape_str(p.type.shape), ", got ", dtype_name(args[i].type.dtype), shape_str(args[i].type.shape));
    env[p.name] = std::move(args[i]);
  }
  args.clear();  // the environment holds the only references the trace frees

  std::vector<TensorView> in, out;
  for (const BoundSymbol& b : trace.bsyms) {
    if (b.op == OpId::Del) {
      for (const Operand& o : b.inputs) env.erase(o.name);
      if (profiler_) profiler_->memory(allocator_.stats(), std::chrono::steady_clock::now());
      continue;
    }
    in.clear();
    out.clear();
    for (const Operand& o : b.inputs) {
      if (o.is_scalar()) {
        in.push_back({});
        continue;
      }
      auto it = env.find(o.name);
      FSDPC_CHECK(it != env.end()) << o.name << " is not live at " << op_name(b.op);
      in.push_back({it->second.data(), &it->second.type});
    }
    for (const Proxy& p : b.outputs) {
      TensorValue v;
      if (b.op == OpId::Wait) {
        // A wait's tensor is the buffer its collective filled.
        v = TensorValue{env.at(b.inputs[0].name).storage, p.type};
      } else if (b.op == OpId::Reshape) {
        // Row-major reshape is a view: no copy, no new bytes.
        v = TensorValue{env.at(b.inputs[0].name).storage, p.type};
      } else {
        v = allocate_tensor(allocator_, p.type, p.type.future ? MemCategory::communication : MemCategory::activations);
      }
      out.push_back({v.data(), &p.type});
      env[p.name] = std::move(v);
    }
    if (b.op != OpId::Reshape) {
      auto t0 = std::chrono::steady_clock::now();
      context_.scratch_pool = &allocator_;
      kernel_for(b)(context_, b, in, out);
      const auto t1 = std::chrono::steady_clock::now();
      double s = std::chrono::duration<double>(t1 - t0).count();
      if (profiler_) {
        profiler_->memory(allocator_.stats(), t0);  // its outputs were allocated before it ran
        profiler_->kernel(b, in, t0, t1);
      }
      // (synchronize, the one collective that issues nothing, has no kernel)
      (b.op == OpId::Wait ? timing_.wait_s
                          : op_info(b.op).has(OpTrait::issue) ? timing_.issue_s : timing_.compute_s) += s;
    }
    // A future is waited exactly once (the verifier checks it): its buffer
    // now lives under the wait's name only, so the wait's del frees it.
    if (b.op == OpId::Wait) env.erase(b.inputs[0].name);
    if (progress_ && profiler_) {
      const auto p0 = std::chrono::steady_clock::now();
      progress_();
      profiler_->progress(p0, std::chrono::steady_clock::now());
    } else if (progress_) {
      progress_();
    }
  }

  std::vector<std::string> names;
  trace.returns.collect_names(names);
  std::vector<TensorValue> results;
  for (const std::string& n : names) {
    auto it = env.find(n);
    FSDPC_CHECK(it != env.end()) << "returned value " << n << " is not live";
    results.push_back(it->second);
  }
  return results;
}

}  // namespace fsdpc
