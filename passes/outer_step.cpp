// outer_step: DiLoCo's outer optimizer as a trace. Under DiLoCo (Douillard
// et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language
// Models") the replicas of a hybrid mesh train apart: the fsdp pass leaves
// out the gradients' all_reduce over `replicate` (PipelineOptions::diloco),
// so an inner step moves no byte between replicas. Every H steps each rank
// runs this trace on its own rows: the replicas' average distance from the
// anchor (the parameters at the round's start) is the outer gradient, and
// Nesterov SGD moves the anchor by it. One all_reduce of the model's shard
// per H steps replaces H of them, which is what lets training cross slow
// links. Being a trace, it prints in `fsdpc dump`, is claimed and fused like
// any other, and its collectives are counted by `--stats`.
//
// Streaming DiLoCo (Douillard et al. 2025, "Streaming DiLoCo with
// overlapping communication") moves one fragment of the model at a time, at
// staggered steps, so the link carries 1/F of the model per exchange; with a
// delay the exchange stays in flight while the replicas train on, and the
// landed anchor is mixed into the replica's parameters. outer_fragments()
// cuts each fragment's statements out of the whole outer trace, and, with a
// delay, cuts those again at the waits into issue, land and update traces:
// the engine runs them at different steps, holding the futures between.
//
// Pre:  a trace whose parameter arguments are this rank's shards: the fsdp
//       pass's output, or any later one (advise passes the forward).
// Post: outer(theta, anchor[, momentum] per parameter) ->
//       (anchor'..., momentum'..., [theta'...]); verifies; dels placed. The
//       fragments' traces verify too.
#include "passes/outer_step.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/quantize.h"
#include "ir/verifier.h"
#include "passes/del.h"
#include "passes/schedule.h"
#include "passes/wrap.h"

namespace fsdpc {

namespace {

Operand tensor(const Proxy& p) { return Operand::of(p.name); }

Attrs replicate_group(int replicas) {
  return Attrs{{"group", std::string("replicate")}, {"size", static_cast<int64_t>(replicas)}};
}

// The sum over the replicas of each one's delta (already divided by R).
Proxy all_reduce_mean(TraceBuilder& b, const Proxy& delta, int replicas) {
  Proxy future = b.emit1(OpId::AllReduce, {tensor(delta)}, replicate_group(replicas).set("op", std::string("sum")));
  return b.emit1(OpId::Wait, {tensor(future)});
}

// The same sum with `narrow` on the link: each replica's delta rounded to
// it (bf16) or coded in int8 blocks with f32 scales (i8, ir/quantize.h) and
// gathered whole, then widened and summed in f32, so that the sum adds no
// rounding of its own. Gathering moves (R - 1) deltas into each rank against
// the ring all_reduce's 2 (R - 1) / R; in bf16, half as wide, that is as
// many bytes at R = 2 and more beyond; int8 is a quarter of f32 (plus 1.6%
// of scales), half the ring's bytes at R = 2.
Proxy gathered_mean(TraceBuilder& b, const Proxy& delta, DType narrow, int replicas) {
  const int64_t n = numel(delta.type.shape);
  const Attrs gather = replicate_group(replicas).set("dim", int64_t{0});
  Proxy rows;  // [R, n] f32: every replica's delta
  if (narrow == DType::i8) {
    const Attrs block{{"block", kQuantBlock}};
    Proxy row = b.emit1(OpId::Reshape, {tensor(delta)}, Attrs{{"shape", IntList{1, n}}});
    Proxy q = b.emit1(OpId::Quantize, {tensor(row)}, block);
    Proxy all = b.emit1(OpId::Wait, {tensor(b.emit1(OpId::AllGather, {tensor(q)}, gather))});
    rows = b.emit1(OpId::Dequantize, {tensor(all)}, Attrs(block).set("dtype", std::string(dtype_name(DType::f32))));
  } else {
    Proxy flat = b.emit1(OpId::Reshape, {tensor(delta)}, Attrs{{"shape", IntList{n}}});
    Proxy cast = b.emit1(OpId::ConvertElementType, {tensor(flat)}, Attrs{{"dtype", std::string(dtype_name(narrow))}});
    Proxy all = b.emit1(OpId::Wait, {tensor(b.emit1(OpId::AllGather, {tensor(cast)}, gather))});
    Proxy wide = b.emit1(OpId::ConvertElementType, {tensor(all)}, Attrs{{"dtype", std::string(dtype_name(DType::f32))}});
    rows = b.emit1(OpId::Reshape, {tensor(wide)}, Attrs{{"shape", IntList{replicas, n}}});
  }
  Proxy sum = b.emit1(OpId::Sum, {tensor(rows)}, Attrs{{"dims", IntList{0}}});
  return b.emit1(OpId::Reshape, {tensor(sum)}, Attrs{{"shape", IntList(delta.type.shape)}});
}

}  // namespace

std::string_view outer_dtype_name(DType d) { return d == DType::i8 ? "int8" : dtype_name(d); }

void check_diloco_options(const DilocoOptions& d, Strategy strategy) {
  if (d.outer_steps < 0) fail("--outer-steps must be at least 1 (0: off), got ", d.outer_steps);
  // Streaming flags mean nothing without --outer-steps: say so rather than
  // ignore them.
  if (!d.enabled() && (d.outer_fragments != 1 || d.outer_delay != 0 || d.outer_mix >= 0))
    fail("--outer-fragments, --outer-delay and --outer-mix shape DiLoCo's outer step: add --outer-steps H");
  if (!d.enabled()) return;
  if (!std::isfinite(d.outer_lr) || d.outer_lr <= 0) fail("--outer-lr must be positive, got ", d.outer_lr);
  if (!std::isfinite(d.outer_momentum) || d.outer_momentum < 0 || d.outer_momentum >= 1)
    fail("--outer-momentum must be in [0, 1), got ", d.outer_momentum);
  if (d.outer_dtype != DType::f32 && d.outer_dtype != DType::bf16 && d.outer_dtype != DType::i8)
    fail("--outer-dtype ", outer_dtype_name(d.outer_dtype), " is not supported (expected f32, bf16 or int8)");
  if (!is_hybrid(strategy))
    fail("--outer-steps (DiLoCo) trains the replicas of a hybrid mesh apart; --strategy ",
         strategy_name(strategy), " has no replicas (use --strategy hybrid or hybrid_zero2 with --mesh R,S)");
  if (d.outer_fragments < 1)
    fail("--outer-fragments must be at least 1 (1: the whole model at once), got ", d.outer_fragments);
  if (d.outer_delay < 0) fail("--outer-delay must be at least 0 (0: an exchange lands at once), got ", d.outer_delay);
  if (d.outer_delay >= d.outer_steps)
    fail("--outer-delay ", d.outer_delay, ": a fragment's exchange must land before its next one, ", d.outer_steps,
         " steps later (expected a delay below --outer-steps ", d.outer_steps, ")");
  if (std::isnan(d.outer_mix) || d.outer_mix >= 1)
    fail("--outer-mix must be in [0, 1) (the replica's share of a landed fragment), got ", d.outer_mix);
}

namespace {

// outer_step_trace before its dels: the statements in issue order.
Trace outer_statements(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh) {
  FSDPC_CHECK(d.enabled()) << "outer_step_trace without --outer-steps";
  Trace t;
  t.name = "outer";
  TraceBuilder b(t);
  const double replicas = mesh.replicas;
  const bool momentum = d.outer_momentum != 0;
  const double mix = d.mix();
  auto scaled = [&](OpId op, const Proxy& x, double s) { return b.emit1(op, {tensor(x), Operand::lit(s)}); };
  auto binary = [&](OpId op, const Proxy& x, const Proxy& y) { return b.emit1(op, {tensor(x), tensor(y)}); };

  std::vector<ReturnTree> anchors, momenta, thetas;
  for (const Proxy& a : sharded.args) {
    if (!a.is_param() || !a.requires_grad) continue;
    Proxy theta = a;
    theta.type.dist = DistType::none;
    Proxy anchor{"anchor_" + a.name, theta.type, "", false};
    Proxy buf{"momentum_" + a.name, theta.type, "", false};
    b.add_arg(theta);
    b.add_arg(anchor);
    if (momentum) b.add_arg(buf);
    // Divide before summing, as the gradients' reduction does (passes/
    // vjp_rules.h reduce_synchronized_grad): narrow sums cannot overflow.
    Proxy delta = scaled(OpId::Div, binary(OpId::Sub, anchor, theta), replicas);
    Proxy mean = d.outer_dtype == DType::f32 ? all_reduce_mean(b, delta, mesh.replicas)
                                             : gathered_mean(b, delta, d.outer_dtype, mesh.replicas);
    Proxy step = mean;
    if (momentum) {
      Proxy next = binary(OpId::Add, scaled(OpId::Mul, buf, d.outer_momentum), mean);
      momenta.push_back(ReturnTree::leaf(next.name));
      step = binary(OpId::Add, mean, scaled(OpId::Mul, next, d.outer_momentum));
    }
    Proxy moved = binary(OpId::Sub, anchor, scaled(OpId::Mul, step, d.outer_lr));
    anchors.push_back(ReturnTree::leaf(moved.name));
    // Streaming DiLoCo's merge: the replica keeps `mix` of where its own
    // steps took it since the exchange was issued.
    if (mix > 0)
      thetas.push_back(
          ReturnTree::leaf(binary(OpId::Add, scaled(OpId::Mul, theta, mix), scaled(OpId::Mul, moved, 1 - mix)).name));
  }
  if (anchors.empty()) fail("--outer-steps: the model has no parameter that trains");
  anchors.insert(anchors.end(), momenta.begin(), momenta.end());
  anchors.insert(anchors.end(), thetas.begin(), thetas.end());
  t.returns = ReturnTree::tuple(std::move(anchors));
  // The replicas' exchanges overlap one another: all issued, then waited.
  issue_before_waiting(t);
  return t;
}

Trace finished(Trace t, std::string name) {
  t.name = std::move(name);
  t = insert_dels(t);
  t.provenance = "outer_step";
  verify(t);
  return t;
}

// The statements of `whole` (no dels) that read, directly or not, one of
// `args`; the arguments among `args` and the returns among what they define,
// each in `whole`'s order.
Trace slice(const Trace& whole, const std::unordered_set<std::string>& args) {
  Trace t;
  t.next_id = whole.next_id;
  std::unordered_set<std::string> in(args);
  for (const Proxy& a : whole.args)
    if (in.count(a.name)) t.args.push_back(a);
  for (const BoundSymbol& b : whole.bsyms) {
    bool reads = false;
    for (const Operand& o : b.inputs) reads = reads || (!o.is_scalar() && in.count(o.name));
    if (!reads) continue;
    for (const Proxy& p : b.outputs) in.insert(p.name);
    t.bsyms.push_back(b);
  }
  std::vector<std::string> names;
  whole.returns.collect_names(names);
  std::vector<ReturnTree> returns;
  for (const std::string& n : names)
    if (in.count(n)) returns.push_back(ReturnTree::leaf(n));
  t.returns = ReturnTree::tuple(std::move(returns));
  return t;
}

// A fragment's outer step cut at its waits (OuterFragment): `step` holds no
// dels yet.
void cut_at_waits(const Trace& step, OuterFragment& f, const std::string& name) {
  const size_t n = step.bsyms.size();
  std::unordered_map<std::string, size_t> defined_by;
  for (size_t i = 0; i < n; ++i)
    for (const Proxy& p : step.bsyms[i].outputs) defined_by[p.name] = i;
  // issue: the collectives and what they read; land: the waits and what
  // reads only landed values; update: the rest.
  enum class Part { issue, land, update };
  std::vector<Part> part(n, Part::update);
  for (size_t i = n; i-- > 0;) {
    const BoundSymbol& b = step.bsyms[i];
    if (op_info(b.op).has(OpTrait::issue)) part[i] = Part::issue;
    if (part[i] != Part::issue) continue;
    for (const Operand& o : b.inputs)
      if (auto it = o.is_scalar() ? defined_by.end() : defined_by.find(o.name); it != defined_by.end())
        part[it->second] = Part::issue;
  }
  for (size_t i = 0; i < n; ++i) {
    const BoundSymbol& b = step.bsyms[i];
    if (part[i] == Part::issue) continue;
    bool landed = b.op == OpId::Wait;
    if (!landed) {
      landed = true;
      for (const Operand& o : b.inputs) {
        if (o.is_scalar()) continue;
        auto it = defined_by.find(o.name);
        landed = landed && it != defined_by.end() && part[it->second] == Part::land;
      }
    }
    if (landed) part[i] = Part::land;
  }
  // What each part reads, to pass between them in definition order.
  auto reads_of = [&](Part reader) {
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < n; ++i)
      if (part[i] == reader)
        for (const Operand& o : step.bsyms[i].inputs)
          if (!o.is_scalar()) names.insert(o.name);
    return names;
  };
  // Each value's parameter: its statement's first operand's.
  std::unordered_map<std::string, std::string> owner;
  for (const Proxy& a : step.args)
    owner[a.name] = a.is_param() ? a.name : a.name.substr(a.name.find('_') + 1);  // anchor_<p>, momentum_<p>
  for (const BoundSymbol& b : step.bsyms)
    for (const Operand& o : b.inputs)
      if (!o.is_scalar()) {
        for (const Proxy& p : b.outputs) owner[p.name] = owner.at(o.name);
        break;
      }
  Trace issue, land, update;
  for (Trace* t : {&issue, &land, &update}) t->next_id = step.next_id;
  const std::unordered_set<std::string> issue_reads = reads_of(Part::issue), update_reads = reads_of(Part::update);
  for (const Proxy& a : step.args)
    if (issue_reads.count(a.name)) issue.args.push_back(a);
  std::vector<ReturnTree> futures, wires, means;
  for (size_t i = 0; i < n; ++i) {
    const BoundSymbol& b = step.bsyms[i];
    (part[i] == Part::issue ? issue : part[i] == Part::land ? land : update).bsyms.push_back(b);
    if (part[i] == Part::issue && op_info(b.op).has(OpTrait::issue)) {
      for (const Proxy& p : b.outputs) {
        futures.push_back(ReturnTree::leaf(p.name));
        land.args.push_back(p);
      }
      for (const Operand& o : b.inputs)
        if (!o.is_scalar()) wires.push_back(ReturnTree::leaf(o.name));
    }
    if (part[i] == Part::land)
      for (const Proxy& p : b.outputs)
        if (update_reads.count(p.name)) {
          means.push_back(ReturnTree::leaf(p.name));
          update.args.push_back(p);
          f.landed_params.push_back(owner.at(p.name));
        }
  }
  for (const Proxy& a : step.args)
    if (update_reads.count(a.name)) update.args.push_back(a);
  futures.insert(futures.end(), wires.begin(), wires.end());
  issue.returns = ReturnTree::tuple(std::move(futures));
  land.returns = ReturnTree::tuple(std::move(means));
  update.returns = step.returns;
  f.issue = finished(std::move(issue), name + "_issue");
  f.land = finished(std::move(land), name + "_land");
  f.update = finished(std::move(update), name + "_update");
}

// Futures that cross steps share the MPI and NCCL contexts' table, keyed by
// name, with the step traces' own: outer_ft<N> is no name of theirs.
void rename_futures(Trace& t) {
  std::unordered_map<std::string, std::string> renamed;
  for (BoundSymbol& b : t.bsyms) {
    for (Operand& o : b.inputs)
      if (auto it = renamed.find(o.name); !o.is_scalar() && it != renamed.end()) o.name = it->second;
    for (Proxy& p : b.outputs)
      if (p.type.future) p.name = renamed[p.name] = "outer_" + p.name;
  }
}

// Units of trained parameters, each with its parameter count.
struct TrainedUnit {
  std::vector<std::string> params;
  int64_t numel = 0;
};

std::vector<TrainedUnit> trained_units(const Trace& sharded, const std::string& wrap) {
  std::unordered_map<std::string, const Proxy*> trained;
  for (const Proxy& a : sharded.args)
    if (a.is_param() && a.requires_grad) trained.emplace(a.name, &a);
  std::vector<TrainedUnit> out;
  for (const Unit& u : wrap_units(sharded, wrap)) {
    TrainedUnit t;
    for (const std::string& p : u.params)
      if (auto it = trained.find(p); it != trained.end()) {
        t.params.push_back(p);
        t.numel += numel(it->second->type.shape);
      }
    if (!t.params.empty()) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Trace outer_step_trace(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh) {
  Trace t = insert_dels(outer_statements(sharded, d, mesh));
  t.provenance = "outer_step";
  return t;
}

std::vector<OuterFragment> outer_fragments(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh,
                                           const std::string& wrap) {
  const int count = d.outer_fragments;
  const std::vector<TrainedUnit> units = trained_units(sharded, wrap);
  if (static_cast<int>(units.size()) < count)
    fail("--outer-fragments ", count, ": fragments are made of whole FSDP units, and --wrap ", wrap, " gives ",
         units.size(), " unit", units.size() == 1 ? "" : "s", " of parameters that train (expected at most ",
         units.size(), " fragments, or a finer --wrap such as size:N)");
  // Cut c[f] (units before fragment f): nearest the even share, leaving at
  // least one unit to every fragment on either side.
  std::vector<int64_t> prefix(units.size() + 1, 0);
  for (size_t u = 0; u < units.size(); ++u) prefix[u + 1] = prefix[u] + units[u].numel;
  std::vector<size_t> cut(static_cast<size_t>(count) + 1, 0);
  cut[static_cast<size_t>(count)] = units.size();
  for (int f = 1; f < count; ++f) {
    const double share = static_cast<double>(prefix.back()) * f / count;
    size_t best = cut[static_cast<size_t>(f) - 1] + 1;
    for (size_t c = best; c + static_cast<size_t>(count - f) <= units.size(); ++c)
      if (std::abs(static_cast<double>(prefix[c]) - share) < std::abs(static_cast<double>(prefix[best]) - share))
        best = c;
    cut[static_cast<size_t>(f)] = best;
  }

  Trace whole = outer_statements(sharded, d, mesh);
  if (d.outer_delay > 0) rename_futures(whole);
  std::vector<OuterFragment> out;
  for (int f = 0; f < count; ++f) {
    OuterFragment frag;
    frag.offset = d.fragment_offset(f);
    std::unordered_set<std::string> args;
    for (size_t u = cut[static_cast<size_t>(f)]; u < cut[static_cast<size_t>(f) + 1]; ++u)
      for (const std::string& p : units[u].params) {
        frag.params.push_back(p);
        args.insert({p, "anchor_" + p, "momentum_" + p});
      }
    Trace step = slice(whole, args);
    const std::string name = count == 1 ? "outer" : "outer_f" + std::to_string(f);
    if (d.outer_delay > 0) cut_at_waits(step, frag, name);
    else frag.step = finished(std::move(step), name);
    out.push_back(std::move(frag));
  }
  return out;
}

}  // namespace fsdpc
