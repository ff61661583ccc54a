// describe_region(): walks a region's statements once, giving every value a
// step and every distinct (input, strides) a load.
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

class Builder {
 public:
  Builder(const BoundSymbol& f, const std::vector<TensorType>& types) : f_(f), types_(types) {
    for (size_t i = 0; i < f.inputs.size(); ++i) input_index_[f.inputs[i].name] = static_cast<int>(i);
  }

  Region build() {
    FSDPC_CHECK(!f_.subsymbols.empty()) << "a fusion region without statements";
    r_.shape = f_.subsymbols[0].output().type.shape;
    for (const BoundSymbol& s : f_.subsymbols) add(s);
    for (const Proxy& o : f_.outputs) {
      auto it = step_of_.find(o.name);
      FSDPC_CHECK(it != step_of_.end()) << "region output " << o.name << " is not defined inside";
      r_.outputs.push_back(it->second);
    }
    return std::move(r_);
  }

 private:
  void add(const BoundSymbol& s) {
    const TensorType& out = s.output().type;
    if (out.shape != r_.shape)
      fail("fusion: ", s.output().name, " has shape ", shape_str(out.shape), ", the region iterates over ",
           shape_str(r_.shape));
    Step step;
    step.op = s.op;
    step.dtype = out.dtype;
    if (s.op == OpId::BroadcastInDim) {
      const int in = input_of(s.inputs[0].name);
      const TensorType& t = types_.at(static_cast<size_t>(in));
      step.args.push_back(load(in, t.dtype, broadcast_strides(t.shape, r_.shape, s.attrs.get_ints("broadcast_dims"))));
    } else {
      step.expr = scalar_expr(s.op);
      if (!step.expr) fail("fusion: ", op_name(s.op), " has no scalar expression (ir/scalar_exprs.def)");
      for (const Operand& a : s.inputs) step.args.push_back(arg(a));
    }
    step_of_[s.output().name] = static_cast<int>(r_.steps.size());
    r_.steps.push_back(std::move(step));
  }

  StepArg arg(const Operand& a) {
    if (a.is_scalar()) return StepArg{StepArg::Kind::literal, 0, *a.scalar};
    auto st = step_of_.find(a.name);
    if (st != step_of_.end()) return StepArg{StepArg::Kind::step, st->second, 0};
    const int in = input_of(a.name);
    const TensorType& t = types_.at(static_cast<size_t>(in));
    if (t.shape != r_.shape)
      fail("fusion: input ", a.name, " ", shape_str(t.shape), " is read at shape ", shape_str(r_.shape));
    return load(in, t.dtype, contiguous_strides(t.shape));
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

std::string Region::signature() const {
  std::string out = "shape";
  append_ints(out, shape);
  for (const Load& l : loads) {
    out += ";L" + std::to_string(l.input) + ":" + std::string(dtype_name(l.dtype));
    append_ints(out, l.strides);
  }
  for (const Step& s : steps) {
    out += ";S" + std::string(op_name(s.op)) + ":" + std::string(dtype_name(s.dtype)) + "(";
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

}  // namespace fsdpc::fusion
