// JSON: exact round trips, attribute kinds, non-finite values and errors
// naming the JSON path. DOT: the graph's structure.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "ir/dot.h"
#include "ir/error.h"
#include "ir/json.h"
#include "ir/printer.h"
#include "trace_samples.h"

using namespace fsdpc;
using namespace fsdpc::samples;

namespace {

// trace_from_json must throw an fsdpc::Error that contains every word.
void expect_json_error(const std::string& text, std::vector<std::string> words) {
  INFO(text);
  try {
    trace_from_json(text, "t.json");
    FAIL("read without error");
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("t.json: ", 0) == 0);
    for (const std::string& w : words) CHECK(msg.find(w) != std::string::npos);
  }
}

// The JSON of the small trace with `edit` applied, as text.
std::string edited(const std::function<void(nlohmann::ordered_json&)>& edit) {
  auto j = nlohmann::ordered_json::parse(trace_to_json(small_trace()));
  edit(j);
  return j.dump();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("JSON round trips exactly") {
  Trace small = small_trace();
  CHECK(trace_from_json(trace_to_json(small)) == small);
  CHECK(trace_from_json(trace_to_json(small, -1)) == small);
  Trace rich = rich_trace(false);
  Trace back = trace_from_json(trace_to_json(rich));
  CHECK(back == rich);
  CHECK(back.next_id == 14);
  // NaN never compares equal; the text of both must still agree.
  CHECK(print_trace(trace_from_json(trace_to_json(rich_trace()))) == print_trace(rich_trace()));
  // An empty list of lists is tagged, since [] reads back as an int list.
  Trace t = small;
  t.bsyms[3].attrs.set("shapes", IntLists{});
  t.bsyms[3].outputs.clear();
  CHECK(
      std::get<IntLists>(*trace_from_json(trace_to_json(t)).bsyms[3].attrs.find("shapes")).empty());
  // requires_grad is kept even off parameters, where the text form drops it.
  t.args[0].requires_grad = false;
  CHECK(trace_from_json(trace_to_json(t)) == t);
}

TEST_CASE("JSON keeps attribute order and kinds") {
  std::string json = trace_to_json(rich_trace(), -1);
  CHECK(json.find("\"attrs\":{\"i\":-7,\"d\":2.0,\"tiny\":1e-05,\"big\":1e+20,"
                  "\"ninf\":{\"float\":\"-inf\"},\"nan\":{\"float\":\"nan\"},\"yes\":true,") !=
        std::string::npos);
  CHECK(json.find("\"none\":[],\"lists\":[[],[1],[2,3]]}") != std::string::npos);
  CHECK(json.find("{\"scalar\":{\"float\":\"-inf\"}}") != std::string::npos);
  CHECK(json.find("{\"scalar\":2.0}") != std::string::npos);
  CHECK(json.find("\"returns\":[\"x\",[\"t10\"],[],[[\"t12\",\"t13\"],\"t5\"]]") !=
        std::string::npos);

  Trace t = trace_from_json(json);
  const auto& items = t.bsyms[0].attrs.items();
  REQUIRE(items.size() == 16);
  CHECK(items[0].first == "i");
  CHECK(items[15].first == "lists");
  CHECK(std::get<int64_t>(items[0].second) == -7);
  CHECK(std::get<double>(items[1].second) == 2.0);  // 2.0 stays a double
  CHECK(std::get<double>(items[2].second) == 1e-05);
  CHECK(std::get<double>(items[4].second) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(std::get<double>(items[5].second)));
  CHECK(std::get<bool>(items[6].second) == true);
  CHECK(std::get<std::string>(items[10].second) == "True");  // a string, not a bool
  CHECK(std::get<IntList>(items[14].second).empty());
  CHECK(std::get<IntLists>(items[15].second) == IntLists{{}, {1}, {2, 3}});
  CHECK(std::isnan(*t.bsyms[2].inputs[0].scalar));
  CHECK(*t.bsyms[1].inputs[1].scalar == -std::numeric_limits<double>::infinity());
  // A scalar written as a JSON integer is still a double operand.
  std::string two = edited([](auto& j) { j["bsyms"][1]["inputs"][1]["scalar"] = 2; });
  CHECK(trace_from_json(two).bsyms[1].inputs[1] == Operand::lit(2.0));
  // An attribute written as a JSON integer is an int, as a JSON float a double.
  std::string size = edited([](auto& j) { j["bsyms"][2]["attrs"]["size"] = 2.0; });
  CHECK(std::get<double>(*trace_from_json(size).bsyms[2].attrs.find("size")) == 2.0);
}

TEST_CASE("malformed JSON and schema violations name the path") {
  expect_json_error("{\"name\": ", {"malformed JSON"});
  expect_json_error("[1, 2]", {"(top level): expected an object"});
  expect_json_error(edited([](auto& j) { j.erase("returns"); }), {"missing key 'returns'"});
  expect_json_error(edited([](auto& j) { j["extra"] = 1; }), {"unknown key 'extra'"});
  expect_json_error(edited([](auto& j) { j["version"] = 2; }), {"version: unsupported version"});
  expect_json_error(edited([](auto& j) { j["bsyms"][3]["outputs"][0]["shape"][0] = -1; }),
                    {"bsyms[3].outputs[0].shape: expected an array of non-negative integers"});
  expect_json_error(edited([](auto& j) { j["bsyms"][3]["outputs"][0]["shape"] = "2x3"; }),
                    {"bsyms[3].outputs[0].shape: expected an array of non-negative integers"});
  expect_json_error(edited([](auto& j) { j["args"][1]["dtype"] = "f31"; }),
                    {"args[1].dtype: unknown dtype 'f31'"});
  expect_json_error(edited([](auto& j) { j["args"][1]["device"] = "tpu"; }),
                    {"args[1].device: unknown device 'tpu'"});
  expect_json_error(edited([](auto& j) { j["args"][2]["dist"] = "sharded"; }),
                    {"args[2].dist: unknown distribution type 'sharded'"});
  expect_json_error(edited([](auto& j) { j["args"][2]["future"] = "yes"; }),
                    {"args[2].future: expected true or false"});
  expect_json_error(edited([](auto& j) { j["args"][0]["name"] = "a b"; }),
                    {"args[0].name: 'a b' is not a valid name"});
  expect_json_error(edited([](auto& j) { j["bsyms"][1]["op"] = "mull"; }),
                    {"bsyms[1].op: unknown op 'mull'"});
  expect_json_error(edited([](auto& j) { j["bsyms"][1]["inputs"].erase(0); }),
                    {"bsyms[1].inputs: op 'mul' takes 2 inputs, got 1"});
  expect_json_error(
      edited([](auto& j) { j["bsyms"][0]["subsymbols"][1]["outputs"] = nlohmann::json::array(); }),
      {"bsyms[0].subsymbols[1].outputs: op 'matmul' has 1 outputs, got 0"});
  expect_json_error(edited([](auto& j) {
                      j["bsyms"][1]["inputs"][1] = {{"scalar", {{"float", "huge"}}}};
                    }),
                    {"bsyms[1].inputs[1].scalar: expected a number"});
  expect_json_error(edited([](auto& j) { j["bsyms"][1]["inputs"][1] = 0.5; }),
                    {"bsyms[1].inputs[1]: expected a value name or {\"scalar\": <number>}"});
  expect_json_error(edited([](auto& j) {
                      j["bsyms"][2]["attrs"]["dim"] = {1, {2}};
                    }),
                    {"bsyms[2].attrs.dim: expected a list of integers"});
  expect_json_error(edited([](auto& j) {
                      j["bsyms"][2]["attrs"]["dim"] = {{1}, 2};
                    }),
                    {"bsyms[2].attrs.dim[1]: expected an integer list"});
  expect_json_error(edited([](auto& j) { j["bsyms"][2]["attrs"]["dim"] = nullptr; }),
                    {"bsyms[2].attrs.dim: expected an attribute value"});
  expect_json_error(edited([](auto& j) {
                      j["returns"] = {"t2", 3};
                    }),
                    {"returns[1]: expected a value name or an array"});
  expect_json_error(
      edited([](auto& j) { j["bsyms"][2]["attrs"]["size"] = 18446744073709551615ull; }),
      {"bsyms[2].attrs.size: integer out of range"});
  std::string deep = std::string(100, '[') + std::string(100, ']');
  expect_json_error(edited([&](auto& j) { j["returns"] = nlohmann::json::parse(deep); }),
                    {"nest deeper than 64"});
}

TEST_CASE("DOT shows the data flow") {
  std::string dot = trace_to_dot(small_trace());
  CHECK(dot.rfind("digraph \"computation\" {\n", 0) == 0);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
  for (const char* node : {"a0 [", "a1 [", "a2 [", "n0 [", "n1 [", "n2 [", "n3 [", "ret ["})
    CHECK(count(dot, std::string("\n  ") + node) == 1);
  CHECK(count(dot, "\n  n4 [") == 0);  // sub-symbols are not drawn
  // x, t_0_weight -> linear; t0 -> mul; t_2_weight -> all_gather; t9 -> unpack;
  // t2 -> return.
  CHECK(count(dot, " -> ") == 6);
  CHECK(dot.find("  a0 -> n0 [label=\"x\"];\n") != std::string::npos);
  CHECK(dot.find("  n0 -> n1 [label=\"t0\"];\n") != std::string::npos);
  CHECK(dot.find("  n1 -> ret [label=\"t2\"];\n") != std::string::npos);
  CHECK(dot.find("label=\"unpack\\nt4: cpu f32[2, 3]\\nt5: cpu f32[4]\"") != std::string::npos);
  CHECK(dot.find("u0 [shape=box, style=dashed, label=\"t9\\n(undefined)\"]") != std::string::npos);
  CHECK(trace_to_dot(small_trace()) == dot);  // deterministic
  // One edge per value and consumer, even when read twice; quotes escaped.
  Trace rich = rich_trace();
  rich.name = "a\"b";
  std::string rdot = trace_to_dot(rich);
  CHECK(rdot.rfind("digraph \"a\\\"b\" {\n", 0) == 0);
  CHECK(count(rdot, " -> n10 ") == 1);  // cat(t11, t11, t11)
  CHECK(rdot.find("param h.0 \\\"odd\\\"\\\\path\\n frozen") != std::string::npos);
  CHECK(count(rdot, " -> ret ") == 5);
}

TEST_CASE("JSON that cannot be written or read fails cleanly") {
  Trace t = small_trace();
  t.args[1].param_path = "\xff\xfe";  // the text form allows any bytes; JSON needs UTF-8
  CHECK_THROWS_AS(trace_to_json(t), Error);
  // Random edits of valid JSON: each result is read or rejected with fsdpc::Error.
  const std::string base = trace_to_json(rich_trace(), -1);
  const std::string alphabet = "{}[]:,\"\\ -.0123456789eE+tfnaulrsx";
  std::mt19937 rng(7);
  int read = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text = base;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 3); ++e) {
      size_t pos = rng() % text.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text.erase(pos, 1);
          break;
        case 1:
          text.insert(pos, 1, c);
          break;
        default:
          text[pos] = c;
          break;
      }
    }
    try {
      trace_from_json(text, "fuzz.json");
      ++read;
    } catch (const Error& e) {
      REQUIRE(std::string(e.what()).rfind("fuzz.json: ", 0) == 0);
    }
  }
  CHECK(read > 20);
}
