// The reference interpreter loop: checks the arguments, then steps every rank
// through the trace one bound symbol at a time (lockstep, so a collective sees
// all ranks' inputs at once) and returns each rank's flattened return tree.
#include <string>
#include <utility>

#include "executors/reference/reference_internal.h"

namespace fsdpc::reference {

namespace {

std::string desc(const TensorType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

void check_args(const Trace& trace, const std::vector<Value>& args, const std::string& where) {
  if (args.size() != trace.args.size()) {
    std::string names;
    for (const Proxy& p : trace.args) names += (names.empty() ? "" : ", ") + p.name;
    fail(where, "trace '", trace.name, "' takes ", trace.args.size(), " arguments (", names, "), got ",
         args.size());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Proxy& p = trace.args[i];
    const Value& v = args[i];
    // Numbered from 1, as a person counts the parameters of `def f(...)`.
    if (v.type.shape != p.type.shape || v.type.dtype != p.type.dtype)
      fail(where, "argument ", i + 1, " (", p.name, "): expected ", desc(p.type), ", got ",
           desc(v.type));
    if (static_cast<int64_t>(v.data.size()) != numel(v.type.shape))
      fail(where, "argument ", i + 1, " (", p.name, "): ", v.data.size(), " values for ",
           desc(v.type), " (", numel(v.type.shape), " elements)");
  }
}

std::vector<Input> resolve(const BoundSymbol& b, const Env& env) {
  std::vector<Input> in;
  in.reserve(b.inputs.size());
  for (const Operand& o : b.inputs) {
    if (o.is_scalar())
      in.push_back(Input{nullptr, *o.scalar});
    else
      in.push_back(Input{&lookup(env, o.name), 0.0});
  }
  return in;
}

void store(const Proxy& out, Data data, Env& env) {
  FSDPC_CHECK(static_cast<int64_t>(data.size()) == numel(out.type.shape))
      << "reference kernel gave " << data.size() << " values for " << out.name << ": "
      << type_str(out.type);
  env[out.name] = Value{out.type, std::move(data)};
}

// One rank's step for every op that needs no other rank.
void run_local(const BoundSymbol& b, Env& env) {
  if (b.op == OpId::Del) {
    for (const Operand& o : b.inputs)
      FSDPC_CHECK(env.erase(o.name) == 1) << "del of " << o.name << ", which is not live";
    return;
  }
  std::vector<Input> in = resolve(b, env);
  if (b.op == OpId::Unpack) {
    std::vector<Data> parts = run_unpack(b, *in[0].value);
    FSDPC_CHECK(parts.size() == b.outputs.size()) << "unpack: " << parts.size() << " parts";
    for (size_t i = 0; i < parts.size(); ++i) store(b.outputs[i], std::move(parts[i]), env);
    return;
  }
  if (op_info(b.op).composite) {
    std::vector<Data> results = run_composite(b, in);
    FSDPC_CHECK(results.size() == b.outputs.size()) << op_name(b.op) << ": " << results.size() << " results";
    for (size_t i = 0; i < results.size(); ++i) store(b.outputs[i], std::move(results[i]), env);
    return;
  }
  const Proxy& out = b.output();
  store(out, run_prim(b, in, out.type), env);
}

void run_bsyms(const std::vector<BoundSymbol>& bsyms, const Mesh& mesh, Mailbox* mailbox,
               std::vector<Env>& envs);

// Runs a composite's decomposition, then drops its intermediates so only the
// composite's own outputs stay live, as if it had run whole.
void run_decomposition(const BoundSymbol& b, const Mesh& mesh, Mailbox* mailbox, std::vector<Env>& envs) {
  run_bsyms(b.subsymbols, mesh, mailbox, envs);
  std::vector<std::string> temps;
  for_each_bsym(b.subsymbols, [&](const BoundSymbol& s) {
    for (const Proxy& p : s.outputs) {
      bool is_output = false;
      for (const Proxy& o : b.outputs) is_output = is_output || o.name == p.name;
      if (!is_output) temps.push_back(p.name);
    }
  });
  for (Env& env : envs)
    for (const std::string& t : temps) env.erase(t);
}

void run_bsyms(const std::vector<BoundSymbol>& bsyms, const Mesh& mesh, Mailbox* mailbox,
               std::vector<Env>& envs) {
  for (const BoundSymbol& b : bsyms) {
    if (is_point_to_point(b.op)) {
      run_point_to_point(b, mailbox, envs);
    } else if (is_cross_rank(b.op)) {
      run_collective(b, mesh, envs);
    } else if (op_info(b.op).composite && !b.subsymbols.empty()) {
      run_decomposition(b, mesh, mailbox, envs);
    } else {
      for (Env& env : envs) run_local(b, env);
    }
  }
}

}  // namespace

Value make_value(TensorType type, std::vector<double> data) {
  if (static_cast<int64_t>(data.size()) != numel(type.shape))
    fail("make_value: ", data.size(), " values for ", desc(type), " (", numel(type.shape),
         " elements)");
  return Value{std::move(type), std::move(data)};
}

const Value& lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  FSDPC_CHECK(it != env.end()) << "value '" << name << "' is used but not live (never defined, "
                               << "or used after del)";
  return it->second;
}

std::vector<std::vector<Value>> run_spmd(const Trace& trace, const Mesh& mesh,
                                         const std::vector<std::vector<Value>>& args) {
  return run_spmd(trace, mesh, args, nullptr);
}

std::vector<std::vector<Value>> run_spmd(const Trace& trace, const Mesh& mesh,
                                         const std::vector<std::vector<Value>>& args, Mailbox* mailbox) {
  const int world = mesh.world();
  if (static_cast<int>(args.size()) != world)
    fail("run_spmd: ", args.size(), " argument lists for a mesh of ", world, " ranks");
  std::vector<Env> envs(world);
  for (int r = 0; r < world; ++r) {
    check_args(trace, args[r], world > 1 ? "rank " + std::to_string(r) + ": " : "");
    for (size_t i = 0; i < args[r].size(); ++i)
      envs[r][trace.args[i].name] = Value{trace.args[i].type, args[r][i].data};
  }
  run_bsyms(trace.bsyms, mesh, mailbox, envs);

  std::vector<std::string> names;
  trace.returns.collect_names(names);
  std::vector<std::vector<Value>> results(world);
  for (int r = 0; r < world; ++r)
    for (const std::string& n : names) results[r].push_back(lookup(envs[r], n));
  return results;
}

std::vector<Value> run(const Trace& trace, const std::vector<Value>& args) {
  return run_spmd(trace, flat_mesh(1), {args})[0];
}

}  // namespace fsdpc::reference
