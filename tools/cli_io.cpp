// Trace files in and out for the CLI.
#include "tools/cli_io.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "ir/json.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/io/files.h"

namespace fsdpc::cli {

std::string read_input(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, expected a trace file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open (", std::strerror(errno), ")");
  ss << in.rdbuf();
  return ss.str();
}

namespace {
bool looks_like_json(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    return c == '{';
  }
  return false;
}
}  // namespace

Trace load_trace(const std::string& path) {
  std::string text = read_input(path);
  std::string name = path == "-" ? "<stdin>" : path;
  Trace trace = looks_like_json(text) ? trace_from_json(text, name) : parse_trace(text, name);
  try {
    verify(trace);
  } catch (const Error& e) {
    fail(name, ": invalid trace: ", e.what());
  }
  return trace;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    if (!std::cout) fail("cannot write to standard output");
    return;
  }
  write_file_atomically(path, text);
}

Mesh parse_mesh(const std::string& text) {
  int r = 0, s = 0;
  char comma = 0, extra = 0;
  std::istringstream in(text);
  if (!(in >> r >> comma >> s) || comma != ',' || (in >> extra) || r < 1 || s < 1)
    fail("--mesh '", text, "': expected R,S with positive integers (R replicas of S-way sharding)");
  return Mesh{r, s};
}

int64_t parse_byte_size(const std::string& option, const std::string& text) {
  std::istringstream in(text);
  double v = 0;
  std::string unit;
  if (!(in >> v) || !(v > 0)) fail(option, " '", text, "': expected a positive size such as 512M or 2G");
  in >> unit;
  const double mult = unit.empty() || unit == "B" ? 1.0 : unit == "K" ? 1024.0 : unit == "M" ? 1024.0 * 1024
                      : unit == "G" ? 1024.0 * 1024 * 1024 : -1;
  std::string rest;
  if (mult < 0 || in >> rest) fail(option, " '", text, "': unit must be B, K, M or G");
  if (!(v * mult < 0x1p62)) fail(option, " '", text, "': larger than any memory (at most 4 EiB)");
  return static_cast<int64_t>(v * mult);
}

int64_t parse_mem_cap(const std::string& text) { return parse_byte_size("--mem-cap", text); }

RematOptions parse_remat(const std::string& text) {
  RematOptions r;
  const std::string mode = text.substr(0, text.find(':'));
  if (mode == "none") r.mode = RematMode::none;
  else if (mode == "block") r.mode = RematMode::block;
  else if (mode == "selective") r.mode = RematMode::selective;
  else if (mode == "auto") r.mode = RematMode::auto_cut;
  else fail("--remat '", text, "': expected none, block, selective, auto or auto:BYTES (for example auto:2G)");
  if (text.size() > mode.size()) {
    if (r.mode != RematMode::auto_cut) fail("--remat '", text, "': only auto takes a budget (auto:BYTES)");
    r.budget_bytes = parse_byte_size("--remat auto:BYTES", text.substr(mode.size() + 1));
  }
  return r;
}

LossChunk parse_loss_chunk(const std::string& text) {
  LossChunk c;
  if (text == "auto") return c;
  if (text == "off") {
    c.fuse = false;
    return c;
  }
  size_t used = 0;
  long long rows = 0;
  try {
    rows = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || rows < 1)
    fail("--loss-chunk '", text, "': expected auto, off, or the rows of logits per chunk (a whole number >= 1)");
  c.rows = rows;
  return c;
}

void add_target_options(CLI::App* cmd, std::string& executor, std::string& fusion) {
  cmd->add_option("--executor", executor,
                  "cpu (CPU kernels + MPI) | cuda (one GPU per rank, CUDA kernels + NCCL) | auto (cuda when a GPU "
                  "is visible)")
      ->capture_default_str();
  cmd->add_option("--fusion", fusion,
                  "none | auto (elementwise ops and row reductions fused into regions compiled by the executor's "
                  "fusion executor: LLVM on cpu, NVRTC on cuda)")
      ->check(CLI::IsMember(fusion_mode_names()))
      ->capture_default_str();
}

void add_loss_chunk_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--loss-chunk", value,
                  "The language-model head and its cross-entropy fused, the logits computed a chunk of rows at a "
                  "time and never whole: auto (chunks of 32 MiB of f32 logits) | ROWS (rows per chunk) | off (the "
                  "head unfused). Not with --tp, nor on the cuda executor (unfused there)")
      ->capture_default_str();
}

namespace {

// "a, b or c".
std::string one_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

TargetRequest parse_executor(const std::string& text) {
  if (const std::optional<TargetRequest> r = parse_target_request(text)) return *r;
  fail("--executor '", text, "': expected ", one_of(target_request_names()));
}

FusionMode parse_fusion(const std::string& text) {
  if (const std::optional<FusionMode> m = parse_fusion_mode(text)) return *m;
  fail("--fusion '", text, "': expected ", one_of(fusion_mode_names()));
}

CLI::Validator whole_number(int64_t lo, int64_t hi) {
  const std::string range = "from " + std::to_string(lo) + " to " + std::to_string(hi);
  // The help shows a bound a user would type, not INT_MAX.
  const std::string desc = hi >= std::numeric_limits<int>::max() ? "INT >= " + std::to_string(lo) : "INT in [" +
                                                                        std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || at != end || v < lo || v > hi)
          return "'" + text + "' is not a whole number " + range;
        return "";
      },
      desc);
}

CLI::Validator real_number(double lo, bool lo_inclusive, double hi, bool hi_inclusive) {
  auto num = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  const std::string range = std::isinf(hi) ? std::string(lo_inclusive ? ">= " : "> ") + num(lo)
                                           : std::string(lo_inclusive ? "in [" : "in (") + num(lo) + ", " + num(hi) +
                                                 (hi_inclusive ? "]" : ")");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size() && errno != ERANGE && std::isfinite(v);
        const bool in = parsed && (lo_inclusive ? v >= lo : v > lo) && (hi_inclusive ? v <= hi : v < hi);
        return in ? "" : "'" + text + "' is not a number " + range;
      },
      "FLOAT " + range);
}

}  // namespace fsdpc::cli
