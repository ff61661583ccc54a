// place: puts every tensor of a trace on one device. Models are captured on
// the CPU (or loaded from a trace file); training on GPUs runs the same
// trace with every value on the rank's CUDA device, so the executor pass can
// claim it for the CUDA executor. Sub-symbols and creation ops' `device`
// attributes (full, iota) move too.
//
// Pre:  any trace.
// Post: every proxy (arguments, outputs, sub-symbols) has device `device`;
//       every `device` attribute names it; otherwise the trace is unchanged.
//
//   t0 = full(shape=[2], value=0.0, dtype=f32, device=cpu)  # t0: "cpu f32[2]"
//   ==> t0 = full(shape=[2], value=0.0, dtype=f32, device=cuda:0)  # t0: "cuda:0 f32[2]"
#pragma once

#include "ir/trace.h"

namespace fsdpc {

Trace place(const Trace& trace, const Device& device);

}  // namespace fsdpc
