// Reading and writing hardware profiles (hardware/*.json); every field is
// checked, since a typo would otherwise price a whole table at zero.
#include "runtime/planner/hardware_profile.h"

#include <cmath>
#include <vector>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace fsdpc {

namespace {

using Json = nlohmann::ordered_json;

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  const Json& member(const Json& j, const std::string& path, const std::string& key) const {
    const std::string where = path.empty() ? key : path + "." + key;
    if (!j.is_object() || !j.contains(key)) fail(file_, ": ", where, ": missing");
    return j.at(key);
  }

  std::string text(const Json& j, const std::string& key, const std::vector<std::string>& allowed = {}) const {
    const Json& v = member(j, "", key);
    if (!v.is_string()) fail(file_, ": ", key, ": expected a string");
    const std::string s = v.get<std::string>();
    if (allowed.empty()) return s;
    std::string names;
    for (const std::string& a : allowed) {
      if (s == a) return s;
      names += (names.empty() ? "" : " or ") + a;
    }
    fail(file_, ": ", key, ": '", s, "' is not ", names);
  }

  // {"value": x, "source": "..."}; `max` bounds fractions.
  Figure figure(const Json& j, const std::string& path, const std::string& key, double max = 0) const {
    const Json& f = member(j, path, key);
    const std::string where = (path.empty() ? "" : path + ".") + key;
    const Json& v = member(f, where, "value");
    if (!v.is_number() || !(v.get<double>() > 0) || (max > 0 && v.get<double>() > max))
      fail(file_, ": ", where, ".value: expected a number above 0", max > 0 ? " and at most 1" : "");
    const Json& s = member(f, where, "source");
    if (!s.is_string() || s.get<std::string>().empty())
      fail(file_, ": ", where, ".source: expected a string naming where the number comes from");
    return {v.get<double>(), s.get<std::string>()};
  }

  LinkProfile link(const Json& j, const std::string& key) const {
    const Json& l = member(j, "", key);
    LinkProfile link{figure(l, key, "bandwidth"), figure(l, key, "latency"), figure(l, key, "sustained_fraction", 1),
                     {}, {}, {}, {}};
    if (l.contains("host_overhead")) link.host_overhead = figure(l, key, "host_overhead");
    if (l.contains("host_bandwidth")) link.host_bandwidth = figure(l, key, "host_bandwidth");
    if (l.contains("reduce_scatter_bandwidth"))
      link.reduce_scatter_bandwidth = figure(l, key, "reduce_scatter_bandwidth");
    if (l.contains("all_reduce_bandwidth")) link.all_reduce_bandwidth = figure(l, key, "all_reduce_bandwidth");
    return link;
  }

 private:
  std::string file_;
};

Json figure_json(const Figure& f) { return Json{{"value", f.value}, {"source", f.source}}; }

Json link_json(const LinkProfile& l) {
  Json j{{"bandwidth", figure_json(l.bandwidth)},
         {"latency", figure_json(l.latency)},
         {"sustained_fraction", figure_json(l.sustained_fraction)}};
  if (l.host_overhead.value > 0) j["host_overhead"] = figure_json(l.host_overhead);
  if (l.host_bandwidth.value > 0) j["host_bandwidth"] = figure_json(l.host_bandwidth);
  if (l.reduce_scatter_bandwidth.value > 0) j["reduce_scatter_bandwidth"] = figure_json(l.reduce_scatter_bandwidth);
  if (l.all_reduce_bandwidth.value > 0) j["all_reduce_bandwidth"] = figure_json(l.all_reduce_bandwidth);
  return j;
}

}  // namespace

double LinkProfile::effective_bandwidth(OpId op) const {
  const Figure& own = op == OpId::ReduceScatter ? reduce_scatter_bandwidth
                      : op == OpId::AllReduce   ? all_reduce_bandwidth
                                                : bandwidth;
  return (own.value > 0 ? own.value : bandwidth.value) * sustained_fraction.value;
}

HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past double's range
    fail(file, ": not JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(file, ": expected a JSON object");
  const Reader r(file);
  HardwareProfile p;
  p.file = file;
  p.name = r.text(j, "name");
  p.description = j.contains("description") && j["description"].is_string() ? j["description"].get<std::string>() : "";
  p.executor = *parse_target(r.text(j, "executor", target_names()));
  p.precision = *parse_dtype(r.text(j, "precision", {"f32", "bf16"}));
  p.gpus_per_node = r.figure(j, "", "gpus_per_node");
  if (p.gpus_per_node.value != static_cast<double>(static_cast<int>(p.gpus_per_node.value)))
    fail(file, ": gpus_per_node.value: expected a whole number");
  const Json& c = r.member(j, "", "compute");
  p.peak_flops_bf16 = r.figure(c, "compute", "peak_flops_bf16");
  p.peak_flops_f32 = r.figure(c, "compute", "peak_flops_f32");
  p.matmul_sustained_fraction = r.figure(c, "compute", "matmul_sustained_fraction", 1);
  p.memory_bandwidth = r.figure(c, "compute", "memory_bandwidth");
  p.memory_sustained_fraction = r.figure(c, "compute", "memory_sustained_fraction", 1);
  if (c.contains("memory_capacity")) p.memory_capacity = r.figure(c, "compute", "memory_capacity");
  if (c.contains("kernel_overhead")) p.kernel_overhead = r.figure(c, "compute", "kernel_overhead");
  if (c.contains("region_overhead")) p.region_overhead = r.figure(c, "compute", "region_overhead");
  if (c.contains("matmul_overhead")) p.matmul_overhead = r.figure(c, "compute", "matmul_overhead");
  if (c.contains("elementwise_rate")) p.elementwise_rate = r.figure(c, "compute", "elementwise_rate");
  if (c.contains("row_region_rate")) p.row_region_rate = r.figure(c, "compute", "row_region_rate");
  if (c.contains("matmul_shapes")) {
    const Json& m = c.at("matmul_shapes");
    const Json& source = r.member(m, "compute.matmul_shapes", "source");
    if (!source.is_string() || source.get<std::string>().empty())
      fail(file, ": compute.matmul_shapes.source: expected a string naming where the numbers come from");
    p.matmul_seconds_source = source.get<std::string>();
    const Json& seconds = r.member(m, "compute.matmul_shapes", "seconds");
    if (!seconds.is_object()) fail(file, ": compute.matmul_shapes.seconds: expected an object of signature: seconds");
    for (const auto& [key, v] : seconds.items()) {
      // 0 is a measurement too: a matmul as cheap as the negligible one.
      if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
        fail(file, ": compute.matmul_shapes.seconds[\"", key, "\"]: expected a number of seconds, at least 0");
      p.matmul_seconds[key] = v.get<double>();
    }
  }
  p.intra_node = r.link(j, "intra_node");
  p.inter_node = r.link(j, "inter_node");
  return p;
}

std::string hardware_profile_json(const HardwareProfile& p) {
  Json j{{"name", p.name},
         {"description", p.description},
         {"units", "FLOP/s, bytes/s (one direction, per rank), seconds"},
         {"executor", std::string(target_name(p.executor))},
         {"precision", std::string(dtype_name(p.precision))},
         {"gpus_per_node", figure_json(p.gpus_per_node)},
         {"compute", Json{{"peak_flops_bf16", figure_json(p.peak_flops_bf16)},
                          {"peak_flops_f32", figure_json(p.peak_flops_f32)},
                          {"matmul_sustained_fraction", figure_json(p.matmul_sustained_fraction)},
                          {"memory_bandwidth", figure_json(p.memory_bandwidth)},
                          {"memory_sustained_fraction", figure_json(p.memory_sustained_fraction)}}},
         {"intra_node", link_json(p.intra_node)},
         {"inter_node", link_json(p.inter_node)}};
  if (p.memory_capacity.value > 0) j["compute"]["memory_capacity"] = figure_json(p.memory_capacity);
  if (p.kernel_overhead.value > 0) j["compute"]["kernel_overhead"] = figure_json(p.kernel_overhead);
  if (p.region_overhead.value > 0) j["compute"]["region_overhead"] = figure_json(p.region_overhead);
  if (p.matmul_overhead.value > 0) j["compute"]["matmul_overhead"] = figure_json(p.matmul_overhead);
  if (p.elementwise_rate.value > 0) j["compute"]["elementwise_rate"] = figure_json(p.elementwise_rate);
  if (p.row_region_rate.value > 0) j["compute"]["row_region_rate"] = figure_json(p.row_region_rate);
  if (!p.matmul_seconds.empty()) {
    Json seconds = Json::object();
    for (const auto& [key, v] : p.matmul_seconds) seconds[key] = v;
    j["compute"]["matmul_shapes"] = Json{{"source", p.matmul_seconds_source}, {"seconds", std::move(seconds)}};
  }
  return j.dump(2) + "\n";
}

}  // namespace fsdpc
