// cuda_binary(): generate (cuda_codegen.cpp), compile with NVRTC, cache.
#include "executors/fusion/nvrtc_compiler.h"

#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "executors/fusion/cuda_codegen.h"
#include "executors/fusion/jit_cache.h"
#include "ir/error.h"

namespace fsdpc::fusion {

namespace {

// Every NVRTC call is checked; the message names the call and the kernel.
void check(nvrtcResult rc, const char* call, const std::string& name, const std::string& log = {}) {
  if (rc == NVRTC_SUCCESS) return;
  fail("NVRTC: ", call, " for ", name, " returned ", nvrtcGetErrorString(rc), log.empty() ? "" : "\ncompile log:\n",
       log);
}

// fmad off: f32 products are rounded before they are added, as on the CPU
// path, so fused and unfused results agree to the last bits they can.
std::vector<std::string> options(int arch) {
  return {"--gpu-architecture=sm_" + std::to_string(arch), "--std=c++17", "--fmad=false"};
}

std::string options_text(int arch) {
  std::string s;
  for (const std::string& o : options(arch)) s += o + " ";
  return s;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::unique_ptr<CudaBinary>> binaries;  // by arch + signature
  std::unique_ptr<DiskCache> disk;
  NvrtcStats stats;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion", "the version");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_cubin(const std::string& source, const std::string& name, int arch) {
  nvrtcProgram prog = nullptr;
  check(nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        name);
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }  // its failure cannot be acted on
  } destroy{&prog};
  const std::vector<std::string> opts = options(arch);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  const nvrtcResult rc = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  if (rc != NVRTC_SUCCESS) {
    size_t log_size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log = "(nvrtcGetProgramLog failed)";
      log.resize(log_size - 1);
    }
    check(rc, "nvrtcCompileProgram", name + " (sm_" + std::to_string(arch) + ")", log + "\nsource:\n" + source);
  }
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize", name);
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN", name);
  return cubin;
}

const CudaBinary& cuda_binary(const Region& region, int arch) {
  const std::string sig = region.signature();
  const std::string id = std::to_string(arch) + "\n" + sig;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.binaries.find(id); it != c.binaries.end()) {
    ++c.stats.hits;
    return *it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (!c.disk) c.disk = std::make_unique<DiskCache>(jit_cache_dir());
  CudaKernelSource src = cuda_source(region);
  auto bin = std::make_unique<CudaBinary>();
  bin->kernel = src.name;
  bin->arch = arch;
  bin->inputs = src.inputs;
  bin->block = src.block;
  bin->grid = src.grid;
  const std::string entry = src.name + "_sm" + std::to_string(arch);
  const std::string key = std::string(kCudaCodegenVersion) + " nvrtc-" + nvrtc_version() + " " + options_text(arch) +
                          "\n" + sig;
  if (std::optional<std::string> stored = c.disk->load(entry, ".cubin", key)) {
    bin->cubin = std::move(*stored);
    ++c.stats.from_disk;
  } else {
    bin->cubin = nvrtc_cubin(src.source, src.name, arch);
    c.disk->store(entry, ".cubin", key, bin->cubin.data(), bin->cubin.size());
  }
  c.stats.compile_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++c.stats.compiled;
  return *c.binaries.emplace(id, std::move(bin)).first->second;
}

NvrtcStats nvrtc_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace fsdpc::fusion
