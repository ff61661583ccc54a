// The element types device code stores, as kernel launch functions name
// them: the IR's DType stays out of kernel headers, so .cu files build
// without the IR and host files map DType to this in one switch.
#pragma once

#include <cstdint>

namespace fsdpc::cuda {

// bool is one byte holding 0 or 1, as on the CPU.
enum class ElementType : uint8_t { f32, bf16, f16, f64, i32, i64, boolean };

}  // namespace fsdpc::cuda
