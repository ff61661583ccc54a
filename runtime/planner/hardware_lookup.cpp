// --hardware: where a profile comes from. A shipped profile is
// hardware/NAME.json, installed to share/fsdpc/hardware beside bin/ or read
// from the source tree the library was built from (FSDPC_HARDWARE_DIR); a path is read as it is; `local` is this host,
// measured once and cached under $XDG_CACHE_HOME/fsdpc (~/.cache/fsdpc).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "runtime/io/files.h"
#include "runtime/planner/planner.h"

#ifndef FSDPC_HARDWARE_DIR
#define FSDPC_HARDWARE_DIR ""
#endif

namespace fs = std::filesystem;

namespace fsdpc {

namespace {

using Clock = std::chrono::steady_clock;

// How the local profile's overhead sources begin: a cached profile without
// it predates the measurement (its 10 us a statement was a guess) and is
// measured again.
constexpr const char* kMeasuredOverhead = "measured";

std::vector<fs::path> profile_dirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  // Installed: share/fsdpc/hardware beside the bin/ of this program (the
  // CLI), or of the fsdpc CLI a program linking the library finds.
  auto installed = [](const fs::path& exe) { return exe.parent_path().parent_path() / "share" / "fsdpc" / "hardware"; };
  if (const fs::path self = fs::read_symlink("/proc/self/exe", ec); !ec) dirs.push_back(installed(self));
  try {
    dirs.push_back(installed(fsdpc_executable()));
  } catch (const Error&) {  // no CLI installed: the source tree's, or a path
  }
  if (std::strlen(FSDPC_HARDWARE_DIR)) dirs.emplace_back(FSDPC_HARDWARE_DIR);
  return dirs;
}

HardwareProfile read_profile(const fs::path& file) {
  return parse_hardware_profile(read_file(file.string()), file.string());
}

fs::path cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "fsdpc";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "fsdpc";
  return fs::temp_directory_path() / "fsdpc-cache";
}

// A 640^3 sgemm (about 524 MFLOP) through the CPU executor's matmul kernel.
// FLOP/s of a 640^3 matmul through the CPU executor, in f32 or in bf16
// (oneDNN's bf16 kernel with f32 accumulation).
double measure_gemm(DType dtype) {
  constexpr int64_t n = 640;
  return 2.0 * n * n * n / kernel_call_seconds(square_matmul(n, dtype), 0.3, 3);
}

// A 256 MiB copy: bytes read plus bytes written per second.
double measure_copy() {
  const size_t bytes = 256u << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const double s = best_seconds([&] { std::memcpy(dst.data(), src.data(), bytes); }, 0.3);
  return 2.0 * static_cast<double>(bytes) / s;
}

// The link between `world` ranks of this host, measured by `mpirun -np
// world fsdpc link-probe` (tools/link_probe_command.cpp) into `link`. Without
// mpirun, or when the probe fails, `link` keeps its assumptions, and a line
// says why: the profile is still usable, only less exact.
void measure_local_link(int world, LinkProfile& link) {
  try {
    const nlohmann::json j = nlohmann::json::parse(
        run_probe(world, "", [](const std::string& dir) { return "link-probe --out " + shell_quote(dir + "/out.json"); }));
    const double latency = j.at("latency").get<double>(), bandwidth = j.at("bandwidth").get<double>();
    const double host = j.at("host_overhead").get<double>();
    const double scatter = j.at("reduce_scatter_bandwidth").get<double>();
    const double reduce = j.at("all_reduce_bandwidth").get<double>();
    if (!(latency > 0 && bandwidth > 0 && host > 0 && scatter > 0 && reduce > 0))
      fail("a figure at or below 0: ", j.dump());
    LinkProfile m;  // assigned to `link` only once every figure was read
    const std::string by = "measured: `mpirun -np " + std::to_string(world) +
                           " fsdpc link-probe` on this host (the runtime's MPI collectives, poll progress), slowest "
                           "rank's median: ";
    m.latency = {latency, by + "an all_gather of one f32 a rank, issue to wait, over the ring's p - 1 steps"};
    const std::string large = std::to_string(j.at("large_bytes").get<int64_t>()) + " bytes";
    m.bandwidth = {bandwidth, by + "an all_gather of " + large +
                                     ", beyond the small one's time, as (p - 1)/p of the bytes"};
    m.reduce_scatter_bandwidth = {scatter, by + "a reduce_scatter of " + large +
                                                  ", beyond the small one's time, as (p - 1)/p of the bytes"};
    m.all_reduce_bandwidth = {reduce, by + "an all_reduce of " + large +
                                             ", beyond the small one's time, as twice (p - 1)/p of the bytes"};
    m.sustained_fraction = {1, "already a rate measured through MPI"};
    // What the chains were: "240 8x8 matmuls with and without 20 all_gathers
    // of 2048 bytes, each in flight across 12 of them".
    auto chain = [&](const nlohmann::json& c) {
      const std::string side = std::to_string(c.at("matmul_side").get<int>());
      return std::to_string(c.at("matmuls").get<int>()) + " " + side + "x" + side + " matmuls with and without " +
             std::to_string(c.at("collectives").get<int>()) + " all_gathers of " +
             std::to_string(c.at("gather_bytes").get<int64_t>()) + " bytes, each in flight across " +
             std::to_string(c.at("statements_in_flight").get<int>()) + " of them";
    };
    const nlohmann::json& chains = j.at("chains");
    m.host_overhead = {host, by + "the difference per collective of a chain of " + chain(chains.at(0))};
    if (const double hb = j.at("host_bandwidth").get<double>(); hb > 0)
      m.host_bandwidth = {hb, by + "the bytes a rank sends over the extra host time per collective of a chain "
                                      "of " + chain(chains.at(1)) + ", beyond the first chain's"};
    link = m;
  } catch (const std::exception& e) {  // nlohmann's errors too: a probe's bad output is not the user's
    std::fprintf(stderr, "fsdpc advise: the link probe gave nothing (%s); the link between ranks is assumed, not "
                         "measured\n", e.what());
  }
}

// "; link: 1.4 us latency, 5.6 GB/s, 3.1 us and 4.2 GB/s of host time", or
// "" for a link not measured.
std::string link_summary(const LinkProfile& l) {
  if (!(l.host_overhead.value > 0)) return "";
  char text[160];
  std::snprintf(text, sizeof text, "; link: %.2f us latency, %.2f GB/s, %.2f us and %.2f GB/s of host time",
                l.latency.value * 1e6, l.bandwidth.value / 1e9, l.host_overhead.value * 1e6,
                l.host_bandwidth.value / 1e9);
  return text;
}

}  // namespace

double best_seconds(const std::function<void()>& f, double budget, int min_reps, int max_reps) {
  f();  // warm-up: oneDNN builds its primitive, pages are touched, regions compile
  double best = 1e30, total = 0;
  for (int rep = 0; rep < max_reps && (rep < min_reps || total < budget); ++rep) {
    const auto t0 = Clock::now();
    f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

HardwareProfile measure_local_hardware(int world) {
  set_cpu_ranks_per_host(world);
  const int threads = cpu_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Ranks beyond the cores share them: each gets cores/world of one.
  const double share = world > cores ? static_cast<double>(cores) / world : 1.0;
  const double sgemm = measure_gemm(DType::f32) * share, bf16_gemm = measure_gemm(DType::bf16) * share;
  const double copy = measure_copy() * share;
  char host[256] = "this host";
  gethostname(host, sizeof host - 1);
  const std::string on = std::string(" on ") + host + ", " + std::to_string(threads) + " thread(s) per rank for " +
                         std::to_string(world) + " rank(s) on " + std::to_string(cores) + " core(s)";
  HardwareProfile p;
  p.name = "local";
  p.description = "this host, measured by fsdpc advise --hardware local" + on;
  p.executor = Target::cpu;
  p.precision = DType::f32;
  p.gpus_per_node = {4096, "every rank runs on this host (one node)"};
  p.peak_flops_f32 = {sgemm, "measured: best of a 640x640x640 sgemm through the CPU executor (oneDNN)" + on +
                                 (share < 1 ? ", scaled by cores/ranks" : "")};
  p.peak_flops_bf16 = {bf16_gemm, "measured: best of a 640x640x640 bf16 matmul (f32 accumulation) through the CPU "
                                  "executor (" + cpu_bf16_matmul_info() + ")" + on +
                                  (share < 1 ? ", scaled by cores/ranks" : "")};
  p.matmul_sustained_fraction = {1, "the measured sgemm rate is already sustained (MFU is read against it)"};
  p.memory_bandwidth = {copy, "measured: best 256 MiB memcpy, bytes read + written, one thread" + on};
  p.memory_sustained_fraction = {1, "the measured copy is already sustained"};
  LaunchOverheads launch = measure_launch_overheads();
  for (double* v : {&launch.statement, &launch.region, &launch.matmul}) *v /= share;  // ranks sharing a core take turns
  const std::string probe = " per launch through the Interpreter and the CPU executor (best of chains of 200 "
                            "statements on 8x8 tensors, the work negligible)" + on +
                            (share < 1 ? ", scaled by ranks/cores" : "");
  p.kernel_overhead = {launch.statement, std::string(kMeasuredOverhead) + ": a plain statement (mul, add)" + probe +
                                             "; not counted: MPI's progress poll between statements"};
  p.region_overhead = {launch.region, std::string(kMeasuredOverhead) + ": a fused region (JIT-compiled)" + probe};
  p.matmul_overhead = {launch.matmul, std::string(kMeasuredOverhead) + ": a matmul (oneDNN)" + probe};
  p.elementwise_rate = {launch.elementwise_rate * share,
                        "measured: element-operations per second of a fused gelu region (8 ops, one a tanh) on "
                        "128x128, its launch left out" + on + (share < 1 ? ", scaled by cores/ranks" : "")};
  p.row_region_rate = {launch.row_region_rate * share,
                       "measured: element-operations per second of a fused softmax region (8 ops, row amax "
                       "and sum) on 4x64x64, its launch left out" + on + (share < 1 ? ", scaled by cores/ranks" : "")};
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (ram > 0) p.memory_capacity = {ram / world, "this host's physical memory (sysconf) divided by its " +
                                                     std::to_string(world) + " rank(s)"};
  p.intra_node = {{copy / 2, "assumption: Open MPI's shared-memory transport copies each message in and out of a "
                             "shared buffer, half the measured copy rate"},
                  {1e-6, "assumption: about 1 us per ring step in shared memory (Open MPI's documented sm latency "
                         "is below a microsecond; fsdpc's poll progress adds to it)"},
                  {1, "the copy rate is already measured"},
                  {},
                  {},
                  {},
                  {}};
  if (world > 1) measure_local_link(world, p.intra_node);
  p.inter_node = {{copy / 2, "unused: every rank runs on this host"}, {1e-6, "unused: every rank runs on this host"},
                  {1, "unused: every rank runs on this host"}, {}, {}, {}, {}};
  return p;
}

HardwareProfile load_hardware(const std::string& spec, int world) {
  if (spec == "local") {
    set_cpu_ranks_per_host(world);
    // Keyed by host too: a home folder may be shared between machines.
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    const fs::path cache = cache_dir() / ("hardware-local-" + std::string(host) + "-" + std::to_string(world) +
                                          "ranks-" + std::to_string(cpu_threads()) + "threads.json");
    if (fs::exists(cache)) {
      HardwareProfile cached = read_profile(cache);
      // Profiles of several ranks made before the link was measured
      // priced each collective's host time at nothing.
      // (Without mpirun it cannot be measured now either.)
      const bool link_measured = world == 1 || cached.intra_node.host_overhead.value > 0 || find_mpirun().empty();
      if (cached.kernel_overhead.source.starts_with(kMeasuredOverhead) && link_measured) {
        std::fprintf(stderr, "fsdpc advise: hardware local read from %s (delete it to measure again)\n",
                     cache.c_str());
        return cached;
      }
      std::fprintf(stderr, "fsdpc advise: %s has no measured %s; measuring again\n", cache.c_str(),
                   link_measured ? "launch overhead" : "link between ranks");
    }
    HardwareProfile p = measure_local_hardware(world);
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    try {
      write_file_atomically(cache.string(), hardware_profile_json(p));
      p.file = cache.string();
      std::fprintf(stderr,
                   "fsdpc advise: hardware local measured (%.1f GFLOP/s sgemm, %.1f GB/s copy, launches: %.2f us a "
                   "statement, %.2f us a region, %.2f us a matmul%s), cached in %s\n",
                   p.peak_flops_f32.value / 1e9, p.memory_bandwidth.value / 1e9, p.kernel_overhead.value * 1e6,
                   p.region_overhead.value * 1e6, p.matmul_overhead.value * 1e6, link_summary(p.intra_node).c_str(),
                   cache.c_str());
    } catch (const Error& e) {  // an unwritable cache costs a measurement next time, not this run
      std::fprintf(stderr, "fsdpc advise: hardware local measured, not cached (%s)\n", e.what());
    }
    return p;
  }
  if (spec.find('/') != std::string::npos || spec.ends_with(".json")) {
    if (!fs::is_regular_file(spec)) fail("--hardware ", spec, ": no such file");
    return read_profile(spec);
  }
  std::string known;
  for (const fs::path& dir : profile_dirs()) {
    const fs::path file = dir / (spec + ".json");
    if (fs::is_regular_file(file)) return read_profile(file);
    std::error_code ec;
    if (known.empty() && fs::is_directory(dir, ec)) {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
      std::sort(names.begin(), names.end());
      for (const std::string& n : names) known += ", " + n;
    }
  }
  fail("--hardware '", spec, "': no such profile (expected local", known, ", or a .json file)");
}

}  // namespace fsdpc
