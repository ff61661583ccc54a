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
// Pre:  a trace whose parameter arguments are this rank's shards: the fsdp
//       pass's output, or any later one (advise passes the forward).
// Post: outer(theta, anchor[, momentum] per parameter) ->
//       (anchor'..., momentum'...); verifies; dels placed.
#include "passes/outer_step.h"

#include <cmath>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/quantize.h"
#include "passes/del.h"
#include "passes/schedule.h"

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
  if (!d.enabled()) return;
  if (!std::isfinite(d.outer_lr) || d.outer_lr <= 0) fail("--outer-lr must be positive, got ", d.outer_lr);
  if (!std::isfinite(d.outer_momentum) || d.outer_momentum < 0 || d.outer_momentum >= 1)
    fail("--outer-momentum must be in [0, 1), got ", d.outer_momentum);
  if (d.outer_dtype != DType::f32 && d.outer_dtype != DType::bf16 && d.outer_dtype != DType::i8)
    fail("--outer-dtype ", outer_dtype_name(d.outer_dtype), " is not supported (expected f32, bf16 or int8)");
  if (!is_hybrid(strategy))
    fail("--outer-steps (DiLoCo) trains the replicas of a hybrid mesh apart; --strategy ",
         strategy_name(strategy), " has no replicas (use --strategy hybrid or hybrid_zero2 with --mesh R,S)");
}

Trace outer_step_trace(const Trace& sharded, const DilocoOptions& d, const Mesh& mesh) {
  FSDPC_CHECK(d.enabled()) << "outer_step_trace without --outer-steps";
  Trace t;
  t.name = "outer";
  TraceBuilder b(t);
  const double replicas = mesh.replicas;
  const bool momentum = d.outer_momentum != 0;
  auto scaled = [&](OpId op, const Proxy& x, double s) { return b.emit1(op, {tensor(x), Operand::lit(s)}); };
  auto binary = [&](OpId op, const Proxy& x, const Proxy& y) { return b.emit1(op, {tensor(x), tensor(y)}); };

  std::vector<ReturnTree> anchors, momenta;
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
    anchors.push_back(ReturnTree::leaf(binary(OpId::Sub, anchor, scaled(OpId::Mul, step, d.outer_lr)).name));
  }
  if (anchors.empty()) fail("--outer-steps: the model has no parameter that trains");
  anchors.insert(anchors.end(), momenta.begin(), momenta.end());
  t.returns = ReturnTree::tuple(std::move(anchors));
  // The replicas' exchanges overlap one another: all issued, then waited.
  issue_before_waiting(t);
  t = insert_dels(t);
  t.provenance = "outer_step";
  return t;
}

}  // namespace fsdpc
