// Names and parsing of the IR's value types; the printer and parser use these
// so the text form of a type is defined in exactly one place.
#include "ir/types.h"

#include <array>
#include <charconv>

namespace fsdpc {

namespace {
constexpr std::array<std::string_view, 8> kDTypeNames = {"f32", "f16", "bf16", "f64",
                                                         "i64", "i32", "bool", "i8"};
constexpr std::array<int64_t, 8> kDTypeSizes = {4, 2, 2, 8, 8, 4, 1, 1};
constexpr std::array<std::string_view, 3> kDistNames = {"none", "replicated",
                                                        "fully_sharded"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::string_view dtype_name(DType d) { return kDTypeNames[static_cast<size_t>(d)]; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (size_t i = 0; i < kDTypeNames.size(); ++i)
    if (kDTypeNames[i] == s) return static_cast<DType>(i);
  return std::nullopt;
}

int64_t dtype_size(DType d) { return kDTypeSizes[static_cast<size_t>(d)]; }

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

bool is_integer(DType d) { return is_index(d) || d == DType::i8; }

bool is_index(DType d) { return d == DType::i64 || d == DType::i32; }

std::string device_name(const Device& d) {
  if (d.kind == DeviceKind::cpu) return "cpu";
  return "cuda:" + std::to_string(d.index);
}

std::optional<Device> parse_device(std::string_view s) {
  if (s == "cpu") return Device{DeviceKind::cpu, 0};
  constexpr std::string_view kCuda = "cuda:";
  if (s.substr(0, kCuda.size()) != kCuda) return std::nullopt;
  auto idx = parse_int(s.substr(kCuda.size()));
  if (!idx || *idx < 0 || *idx > 1023) return std::nullopt;
  return Device{DeviceKind::cuda, static_cast<int>(*idx)};
}

std::string_view dist_name(DistType d) { return kDistNames[static_cast<size_t>(d)]; }

std::optional<DistType> parse_dist(std::string_view s) {
  for (size_t i = 0; i < kDistNames.size(); ++i)
    if (kDistNames[i] == s) return static_cast<DistType>(i);
  return std::nullopt;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string type_str(const TensorType& t) {
  std::string out = t.future ? "FUTURE " : "";
  out += device_name(t.device);
  out += ' ';
  out += dtype_name(t.dtype);
  out += shape_str(t.shape);
  return out;
}

std::optional<TensorType> parse_type_str(std::string_view s) {
  TensorType t;
  constexpr std::string_view kFuture = "FUTURE ";
  if (s.substr(0, kFuture.size()) == kFuture) {
    t.future = true;
    s.remove_prefix(kFuture.size());
  }
  size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto dev = parse_device(s.substr(0, sp));
  if (!dev) return std::nullopt;
  t.device = *dev;
  s.remove_prefix(sp + 1);
  size_t lb = s.find('[');
  if (lb == std::string_view::npos || s.back() != ']') return std::nullopt;
  auto dt = parse_dtype(s.substr(0, lb));
  if (!dt) return std::nullopt;
  t.dtype = *dt;
  std::string_view dims = s.substr(lb + 1, s.size() - lb - 2);
  if (!trim(dims).empty()) {
    while (true) {
      size_t comma = dims.find(',');
      auto v = parse_int(dims.substr(0, comma));
      if (!v || *v < 0) return std::nullopt;
      t.shape.push_back(*v);
      if (comma == std::string_view::npos) break;
      dims.remove_prefix(comma + 1);
    }
  }
  return t;
}

}  // namespace fsdpc
