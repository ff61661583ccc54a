// Attribute storage and its typed, error-reporting getters.
#include "ir/attr.h"

#include <cmath>

#include "ir/error.h"

namespace fsdpc {

namespace {
template <class T>
const T& get_typed(const Attrs& attrs, const std::string& key, std::string_view want) {
  const AttrValue* v = attrs.find(key);
  if (!v) fail("missing attribute '", key, "' (expected ", want, ")");
  if (const T* p = std::get_if<T>(v)) return *p;
  fail("attribute '", key, "' is ", attr_type_name(*v), ", expected ", want);
}
}  // namespace

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init) {
  for (const auto& [k, v] : init) set(k, v);
}

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t i = 0; i < items_.size(); ++i) {
    const auto& [ka, va] = items_[i];
    const auto& [kb, vb] = o.items_[i];
    if (ka != kb) return false;
    const double* da = std::get_if<double>(&va);
    const double* db = std::get_if<double>(&vb);
    if (da && db && std::isnan(*da) && std::isnan(*db)) continue;
    if (va != vb) return false;
  }
  return true;
}

bool Attrs::has(const std::string& key) const { return find(key) != nullptr; }

const AttrValue* Attrs::find(const std::string& key) const {
  for (const auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

Attrs& Attrs::set(const std::string& key, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(key, std::move(value));
  return *this;
}

int64_t Attrs::get_int(const std::string& key) const {
  return get_typed<int64_t>(*this, key, "int");
}

double Attrs::get_double(const std::string& key) const {
  const AttrValue* v = find(key);
  if (v)
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return get_typed<double>(*this, key, "float");
}

bool Attrs::get_bool(const std::string& key) const { return get_typed<bool>(*this, key, "bool"); }

const std::string& Attrs::get_str(const std::string& key) const {
  return get_typed<std::string>(*this, key, "string");
}

const IntList& Attrs::get_ints(const std::string& key) const {
  return get_typed<IntList>(*this, key, "int list");
}

const IntLists& Attrs::get_int_lists(const std::string& key) const {
  const AttrValue* v = find(key);
  // An empty list prints as [] and parses back as an IntList.
  static const IntLists kEmpty;
  if (v)
    if (const IntList* l = std::get_if<IntList>(v); l && l->empty()) return kEmpty;
  return get_typed<IntLists>(*this, key, "list of int lists");
}

DType Attrs::get_dtype(const std::string& key) const {
  const std::string& s = get_typed<std::string>(*this, key, "dtype");
  auto d = parse_dtype(s);
  if (!d) fail("attribute '", key, "' = '", s, "' is not a dtype (f32, f16, bf16, f64, i64, i32, bool)");
  return *d;
}

int64_t Attrs::get_int_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double Attrs::get_double_or(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}

bool Attrs::get_bool_or(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

std::string_view attr_type_name(const AttrValue& v) {
  constexpr std::string_view kNames[] = {"int", "float", "bool", "string", "int list",
                                         "list of int lists"};
  return kNames[v.index()];
}

}  // namespace fsdpc
