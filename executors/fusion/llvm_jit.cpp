// LlvmJit: one LLJIT per process for the host CPU; each region is lowered
// (llvm_lowering.cpp), optimised at O3 with the host's vector library, and
// compiled to an object, or loaded from the disk cache, then linked in.
#include "executors/fusion/llvm_jit.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <atomic>
#include <exception>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "executors/fusion/jit_cache.h"
#include "executors/fusion/llvm_lowering.h"
#include "ir/error.h"

namespace fsdpc::fusion {

namespace {

std::string message(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
T take(llvm::Expected<T> v, const char* what) {
  if (!v) fail("fusion JIT: ", what, ": ", message(v.takeError()));
  return std::move(*v);
}

}  // namespace

struct LlvmJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::optional<llvm::orc::JITTargetMachineBuilder> jtmb;  // a target machine per compiling thread
  std::unique_ptr<llvm::TargetMachine> tm;
  bool libmvec = false;
  std::string host;  // what compiled code depends on besides the region
  DiskCache disk;
  std::unordered_map<std::string, RegionFn> compiled;  // by symbol name
  int64_t disk_hits = 0;

  Impl(const std::string& cache_dir) : disk(cache_dir) {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    tm = take(jtmb.createTargetMachine(), "creating the target machine");
    this->jtmb = jtmb;
    jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(jtmb).create(), "creating LLJIT");
    const char prefix = jit->getDataLayout().getGlobalPrefix();
    jit->getMainJITDylib().addGenerator(
        take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix), "searching the process"));
    // glibc's vector math: lets the vectoriser widen exp, log and pow.
    auto mvec = llvm::orc::DynamicLibrarySearchGenerator::Load("libmvec.so.1", prefix);
    if (mvec) {
      jit->getMainJITDylib().addGenerator(std::move(*mvec));
      libmvec = true;
    } else {
      llvm::consumeError(mvec.takeError());
    }
    host = std::string("fsdpc-fusion-1 llvm-") + LLVM_VERSION_STRING + " " + tm->getTargetTriple().str() + " " +
           tm->getTargetCPU().str() + " " + tm->getTargetFeatureString().str() + (libmvec ? " libmvec" : "");
  }

  // The region compiled to a relocatable object for this host, with `t`
  // (a thread compiling beside others brings its own target machine).
  std::unique_ptr<llvm::MemoryBuffer> object(const Region& r, const std::string& name, llvm::TargetMachine& t) {
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> m = lower(ctx, r, name);
    optimize(*m, t);
    llvm::SmallVector<char, 0> buf;
    {
      llvm::raw_svector_ostream os(buf);
      llvm::legacy::PassManager pm;
      FSDPC_CHECK(!t.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
          << "the host target cannot emit object files";
      pm.run(*m);
    }
    return std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(buf), name, false);
  }

  // The cached object of `name` when its key file says it is this region's.
  std::unique_ptr<llvm::MemoryBuffer> load(const std::string& name, const std::string& key) {
    std::optional<std::string> obj = disk.load(name, ".o", key);
    if (!obj) return nullptr;
    ++disk_hits;
    return llvm::MemoryBuffer::getMemBufferCopy(*obj, name);
  }

  void store(const std::string& name, const std::string& key, const llvm::MemoryBuffer& obj) {
    disk.store(name, ".o", key, obj.getBufferStart(), obj.getBufferSize());
  }

  std::unique_ptr<llvm::Module> lower(llvm::LLVMContext& ctx, const Region& r, const std::string& name) {
    auto m = std::make_unique<llvm::Module>(name, ctx);
    m->setDataLayout(jit->getDataLayout());
    m->setTargetTriple(tm->getTargetTriple().str());
    lower_region(ctx, *m, r, name);
    std::string err;
    llvm::raw_string_ostream os(err);
    FSDPC_CHECK(!llvm::verifyModule(*m, &os)) << "fusion JIT produced invalid IR: " << os.str();
    return m;
  }

  void optimize(llvm::Module& m, llvm::TargetMachine& t) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(&t, pto);
    llvm::TargetLibraryInfoImpl tlii(llvm::Triple(m.getTargetTriple()));
    if (libmvec) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
  }
};

LlvmJit::LlvmJit(const std::string& cache_dir) : impl_(std::make_unique<Impl>(cache_dir)) {}
LlvmJit::~LlvmJit() = default;

// The symbol is named after the region's key, so an object from the disk
// cache, compiled by another process, defines the name looked up here.
RegionFn LlvmJit::compile(const Region& region) {
  const std::string key = impl_->host + "\n" + region.signature();
  const std::string name = "fsdpc_region_" + hex(stable_hash(key));
  if (auto it = impl_->compiled.find(name); it != impl_->compiled.end()) return it->second;
  std::unique_ptr<llvm::MemoryBuffer> obj = impl_->load(name, key);
  if (!obj) {
    obj = impl_->object(region, name, *impl_->tm);
    impl_->store(name, key, *obj);
  }
  if (llvm::Error e = impl_->jit->addObjectFile(std::move(obj)))
    fail("fusion JIT: adding the object: ", message(std::move(e)));
  auto addr = take(impl_->jit->lookup(name), "looking up the region");
  const RegionFn fn = addr.toPtr<RegionFn>();
  impl_->compiled.emplace(name, fn);
  return fn;
}

std::vector<RegionFn> LlvmJit::compile_all(const std::vector<Region>& regions, int threads) {
  struct Job {
    const Region* region;
    std::string key, name;
    std::unique_ptr<llvm::MemoryBuffer> obj;
  };
  std::vector<Job> jobs;
  std::unordered_set<std::string> seen;
  for (const Region& r : regions) {
    std::string key = impl_->host + "\n" + r.signature();
    std::string name = "fsdpc_region_" + hex(stable_hash(key));
    if (impl_->compiled.count(name) || !seen.insert(name).second) continue;
    std::unique_ptr<llvm::MemoryBuffer> obj = impl_->load(name, key);
    jobs.push_back(Job{&r, std::move(key), std::move(name), std::move(obj)});
  }
  std::vector<Job*> missing;
  for (Job& j : jobs)
    if (!j.obj) missing.push_back(&j);
  // Workers take regions in turn; the first error is rethrown here, after
  // every worker has stopped.
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&](std::exception_ptr& mine) {
    try {
      std::unique_ptr<llvm::TargetMachine> t = take(impl_->jtmb->createTargetMachine(), "creating a target machine");
      for (size_t k; !failed && (k = next++) < missing.size();)
        missing[k]->obj = impl_->object(*missing[k]->region, missing[k]->name, *t);
    } catch (...) {
      mine = std::current_exception();
      failed = true;
    }
  };
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), missing.size());
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work, std::ref(errors[i]));
  if (n > 0) work(errors[0]);
  for (std::thread& t : pool) t.join();
  for (std::exception_ptr& e : errors)
    if (e && !error) error = e;
  if (error) std::rethrow_exception(error);
  for (Job* j : missing) impl_->store(j->name, j->key, *j->obj);
  for (Job& j : jobs) {
    if (llvm::Error e = impl_->jit->addObjectFile(std::move(j.obj)))
      fail("fusion JIT: adding the object: ", message(std::move(e)));
    auto addr = take(impl_->jit->lookup(j.name), "looking up the region");
    impl_->compiled.emplace(j.name, addr.toPtr<RegionFn>());
  }
  std::vector<RegionFn> fns;
  for (const Region& r : regions) fns.push_back(compile(r));  // each is compiled now
  return fns;
}

int64_t LlvmJit::disk_hits() const { return impl_->disk_hits; }

std::string LlvmJit::unoptimized_ir(const Region& region) { return ir_text(region, false); }
std::string LlvmJit::optimized_ir(const Region& region) { return ir_text(region, true); }

std::string LlvmJit::ir_text(const Region& region, bool optimized) {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = impl_->lower(ctx, region, "fsdpc_region");
  if (optimized) impl_->optimize(*m, *impl_->tm);
  std::string out;
  llvm::raw_string_ostream os(out);
  m->print(os, nullptr);
  return os.str();
}

}  // namespace fsdpc::fusion
