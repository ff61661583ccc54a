// What the MPI executor tests share: reference values as a dtype's bytes,
// and a trace run on this rank with the MPI kernels in trace order.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "executors/comm/mpi_executor.h"
#include "ir/error.h"

namespace fsdpc::mpi_test {

using Data = std::vector<double>;
using Bytes = std::vector<std::byte>;

template <class T>
Bytes encode_as(const Data& v) {
  Bytes out(v.size() * sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    const T x = static_cast<T>(v[i]);
    std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
  }
  return out;
}

template <class T>
Data decode_as(const Bytes& in) {
  Data v(in.size() / sizeof(T));
  for (size_t i = 0; i < v.size(); ++i) {
    T x;
    std::memcpy(&x, in.data() + i * sizeof(T), sizeof(T));
    v[i] = static_cast<double>(x);
  }
  return v;
}

inline Bytes encode(const Data& v, DType d) {
  switch (d) {
    case DType::f32: return encode_as<float>(v);
    case DType::f64: return encode_as<double>(v);
    case DType::i64: return encode_as<int64_t>(v);
    case DType::i32: return encode_as<int32_t>(v);
    case DType::boolean: return encode_as<uint8_t>(v);
    default: FSDPC_CHECK(false) << "no test encoding for " << dtype_name(d);
  }
  return {};
}

inline Data decode(const Bytes& in, DType d) {
  switch (d) {
    case DType::f32: return decode_as<float>(in);
    case DType::f64: return decode_as<double>(in);
    case DType::i64: return decode_as<int64_t>(in);
    case DType::i32: return decode_as<int32_t>(in);
    case DType::boolean: return decode_as<uint8_t>(in);
    default: FSDPC_CHECK(false) << "no test decoding for " << dtype_name(d);
  }
  return {};
}

// Runs `t` on this rank with the MPI kernels, in trace order. With
// `alias_waits` a wait's output is its future's buffer, as a runtime that
// avoids the copy would do.
inline std::vector<Data> run_mpi(const Trace& t, MpiContext& ctx, const std::vector<Data>& args,
                                 bool alias_waits = false) {
  std::map<std::string, Bytes> env;
  std::map<std::string, TensorType> types;
  for (size_t i = 0; i < t.args.size(); ++i) {
    env[t.args[i].name] = encode(args[i], t.args[i].type.dtype);
    types[t.args[i].name] = t.args[i].type;
  }
  for (const BoundSymbol& b : t.bsyms) {
    REQUIRE(mpi_executor().claims(b));  // the same verdict on every rank
    std::vector<TensorView> in, out;
    for (const Operand& o : b.inputs) in.push_back({env.at(o.name).data(), &types.at(o.name)});
    for (const Proxy& p : b.outputs) {
      types[p.name] = p.type;
      if (alias_waits && b.op == OpId::Wait) {
        env[p.name] = {};  // shares the future's buffer below
        out.push_back({in[0].data, &types.at(p.name)});
        continue;
      }
      env[p.name].resize(numel(p.type.shape) * dtype_size(p.type.dtype));
      out.push_back({env[p.name].data(), &types.at(p.name)});
    }
    mpi_executor().kernel(b.op)(ctx, b, in, out);
    if (alias_waits && b.op == OpId::Wait) env[b.output().name] = env.at(b.inputs[0].name);
  }
  std::vector<std::string> names;
  t.returns.collect_names(names);
  std::vector<Data> results;
  for (const std::string& n : names) results.push_back(decode(env.at(n), types.at(n).dtype));
  return results;
}

}  // namespace fsdpc::mpi_test
