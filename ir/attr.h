// Typed attributes of a bound symbol (dims, eps, group, dtype, ...), kept in
// insertion order so printing is deterministic and parse(print(x)) == x.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/types.h"

namespace fsdpc {

using IntList = std::vector<int64_t>;
using IntLists = std::vector<IntList>;

// A string attribute prints bare when it is an identifier (group=dp,
// dtype=f32) and quoted otherwise.
using AttrValue = std::variant<int64_t, double, bool, std::string, IntList, IntLists>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init);

  bool has(const std::string& key) const;
  const AttrValue* find(const std::string& key) const;
  // Replaces an existing value in place, else appends.
  Attrs& set(const std::string& key, AttrValue value);

  // Typed getters throw fsdpc::Error naming the key when it is missing or
  // has another type. An int attribute is accepted where a double is asked.
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;
  const IntList& get_ints(const std::string& key) const;
  const IntLists& get_int_lists(const std::string& key) const;
  DType get_dtype(const std::string& key) const;  // stored as its name

  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_double_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // NaN equals NaN here, so a trace holding a NaN attribute equals its round trip.
  bool operator==(const Attrs& o) const;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

std::string_view attr_type_name(const AttrValue& v);

}  // namespace fsdpc
