// Shared by the fusion tests: build small traces, run them claimed and fused
// through the interpreter, and compare with the float64 reference executor;
// for bf16 regions, claim them as the CPU target will and run them on raw
// f32/bf16 bits (the reference does not model bf16 rounding).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executors/bf16.h"
#include "executors/claim.h"
#include "executors/cpu/cpu_executor.h"
#include "executors/reference/reference.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fold_transpose.h"
#include "passes/fuse.h"
#include "runtime/interpreter.h"

namespace fsdpc::test {

// The loop regions of an execution trace, each with its inputs' types: the
// fusion statements a fusion executor compiles (describe_region takes
// them), not the matmuls with folded transposes (passes/fold_transpose.h).
inline std::vector<std::pair<const BoundSymbol*, std::vector<TensorType>>> loop_regions(const Trace& exec) {
  std::unordered_map<std::string, TensorType> types;
  for (const Proxy& a : exec.args) types[a.name] = a.type;
  std::vector<std::pair<const BoundSymbol*, std::vector<TensorType>>> out;
  for (const BoundSymbol& b : exec.bsyms) {
    if (b.op == OpId::Fusion && !transposed_matmul(b)) {
      std::vector<TensorType> in;
      for (const Operand& x : b.inputs) in.push_back(types.at(x.name));
      out.emplace_back(&b, std::move(in));
    }
    for (const Proxy& p : b.outputs) types[p.name] = p.type;
  }
  return out;
}

inline Proxy arg(std::string name, TensorType type) {
  Proxy p;
  p.name = std::move(name);
  p.type = std::move(type);
  return p;
}

inline TensorType tt(Shape shape, DType dtype = DType::f32) {
  TensorType t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

inline int count_regions(const Trace& t) {
  return static_cast<int>(std::count_if(t.bsyms.begin(), t.bsyms.end(),
                                        [](const BoundSymbol& b) { return b.op == OpId::Fusion; }));
}

inline std::vector<double> read(const TensorValue& v) {
  std::vector<double> out(static_cast<size_t>(numel(v.type.shape)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = v.type.dtype == DType::f32    ? static_cast<const float*>(v.data())[i]
             : v.type.dtype == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(v.data())[i])
             : v.type.dtype == DType::i64  ? static_cast<double>(static_cast<const int64_t*>(v.data())[i])
                                           : static_cast<const uint8_t*>(v.data())[i];
  return out;
}

inline TensorValue write(Allocator& a, const TensorType& t, const std::vector<double>& data) {
  TensorValue v = allocate_tensor(a, t, MemCategory::activations);
  for (size_t i = 0; i < data.size(); ++i) {
    if (t.dtype == DType::f32) static_cast<float*>(v.data())[i] = static_cast<float>(data[i]);
    else if (t.dtype == DType::bf16) static_cast<uint16_t*>(v.data())[i] = f32_to_bf16(static_cast<float>(data[i]));
    else if (t.dtype == DType::i64) static_cast<int64_t*>(v.data())[i] = static_cast<int64_t>(data[i]);
    else static_cast<uint8_t*>(v.data())[i] = data[i] != 0;
  }
  return v;
}

// Inputs drawn from [lo, hi] (bools 0/1, i64 0..2: class indices), rounded
// to f32 (or bf16) so that the reference sees exactly what the kernels see.
inline std::vector<reference::Value> random_args(const Trace& t, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<reference::Value> args;
  for (const Proxy& p : t.args) {
    reference::Value v{p.type, std::vector<double>(static_cast<size_t>(numel(p.type.shape)))};
    for (double& x : v.data)
      x = p.type.dtype == DType::boolean ? static_cast<double>(rng() % 2)
          : p.type.dtype == DType::i64   ? static_cast<double>(rng() % 3)
          : p.type.dtype == DType::bf16  ? round_to_bf16(static_cast<float>(u(rng)))
                                         : static_cast<float>(u(rng));
    args.push_back(std::move(v));
  }
  return args;
}

struct Outcome {
  Trace fused;
  double worst = 0;  // relative error, worst element
  int regions = 0;
  std::string worst_at;  // "output k element i: got g, want w"
};

// Runs an execution trace of the CPU executor through the interpreter on
// `args` and returns its outputs, read back as doubles.
inline std::vector<reference::Value> run_on_cpu(const Trace& exec, const std::vector<reference::Value>& args) {
  Allocator alloc;
  KernelContext ctx;
  Interpreter interp(alloc, {&cpu_executor()}, ctx);
  std::vector<TensorValue> in;
  for (const reference::Value& a : args) in.push_back(write(alloc, a.type, a.data));
  std::vector<reference::Value> out;
  for (const TensorValue& v : interp.run(exec, in)) out.push_back({v.type, read(v)});
  return out;
}

// Claims and fuses `t`, runs it through the interpreter and compares every
// returned value with the reference run of the unfused trace. Errors are
// relative to max(|want|, floor); a negative floor means relative to the
// output's largest magnitude (for gradients, whose small entries are
// differences of large ones).
inline Outcome fused_vs_reference(const Trace& t, std::mt19937& rng, double lo = 0.25, double hi = 2.0,
                           double floor = 1e-30) {
  Outcome o;
  o.fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  INFO(print_trace(o.fused));
  REQUIRE_NOTHROW(verify(o.fused));
  o.regions = count_regions(o.fused);
  const std::vector<reference::Value> args = random_args(t, rng, lo, hi);
  const std::vector<reference::Value> want = reference::run(t, args);
  const std::vector<reference::Value> got = run_on_cpu(o.fused, args);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const std::vector<double>& g = got[k].data;
    double scale = floor;
    if (floor < 0) {
      scale = 1e-30;
      for (double w : want[k].data)
        if (std::isfinite(w)) scale = std::max(scale, std::abs(w));
    }
    for (size_t i = 0; i < g.size(); ++i) {
      const double w = want[k].data[i];
      if (std::isnan(w) || std::isnan(g[i])) {
        INFO("output " << k << " element " << i << ": got " << g[i] << ", want " << w);
        CHECK(std::isnan(w) == std::isnan(g[i]));
        continue;
      }
      if (std::isinf(w) || std::isinf(g[i])) {
        CHECK(g[i] == w);
        continue;
      }
      const double err = std::abs(g[i] - w) / std::max(std::abs(w), scale);
      if (err > o.worst) {
        o.worst = err;
        o.worst_at = "output " + std::to_string(k) + " element " + std::to_string(i) + ": got " +
                     std::to_string(g[i]) + ", want " + std::to_string(w) + " (scale " + std::to_string(scale) + ")";
      }
    }
  }
  return o;
}

// `t` claimed for the CPU target (bf16 included) and fused, verified.
inline Trace fuse_bf16(const Trace& t) {
  Trace fused = fuse(claim(t, {&cpu_executor()}), Target::cpu);
  INFO(print_trace(fused));
  REQUIRE_NOTHROW(verify(fused));
  return fused;
}

// Runs an execution trace of the CPU target on `args`, given as f32 values
// (a bf16 argument's values must be bf16 values), and returns its outputs as
// f32 bit patterns: a bf16 output widened (exact, NaN payloads kept), a
// bool as 0 or 1.
inline std::vector<std::vector<float>> run_bits(const Trace& exec, const std::vector<std::vector<float>>& args) {
  Allocator alloc;
  KernelContext ctx;
  Interpreter interp(alloc, {&cpu_executor()}, ctx);
  REQUIRE(args.size() == exec.args.size());
  std::vector<TensorValue> in;
  for (size_t k = 0; k < args.size(); ++k) {
    const TensorType& t = exec.args[k].type;
    REQUIRE(static_cast<int64_t>(args[k].size()) == numel(t.shape));
    REQUIRE((t.dtype == DType::f32 || t.dtype == DType::bf16 || t.dtype == DType::boolean));
    TensorValue v = allocate_tensor(alloc, t, MemCategory::activations);
    for (size_t i = 0; i < args[k].size(); ++i) {
      if (t.dtype == DType::bf16) {
        const uint16_t h = f32_to_bf16(args[k][i]);
        if (std::bit_cast<uint32_t>(bf16_to_f32(h)) != std::bit_cast<uint32_t>(args[k][i]))
          FAIL("run_bits: argument " << k << " element " << i << " is not a bf16 value: " << args[k][i]);
        static_cast<uint16_t*>(v.data())[i] = h;
      } else if (t.dtype == DType::f32) {
        static_cast<float*>(v.data())[i] = args[k][i];
      } else {
        static_cast<uint8_t*>(v.data())[i] = args[k][i] != 0;  // bool
      }
    }
    in.push_back(std::move(v));
  }
  std::vector<std::vector<float>> out;
  for (const TensorValue& v : interp.run(exec, in)) {
    std::vector<float> o(static_cast<size_t>(numel(v.type.shape)));
    for (size_t i = 0; i < o.size(); ++i) {
      switch (v.type.dtype) {
        case DType::f32: o[i] = static_cast<const float*>(v.data())[i]; break;
        case DType::bf16: o[i] = bf16_to_f32(static_cast<const uint16_t*>(v.data())[i]); break;
        case DType::boolean: o[i] = static_cast<const uint8_t*>(v.data())[i]; break;
        default: FAIL("run_bits: output dtype " << dtype_name(v.type.dtype));
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

inline uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// The f32 values whose bf16 rounding tests store rounding hardest: ties to
// even both ways, just above and below a tie, a carry into the exponent and
// to infinity, subnormals, signed zeros, infinities, and NaNs (quiet,
// signalling, negative, with payloads only in the half a store drops).
inline std::vector<float> bf16_edge_values() {
  const uint32_t patterns[] = {
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0xbf808000u, 0xbf818000u,  // ties and near ties
      0x3fffffffu, 0x3fff8000u, 0x3f7f8000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu,  // carries, to inf
      0xff7f8000u, 0x00008000u, 0x00018000u, 0x00000001u, 0x807fffffu, 0x00800000u,  // subnormals
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,                            // zeros, infinities
      0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7f80ffffu,  // NaNs
      0x7fbf8000u, 0x7fffffffu, 0x3f800000u, 0x40490fdbu, 0xc0490fdbu, 0x33800000u};
  std::vector<float> out;
  for (uint32_t p : patterns) out.push_back(std::bit_cast<float>(p));
  return out;
}

// Whether `got` is a bf16 value that rounding some value within
// tol * max(|want|, floor) of `want` gives: round_to_bf16 is monotonic, so
// the bracket of the rounded ends holds exactly those. NaN and infinities
// must match.
inline bool bf16_rounding_within(float got, double want, double tol, double floor = 0) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (round_to_bf16(got) != got && !std::isinf(got)) return false;  // not a bf16 value
  if (std::isinf(want)) return got == want;
  const double d = tol * std::max(std::abs(want), floor);
  return round_to_bf16(static_cast<float>(want - d)) <= got && got <= round_to_bf16(static_cast<float>(want + d));
}

}  // namespace fsdpc::test
