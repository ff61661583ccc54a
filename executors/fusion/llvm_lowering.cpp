// lower_region(): each region becomes `void <name>(ins, outs, row_begin,
// row_end)`, a row loop that offsets every load by the row's position and
// calls `<name>_row(cols, noalias pointers...)`, whose loops over the
// innermost dimension (one per reduction, one for the element outputs) the
// loop vectoriser widens: loads are unit-stride or invariant (broadcast),
// and noalias spares it runtime alias checks (outputs are fresh buffers).
// Each step's arithmetic comes from its op's scalar expression
// (ir/scalar_exprs.def). bf16 is held as i16 and converted with integer
// ops (a load widens exactly; a bf16 step rounds its f32 value to nearest
// even, NaN kept quiet, bit for bit as executors/bf16.h), not as LLVM's
// `bfloat`, whose x86 code generation LLVM 15 does not do reliably; the
// integer ops vectorise as the f32 ones do.
#include "executors/fusion/llvm_lowering.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <optional>

#include "ir/error.h"

namespace fsdpc::fusion {

namespace {

// A step's operand while emitting: a value, or a literal whose type is fixed
// by what it meets.
struct Val {
  llvm::Value* v = nullptr;
  std::optional<double> lit;
};

class Lowering {
 public:
  Lowering(llvm::LLVMContext& ctx, llvm::Module& m, const Region& r) : ctx_(ctx), m_(m), r_(r), b_(ctx) {}

  void emit(const std::string& name) {
    llvm::Function* row = emit_row(name + "_row");
    emit_driver(name, row);
  }

 private:
  llvm::Type* storage(DType d) {
    switch (d) {
      case DType::f32: return b_.getFloatTy();
      case DType::bf16: return b_.getInt16Ty();  // the upper half of an f32
      case DType::f64: return b_.getDoubleTy();
      case DType::boolean: return b_.getInt8Ty();
      case DType::i32: return b_.getInt32Ty();
      case DType::i64: return b_.getInt64Ty();
      default: fail("fusion JIT: dtype ", dtype_name(d), " is not lowered");
    }
  }
  // bf16 computes in f32 (its values are f32 values rounded to bf16).
  llvm::Type* compute(DType d) {
    if (d == DType::bf16) return b_.getFloatTy();
    return d == DType::boolean ? b_.getInt1Ty() : storage(d);
  }

  // bf16 bits (i16) as the f32 they are: the upper half, exactly.
  llvm::Value* widen_bf16(llvm::Value* h) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(h, b_.getInt32Ty()), 16), b_.getFloatTy());
  }

  // An f32 rounded to the nearest bf16, ties to even, still as an f32 (its
  // low half zero): executors/bf16.h's f32_to_bf16 on i32. A NaN stays NaN,
  // made quiet; a carry out of the mantissa rounds up to the next binade or
  // to infinity.
  llvm::Value* round_bf16(llvm::Value* f) {
    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Value* u = b_.CreateBitCast(f, i32);
    llvm::Value* hi = llvm::ConstantInt::get(i32, 0xffff0000u);
    llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, 0x7fffffffu), llvm::ConstantInt::get(i32, 0x7f800000u));
    llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(u, 16), 1u);
    llvm::Value* rounded = b_.CreateAnd(b_.CreateAdd(b_.CreateAdd(u, llvm::ConstantInt::get(i32, 0x7fffu)), odd), hi);
    llvm::Value* quiet = b_.CreateAnd(b_.CreateOr(u, llvm::ConstantInt::get(i32, 0x00400000u)), hi);
    return b_.CreateBitCast(b_.CreateSelect(nan, quiet, rounded), b_.getFloatTy());
  }

  int64_t cols() const { return r_.cols(); }

  bool per_row(const Load& l) const { return r_.shape.empty() || l.strides.back() == 0; }

  // One row: row steps run once, in order; each reduction is a loop over
  // j in [0, cols) that computes the element steps it needs and folds them;
  // a last loop computes and stores the element outputs. Element steps are
  // recomputed in each loop that needs them rather than stored: memory
  // traffic, not arithmetic, is what a region saves.
  llvm::Function* emit_row(const std::string& name) {
    std::vector<llvm::Type*> params{b_.getInt64Ty()};
    const size_t n_ptr = r_.loads.size() + r_.outputs.size();
    for (size_t i = 0; i < n_ptr; ++i) params.push_back(llvm::PointerType::get(ctx_, 0));
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    f_ = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, m_);
    for (size_t i = 1; i <= n_ptr; ++i) f_->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
    f_->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f_));
    n_ = f_->getArg(0);

    // Loads that do not move along the row, once per row.
    row_loads_.assign(r_.loads.size(), nullptr);
    for (size_t k = 0; k < r_.loads.size(); ++k)
      if (per_row(r_.loads[k])) row_loads_[k] = load_at(k, b_.getInt64(0));
    rows_.assign(r_.steps.size(), nullptr);
    for (size_t i = 0; i < r_.steps.size(); ++i) {
      const Step& s = r_.steps[i];
      if (!s.row) continue;
      if (s.kind == StepKind::sum || s.kind == StepKind::amax) {
        rows_[i] = emit_reduction(s);
      } else {
        rows_[i] = emit_step(s, [&](const StepArg& a) { return row_arg(a); });
      }
    }
    // Row outputs: their pointer is the row's element.
    std::vector<size_t> element_outputs;
    for (size_t m = 0; m < r_.outputs.size(); ++m) {
      const size_t o = static_cast<size_t>(r_.outputs[m]);
      if (r_.steps[o].row) store(m, rows_[o], b_.getInt64(0));
      else element_outputs.push_back(m);
    }
    if (!element_outputs.empty()) {
      Loop loop = open_loop();
      for (size_t m : element_outputs) store(m, element(static_cast<size_t>(r_.outputs[m])), loop.j);
      close_loop(loop);
    }
    b_.CreateRetVoid();
    return f_;
  }

  struct Loop {
    llvm::BasicBlock* pre = nullptr;
    llvm::BasicBlock* body = nullptr;
    llvm::BasicBlock* exit = nullptr;
    llvm::PHINode* j = nullptr;
  };

  // for j in [0, n): opens the body; element values are computed afresh in it.
  Loop open_loop() {
    Loop l;
    l.pre = b_.GetInsertBlock();
    l.body = llvm::BasicBlock::Create(ctx_, "loop", f_);
    l.exit = llvm::BasicBlock::Create(ctx_, "after", f_);
    b_.CreateCondBr(b_.CreateICmpSGT(n_, b_.getInt64(0)), l.body, l.exit);
    b_.SetInsertPoint(l.body);
    l.j = b_.CreatePHI(b_.getInt64Ty(), 2, "j");
    l.j->addIncoming(b_.getInt64(0), l.pre);
    j_ = l.j;
    elements_.assign(r_.steps.size(), nullptr);
    return l;
  }

  void close_loop(Loop& l) {
    llvm::Value* next = b_.CreateAdd(l.j, b_.getInt64(1), "j.next", /*HasNUW=*/true, /*HasNSW=*/true);
    l.j->addIncoming(next, b_.GetInsertBlock());
    l.body = b_.GetInsertBlock();
    b_.CreateCondBr(b_.CreateICmpSLT(next, n_), l.body, l.exit);
    b_.SetInsertPoint(l.exit);
    j_ = nullptr;
  }

  // A sum in f64 (as the CPU executor's reduce kernel; reassociation lets
  // the vectoriser keep one partial sum per lane), or an amax as maxnum plus
  // a NaN flag, so that NaN wins as in the reference and it still vectorises.
  llvm::Value* emit_reduction(const Step& s) {
    const bool sum = s.kind == StepKind::sum;
    Loop loop = open_loop();
    // The arg is emitted first so that amax knows its type; the phis are
    // then placed at the head of the loop.
    llvm::Value* x = element_val(s.args[0]).v;
    llvm::Type* acc_t = sum ? b_.getDoubleTy() : x->getType();
    llvm::Value* init = sum ? llvm::ConstantFP::get(acc_t, 0.0) : llvm::ConstantFP::getInfinity(acc_t, true);
    llvm::IRBuilder<> head(loop.body, loop.body->getFirstInsertionPt());
    llvm::PHINode* acc = head.CreatePHI(acc_t, 2, "acc");
    acc->addIncoming(init, loop.pre);
    llvm::PHINode* nan = nullptr;
    if (!sum) {
      nan = head.CreatePHI(head.getInt1Ty(), 2, "nan");
      nan->addIncoming(b_.getFalse(), loop.pre);
    }
    llvm::Value* acc_next = nullptr;
    llvm::Value* nan_next = nullptr;
    if (sum) {
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      acc_next = b_.CreateFAdd(acc, as(Val{x, {}}, acc_t));
      llvm::cast<llvm::Instruction>(acc_next)->setFastMathFlags(fmf);
    } else {
      acc_next = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, acc, x);
      nan_next = b_.CreateOr(nan, b_.CreateFCmpUNO(x, x));
    }
    close_loop(loop);
    llvm::PHINode* acc_out = b_.CreatePHI(acc_t, 2, "acc.out");
    acc_out->addIncoming(init, loop.pre);
    acc_out->addIncoming(acc_next, loop.body);
    acc->addIncoming(acc_next, loop.body);
    if (sum) return acc_out;  // f64: see emit_step
    nan->addIncoming(nan_next, loop.body);
    llvm::PHINode* nan_out = b_.CreatePHI(b_.getInt1Ty(), 2, "nan.out");
    nan_out->addIncoming(b_.getFalse(), loop.pre);
    nan_out->addIncoming(nan_next, loop.body);
    return b_.CreateSelect(nan_out, llvm::ConstantFP::getNaN(acc_t), acc_out);
  }

  // Element `j` (the current loop's, or 0 for a row load) of load k.
  llvm::Value* load_at(size_t k, llvm::Value* j) {
    const Load& l = r_.loads[k];
    const int64_t inner = r_.shape.empty() ? 0 : l.strides.back();
    llvm::Value* idx = inner == 0 ? static_cast<llvm::Value*>(b_.getInt64(0)) : b_.CreateMul(j, b_.getInt64(inner));
    llvm::Type* st = storage(l.dtype);
    llvm::Value* v = b_.CreateLoad(st, b_.CreateInBoundsGEP(st, f_->getArg(static_cast<unsigned>(1 + k)), idx));
    if (l.dtype == DType::boolean) v = b_.CreateICmpNE(v, b_.getInt8(0));
    if (l.dtype == DType::bf16) v = widen_bf16(v);
    return v;
  }

  void store(size_t m, llvm::Value* v, llvm::Value* j) {
    const Step& s = r_.steps[static_cast<size_t>(r_.outputs[m])];
    if (s.dtype == DType::boolean) v = b_.CreateZExt(v, b_.getInt8Ty());
    // A bf16 step's value is rounded already: its upper half is the bf16.
    if (s.dtype == DType::bf16) v = b_.CreateTrunc(b_.CreateLShr(b_.CreateBitCast(v, b_.getInt32Ty()), 16), b_.getInt16Ty());
    llvm::Type* st = storage(s.dtype);
    if (v->getType() != st) v = b_.CreateFPTrunc(v, st);
    b_.CreateStore(v, b_.CreateInBoundsGEP(st, f_->getArg(static_cast<unsigned>(1 + r_.loads.size() + m)), j));
  }

  Val row_arg(const StepArg& a) {
    switch (a.kind) {
      case StepArg::Kind::load: return {row_loads_[static_cast<size_t>(a.index)], {}};
      case StepArg::Kind::step: return {rows_[static_cast<size_t>(a.index)], {}};
      default: return {nullptr, a.literal};
    }
  }

  // An element step's value in the current loop, computed on first use.
  llvm::Value* element(size_t i) {
    if (elements_[i]) return elements_[i];
    const Step& s = r_.steps[i];
    llvm::Value* v = s.kind == StepKind::splat ? rows_[static_cast<size_t>(s.args[0].index)]
                                                : emit_step(s, [&](const StepArg& a) { return element_val(a); });
    elements_[i] = v;
    return v;
  }

  Val element_val(const StepArg& a) {
    switch (a.kind) {
      case StepArg::Kind::load: {
        const size_t k = static_cast<size_t>(a.index);
        return {row_loads_[k] ? row_loads_[k] : load_at(k, j_), {}};
      }
      case StepArg::Kind::step: return {element(static_cast<size_t>(a.index)), {}};
      default: return {nullptr, a.literal};
    }
  }

  // A step computes in its dtype, except that f32 arithmetic on a value
  // derived from a sum (which the region keeps in f64, as the CPU
  // executor's layer_norm keeps its statistics) stays in f64 until it is
  // stored: x - mean rounded to f32 would lose what 1/std amplifies. A bf16
  // step (a convert: fuse admits no bf16 arithmetic) computes in f32 and
  // rounds to bf16 where the unfused trace stores it: an f64 operand is
  // first rounded to f32 (the cast), as the f32 value it converts would be.
  template <class ArgFn>
  llvm::Value* emit_step(const Step& s, ArgFn&& arg_of) {
    std::vector<Val> args;
    for (const StepArg& a : s.args) args.push_back(arg_of(a));
    out_t_ = compute(s.dtype);
    if (s.dtype == DType::f32)
      for (const Val& a : args)
        if (!a.lit && a.v->getType()->isDoubleTy()) out_t_ = b_.getDoubleTy();
    if (s.kind == StepKind::load) return as(args.at(0), out_t_);  // a broadcast is its load (bf16: exact)
    llvm::Value* v = as(expr(*s.expr, s, args), out_t_);
    return s.dtype == DType::bf16 ? round_bf16(v) : v;
  }

  // A literal as a constant of `t` (IR scalars convert as the tensor's
  // dtype); an f32 value widened to f64 where it meets one.
  llvm::Value* as(const Val& v, llvm::Type* t) {
    if (!v.lit) {
      if (v.v->getType()->isFloatTy() && t->isDoubleTy()) return b_.CreateFPExt(v.v, t);
      return v.v;
    }
    if (t->isFloatingPointTy()) return llvm::ConstantFP::get(t, *v.lit);
    if (t->isIntegerTy(1)) return b_.getInt1(*v.lit != 0);
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(static_cast<int64_t>(*v.lit)), true);
  }

  // The type of a node whose operands share one: the widest non-literal's
  // (f64 over f32), else `fallback`.
  static llvm::Type* shared_type(const std::vector<Val>& xs, llvm::Type* fallback) {
    llvm::Type* t = nullptr;
    for (const Val& x : xs)
      if (!x.lit && (!t || x.v->getType()->isDoubleTy())) t = x.v->getType();
    return t ? t : fallback;
  }

  Val expr(const ScalarExpr& e, const Step& s, const std::vector<Val>& args) {
    if (e.prim == ScalarPrim::arg) return args.at(static_cast<size_t>(e.arg));
    if (e.prim == ScalarPrim::constant) return Val{nullptr, e.value};
    std::vector<Val> c;
    for (const ScalarExpr& child : e.children) c.push_back(expr(child, s, args));
    llvm::Type* out_t = out_t_;
    if (e.prim == ScalarPrim::select) {
      llvm::Type* t = shared_type({c[1], c[2]}, out_t);
      return {b_.CreateSelect(as(c[0], b_.getInt1Ty()), as(c[1], t), as(c[2], t)), {}};
    }
    if (e.prim == ScalarPrim::cast) return {cast(as(c[0], out_t), out_t), {}};
    llvm::Type* t = shared_type(c, out_t);
    std::vector<llvm::Value*> v;
    for (const Val& x : c) v.push_back(as(x, t));
    return {is_comparison(e.prim) ? compare(e.prim, v[0], v[1]) : arith(e.prim, v), {}};
  }

  llvm::Value* cast(llvm::Value* x, llvm::Type* to) {
    llvm::Type* from = x->getType();
    if (from == to) return x;
    if (to->isIntegerTy(1))
      return from->isFloatingPointTy() ? b_.CreateFCmpUNE(x, llvm::ConstantFP::get(from, 0.0))
                                       : b_.CreateICmpNE(x, llvm::ConstantInt::get(from, 0));
    if (from->isIntegerTy(1))
      return to->isFloatingPointTy() ? b_.CreateUIToFP(x, to) : b_.CreateZExt(x, to);
    if (from->isFloatingPointTy() && to->isFloatingPointTy()) return b_.CreateFPCast(x, to);
    if (from->isFloatingPointTy()) return b_.CreateFPToSI(x, to);
    if (to->isFloatingPointTy()) return b_.CreateSIToFP(x, to);
    return b_.CreateSExtOrTrunc(x, to);
  }

  llvm::Value* compare(ScalarPrim p, llvm::Value* x, llvm::Value* y) {
    if (x->getType()->isFloatingPointTy()) {
      switch (p) {
        case ScalarPrim::eq: return b_.CreateFCmpOEQ(x, y);
        case ScalarPrim::ne: return b_.CreateFCmpUNE(x, y);
        case ScalarPrim::lt: return b_.CreateFCmpOLT(x, y);
        case ScalarPrim::le: return b_.CreateFCmpOLE(x, y);
        case ScalarPrim::gt: return b_.CreateFCmpOGT(x, y);
        default: return b_.CreateFCmpOGE(x, y);
      }
    }
    const bool u = x->getType()->isIntegerTy(1);  // bool orders false < true
    switch (p) {
      case ScalarPrim::eq: return b_.CreateICmpEQ(x, y);
      case ScalarPrim::ne: return b_.CreateICmpNE(x, y);
      case ScalarPrim::lt: return u ? b_.CreateICmpULT(x, y) : b_.CreateICmpSLT(x, y);
      case ScalarPrim::le: return u ? b_.CreateICmpULE(x, y) : b_.CreateICmpSLE(x, y);
      case ScalarPrim::gt: return u ? b_.CreateICmpUGT(x, y) : b_.CreateICmpSGT(x, y);
      default: return u ? b_.CreateICmpUGE(x, y) : b_.CreateICmpSGE(x, y);
    }
  }

  llvm::Value* unary_intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return b_.CreateUnaryIntrinsic(id, x);
  }

  llvm::Value* arith(ScalarPrim p, const std::vector<llvm::Value*>& v) {
    llvm::Type* t = v[0]->getType();
    if (!t->isFloatingPointTy()) return int_arith(p, v);
    switch (p) {
      case ScalarPrim::neg: return b_.CreateFNeg(v[0]);
      case ScalarPrim::exp: return unary_intrinsic(llvm::Intrinsic::exp, v[0]);
      case ScalarPrim::log: return unary_intrinsic(llvm::Intrinsic::log, v[0]);
      case ScalarPrim::sqrt: return unary_intrinsic(llvm::Intrinsic::sqrt, v[0]);
      case ScalarPrim::sin: return unary_intrinsic(llvm::Intrinsic::sin, v[0]);
      case ScalarPrim::cos: return unary_intrinsic(llvm::Intrinsic::cos, v[0]);
      case ScalarPrim::tanh: {
        // LLVM 15 has no tanh intrinsic: libm's, found in the process.
        const char* fn = t->isFloatTy() ? "tanhf" : "tanh";
        llvm::FunctionCallee callee = m_.getOrInsertFunction(fn, llvm::FunctionType::get(t, {t}, false));
        llvm::CallInst* call = b_.CreateCall(callee, {v[0]});
        call->setDoesNotAccessMemory();
        call->setDoesNotThrow();
        return call;
      }
      case ScalarPrim::add: return b_.CreateFAdd(v[0], v[1]);
      case ScalarPrim::sub: return b_.CreateFSub(v[0], v[1]);
      case ScalarPrim::mul: return b_.CreateFMul(v[0], v[1]);
      case ScalarPrim::div: return b_.CreateFDiv(v[0], v[1]);
      case ScalarPrim::pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, v[0], v[1]);
      case ScalarPrim::max: {
        // torch.maximum: a NaN on either side wins.
        llvm::Value* larger = b_.CreateSelect(b_.CreateFCmpOGT(v[0], v[1]), v[0], v[1]);
        llvm::Value* nan = llvm::ConstantFP::getNaN(t);
        return b_.CreateSelect(b_.CreateFCmpUNO(v[0], v[1]), nan, larger);
      }
      default: break;
    }
    FSDPC_CHECK(false) << "scalar prim " << static_cast<int>(p) << " is not arithmetic";
    return nullptr;
  }

  llvm::Value* int_arith(ScalarPrim p, const std::vector<llvm::Value*>& v) {
    switch (p) {
      case ScalarPrim::neg: return b_.CreateNeg(v[0]);
      case ScalarPrim::add: return b_.CreateAdd(v[0], v[1]);
      case ScalarPrim::sub: return b_.CreateSub(v[0], v[1]);
      case ScalarPrim::mul: return b_.CreateMul(v[0], v[1]);
      case ScalarPrim::max: return b_.CreateSelect(b_.CreateICmpSGT(v[0], v[1]), v[0], v[1]);
      default: fail("fusion JIT: scalar prim ", static_cast<int>(p), " on integers is not lowered");
    }
  }

  // The row loop: row r's loads start at sum_d index_d(r) * stride_d over
  // the outer dims; its outputs at r * cols.
  void emit_driver(const std::string& name, llvm::Function* row) {
    llvm::Type* ptr = llvm::PointerType::get(ctx_, 0);
    llvm::Type* i64 = b_.getInt64Ty();
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64}, false);
    auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m_);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", f);
    auto* loop = llvm::BasicBlock::Create(ctx_, "rows", f);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", f);
    b_.SetInsertPoint(entry);
    std::vector<llvm::Value*> in_base, out_base;
    for (const Load& l : r_.loads)
      in_base.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, f->getArg(0), static_cast<uint64_t>(l.input))));
    for (size_t m = 0; m < r_.outputs.size(); ++m)
      out_base.push_back(b_.CreateLoad(ptr, b_.CreateConstInBoundsGEP1_64(ptr, f->getArg(1), m)));
    llvm::Value* begin = f->getArg(2);
    llvm::Value* end = f->getArg(3);
    b_.CreateCondBr(b_.CreateICmpSLT(begin, end), loop, exit);
    b_.SetInsertPoint(loop);
    llvm::PHINode* r = b_.CreatePHI(i64, 2, "r");
    r->addIncoming(begin, entry);

    std::vector<llvm::Value*> call_args{b_.getInt64(cols())};
    const size_t outer = r_.shape.empty() ? 0 : r_.shape.size() - 1;
    for (size_t k = 0; k < r_.loads.size(); ++k) {
      const Load& l = r_.loads[k];
      llvm::Value* off = b_.getInt64(0);
      int64_t inner_rows = 1;  // rows spanned by one step of dim d
      for (size_t d = outer; d-- > 0;) {
        if (l.strides[d] != 0 && r_.shape[d] != 1) {
          llvm::Value* idx = b_.CreateURem(b_.CreateUDiv(r, b_.getInt64(inner_rows)), b_.getInt64(r_.shape[d]));
          off = b_.CreateAdd(off, b_.CreateMul(idx, b_.getInt64(l.strides[d])));
        }
        inner_rows *= r_.shape[d];
      }
      llvm::Type* st = storage(l.dtype);
      call_args.push_back(b_.CreateInBoundsGEP(st, in_base[k], off));
    }
    for (size_t m = 0; m < r_.outputs.size(); ++m) {
      const Step& s = r_.steps[static_cast<size_t>(r_.outputs[m])];
      llvm::Value* at = s.row ? static_cast<llvm::Value*>(r) : b_.CreateMul(r, b_.getInt64(cols()));
      call_args.push_back(b_.CreateInBoundsGEP(storage(s.dtype), out_base[m], at));
    }
    b_.CreateCall(row, call_args);
    llvm::Value* next = b_.CreateAdd(r, b_.getInt64(1), "r.next", true, true);
    r->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, end), loop, exit);
    b_.SetInsertPoint(exit);
    b_.CreateRetVoid();
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  const Region& r_;
  llvm::IRBuilder<> b_;
  llvm::Function* f_ = nullptr;        // the row function being emitted
  llvm::Value* n_ = nullptr;           // its cols argument
  llvm::PHINode* j_ = nullptr;         // the open loop's index
  llvm::Type* out_t_ = nullptr;        // the compute type of the step being emitted
  std::vector<llvm::Value*> row_loads_;  // per load: its row value, or null
  std::vector<llvm::Value*> rows_;       // per row step: its value
  std::vector<llvm::Value*> elements_;   // per element step, in the open loop
};

}  // namespace

void lower_region(llvm::LLVMContext& ctx, llvm::Module& m, const Region& r, const std::string& name) {
  Lowering(ctx, m, r).emit(name);
}

}  // namespace fsdpc::fusion
