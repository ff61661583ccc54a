// describe_region(): finds the iteration shape (the largest-rank shape in the
// region), then walks its statements once, giving every value a step and
// every distinct (input, strides) a load. bf16 is storage only (the
// lowerings compute in f32 and round where a value is bf16), so only a
// convert or a broadcast may read or define it; a region with other bf16
// statements is refused, as passes/fuse.cpp never forms one.
#include "executors/fusion/region.h"

#include <unordered_map>

#include "ir/error.h"
#include "ir/printer.h"

namespace fsdpc::fusion {

namespace {

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// The strides over `out` of `in` broadcast along broadcast_dims `bd`.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out, const IntList& bd) {
  const std::vector<int64_t> own = contiguous_strides(in);
  std::vector<int64_t> s(out.size(), 0);
  for (size_t i = 0; i < bd.size(); ++i)
    if (in[i] != 1 || out[static_cast<size_t>(bd[i])] == 1) s[static_cast<size_t>(bd[i])] = own[i];
  return s;
}

bool is_row_reduction(OpId op) { return op == OpId::Sum || op == OpId::Amax; }

class Builder {
 public:
  Builder(const BoundSymbol& f, const std::vector<TensorType>& types) : f_(f), types_(types) {
    for (size_t i = 0; i < f.inputs.size(); ++i) input_index_[f.inputs[i].name] = static_cast<int>(i);
  }

  Region build() {
    FSDPC_CHECK(!f_.subsymbols.empty()) << "a fusion region without statements";
    r_.shape = iteration_shape();
    if (!r_.shape.empty()) row_shape_ = Shape(r_.shape.begin(), r_.shape.end() - 1);
    for (const BoundSymbol& s : f_.subsymbols) add(s);
    for (const Proxy& o : f_.outputs) {
      auto it = step_of_.find(o.name);
      FSDPC_CHECK(it != step_of_.end()) << "region output " << o.name << " is not defined inside";
      r_.outputs.push_back(it->second);
    }
    return std::move(r_);
  }

 private:
  // The largest-rank shape a statement defines or a reduction reads.
  Shape iteration_shape() const {
    std::unordered_map<std::string, Shape> inside;
    Shape best = f_.subsymbols[0].output().type.shape;
    auto consider = [&](const Shape& s) {
      if (s.size() > best.size()) best = s;
    };
    for (const BoundSymbol& s : f_.subsymbols) {
      consider(s.output().type.shape);
      if (is_row_reduction(s.op) && !s.inputs.empty() && !s.inputs[0].is_scalar()) {
        auto it = inside.find(s.inputs[0].name);
        if (it != inside.end()) consider(it->second);
        else if (auto in = input_index_.find(s.inputs[0].name); in != input_index_.end())
          consider(types_.at(static_cast<size_t>(in->second)).shape);
      }
      inside[s.output().name] = s.output().type.shape;
    }
    return best;
  }

  // Whether a value of `shape` is per row (else per element); anything else fails.
  bool level_of(const Shape& shape, const std::string& name) const {
    if (shape == r_.shape) return false;
    if (!r_.shape.empty() && shape == row_shape_) return true;
    fail("fusion: ", name, " has shape ", shape_str(shape), ", the region iterates over ", shape_str(r_.shape));
  }

  // Strides over the iteration space of a value with strides `own` over its
  // level's shape: a row value does not move along the row.
  static std::vector<int64_t> strides_at(bool row, std::vector<int64_t> own) {
    if (row) own.push_back(0);
    return own;
  }

  void add(const BoundSymbol& s) {
    const TensorType& out = s.output().type;
    Step step;
    step.op = s.op;
    step.dtype = out.dtype;
    step.row = level_of(out.shape, s.output().name);
    if (s.op == OpId::BroadcastInDim) {
      const IntList bd = s.attrs.get_ints("broadcast_dims");
      auto inner = step_of_.find(s.inputs[0].name);
      if (inner != step_of_.end()) {
        // Only a row value broadcast back along the row is indexed in a loop.
        const Step& from = r_.steps[static_cast<size_t>(inner->second)];
        bool back = from.row && !step.row && bd.size() + 1 == r_.shape.size();
        for (size_t i = 0; back && i < bd.size(); ++i) back = bd[i] == static_cast<int64_t>(i);
        if (!back) fail("fusion: ", s.output().name, " broadcasts a value of the region other than a row along its row");
        step.kind = StepKind::splat;
        step.args.push_back(StepArg{StepArg::Kind::step, inner->second, 0});
      } else {
        const int in = input_of(s.inputs[0].name);
        const TensorType& t = types_.at(static_cast<size_t>(in));
        step.kind = StepKind::load;
        step.args.push_back(load(in, t.dtype, strides_at(step.row, broadcast_strides(t.shape, out.shape, bd))));
      }
    } else if (is_row_reduction(s.op)) {
      const IntList dims = s.attrs.get_ints("dims");
      if (!step.row || dims.size() != 1 || dims[0] + 1 != static_cast<int64_t>(r_.shape.size()))
        fail("fusion: ", s.output().name, " = ", op_name(s.op), " reduces other than the innermost dimension of ",
             shape_str(r_.shape));
      step.kind = s.op == OpId::Sum ? StepKind::sum : StepKind::amax;
      const StepArg a = arg(s.inputs[0], false);
      if (a.kind == StepArg::Kind::step && r_.steps[static_cast<size_t>(a.index)].row)
        fail("fusion: ", s.output().name, " reduces a row value");
      step.args.push_back(a);
    } else {
      step.expr = scalar_expr(s.op);
      if (!step.expr) fail("fusion: ", op_name(s.op), " has no scalar expression (ir/scalar_exprs.def)");
      for (const Operand& a : s.inputs) {
        const StepArg sa = arg(a, step.row);
        if (sa.kind == StepArg::Kind::step && r_.steps[static_cast<size_t>(sa.index)].row != step.row)
          fail("fusion: ", s.output().name, " mixes row and element values without a broadcast");
        step.args.push_back(sa);
      }
    }
    if (s.op != OpId::ConvertElementType && s.op != OpId::BroadcastInDim) {
      bool bf16 = step.dtype == DType::bf16;
      for (const StepArg& a : step.args) bf16 = bf16 || dtype_of(a) == DType::bf16;
      if (bf16)
        fail("fusion: ", s.output().name, " = ", op_name(s.op),
             " computes in bf16; a region holds bf16 only in converts and broadcasts");
    }
    step_of_[s.output().name] = static_cast<int>(r_.steps.size());
    r_.steps.push_back(std::move(step));
  }

  DType dtype_of(const StepArg& a) const {
    switch (a.kind) {
      case StepArg::Kind::load: return r_.loads[static_cast<size_t>(a.index)].dtype;
      case StepArg::Kind::step: return r_.steps[static_cast<size_t>(a.index)].dtype;
      default: return DType::f32;  // a literal takes the type it meets
    }
  }

  StepArg arg(const Operand& a, bool row) {
    if (a.is_scalar()) return StepArg{StepArg::Kind::literal, 0, *a.scalar};
    auto st = step_of_.find(a.name);
    if (st != step_of_.end()) return StepArg{StepArg::Kind::step, st->second, 0};
    const int in = input_of(a.name);
    const TensorType& t = types_.at(static_cast<size_t>(in));
    const Shape& want = row ? row_shape_ : r_.shape;
    if (t.shape != want)
      fail("fusion: input ", a.name, " ", shape_str(t.shape), " is read at shape ", shape_str(want));
    return load(in, t.dtype, strides_at(row, contiguous_strides(t.shape)));
  }

  StepArg load(int input, DType dtype, std::vector<int64_t> strides) {
    for (size_t i = 0; i < r_.loads.size(); ++i)
      if (r_.loads[i].input == input && r_.loads[i].strides == strides)
        return StepArg{StepArg::Kind::load, static_cast<int>(i), 0};
    r_.loads.push_back(Load{input, dtype, std::move(strides)});
    return StepArg{StepArg::Kind::load, static_cast<int>(r_.loads.size() - 1), 0};
  }

  int input_of(const std::string& name) const {
    auto it = input_index_.find(name);
    FSDPC_CHECK(it != input_index_.end()) << "region reads " << name << ", which is not one of its inputs";
    return it->second;
  }

  const BoundSymbol& f_;
  const std::vector<TensorType>& types_;
  std::unordered_map<std::string, int> input_index_;
  std::unordered_map<std::string, int> step_of_;
  Region r_;
  Shape row_shape_;
};

void append_ints(std::string& out, const std::vector<int64_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  out += ']';
}

}  // namespace

Region describe_region(const BoundSymbol& fusion, const std::vector<TensorType>& input_types) {
  return Builder(fusion, input_types).build();
}

int64_t Region::rows() const {
  int64_t n = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) n *= shape[d];
  return n;
}

std::string Region::signature() const {
  static constexpr const char* kKind[] = {"", "load", "splat", "sum", "amax"};
  std::string out = "shape";
  append_ints(out, shape);
  for (const Load& l : loads) {
    out += ";L" + std::to_string(l.input) + ":" + std::string(dtype_name(l.dtype));
    append_ints(out, l.strides);
  }
  for (const Step& s : steps) {
    out += ";S" + std::string(op_name(s.op)) + kKind[static_cast<int>(s.kind)] + ":" +
           std::string(dtype_name(s.dtype)) + (s.row ? "/row(" : "(");
    for (const StepArg& a : s.args) {
      switch (a.kind) {
        case StepArg::Kind::load: out += "l" + std::to_string(a.index); break;
        case StepArg::Kind::step: out += "s" + std::to_string(a.index); break;
        case StepArg::Kind::literal: out += format_double(a.literal); break;
      }
      out += ',';
    }
    out += ')';
  }
  out += ";O";
  for (int o : outputs) out += std::to_string(o) + ",";
  return out;
}

FlatStatement flat_statement(const BoundSymbol& b, const std::vector<const TensorType*>& input_types) {
  if (op_info(b.op).category != OpCategory::elementwise || b.outputs.size() != 1)
    fail("fusion: ", op_name(b.op), " is not an elementwise statement with one output");
  FSDPC_CHECK(input_types.size() == b.inputs.size()) << op_name(b.op) << ": " << input_types.size() << " types for "
                                                      << b.inputs.size() << " inputs";
  const Shape flat = {numel(b.output().type.shape)};
  FlatStatement f;
  BoundSymbol inner = b;
  inner.executor.clear();
  inner.outputs[0].type.shape = flat;
  f.fusion.op = OpId::Fusion;
  f.fusion.executor = b.executor;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    if (b.inputs[i].is_scalar()) continue;
    FSDPC_CHECK(input_types[i]) << op_name(b.op) << ": input " << i << " has no type";
    // Inputs of an elementwise op have the output's shape (no broadcasting).
    TensorType t = *input_types[i];
    t.shape = flat;
    // The same value read twice (mul(x, x)) is one input of the region.
    bool seen = false;
    for (const Operand& o : f.fusion.inputs) seen = seen || o.name == b.inputs[i].name;
    if (seen) continue;
    f.fusion.inputs.push_back(b.inputs[i]);
    f.input_types.push_back(t);
    f.tensor_inputs.push_back(i);
  }
  f.fusion.outputs = inner.outputs;
  f.fusion.subsymbols.push_back(std::move(inner));
  return f;
}

}  // namespace fsdpc::fusion
