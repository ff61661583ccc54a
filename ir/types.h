// Value types of the IR: element types, devices, distribution types and the
// tensor type every proxy carries. Plain data; meta functions compute them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fsdpc {

// i8 holds quantized communication buffers (quantize/dequantize, ir/quantize.h).
enum class DType : uint8_t { f32, f16, bf16, f64, i64, i32, boolean, i8 };

std::string_view dtype_name(DType d);               // "f32", ..., "bool"
std::optional<DType> parse_dtype(std::string_view);  // inverse of dtype_name
int64_t dtype_size(DType d);                         // bytes per element
bool is_float(DType d);
bool is_integer(DType d);  // i32, i64, i8 (not bool)
bool is_index(DType d);    // i32, i64: what take, index_add and iota's ids may be

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // ignored for cpu
  bool operator==(const Device&) const = default;
};

std::string device_name(const Device& d);                  // "cpu", "cuda:0"
std::optional<Device> parse_device(std::string_view text);  // inverse

// How a tensor is laid out across the ranks of a process group.
enum class DistType : uint8_t { none, replicated, fully_sharded };

std::string_view dist_name(DistType d);  // "none", "replicated", "fully_sharded"
std::optional<DistType> parse_dist(std::string_view);

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[64, 64]"
int64_t numel(const Shape& s);

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  DistType dist = DistType::none;
  bool future = false;  // result of an async collective; only `wait` consumes it
  bool operator==(const TensorType&) const = default;
};

// The quoted part of a type comment: "FUTURE cpu f32[64, 64]" (no dist).
std::string type_str(const TensorType& t);
// Parses what type_str prints; nullopt on malformed text.
std::optional<TensorType> parse_type_str(std::string_view text);

}  // namespace fsdpc
