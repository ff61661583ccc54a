// Private to the CPU fusion executor (llvm_jit.cpp, llvm_lowering.cpp), the
// only files that see LLVM: a Region (region.h) as LLVM IR.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <string>

#include "executors/fusion/region.h"

namespace fsdpc::fusion {

// Adds `void <name>(const void* const* ins, void* const* outs, i64 row_begin,
// i64 row_end)` (llvm_jit.h's RegionFn) and its row loop to `m`.
void lower_region(llvm::LLVMContext& ctx, llvm::Module& m, const Region& r, const std::string& name);

}  // namespace fsdpc::fusion
