// quantize_gathers (fsdpc train --gather-dtype int8): the parameters'
// all_gathers move int8 codes with f32 scales (ir/quantize.h) instead of
// the parameters' own dtype, as ZeRO++'s quantized weight communication
// (qwZ) does: a quarter of f32's bytes and half of bf16's, plus 1.6% of
// scales. Only gathers of parameters: a gradient is never quantized (its
// error would accumulate without error feedback), nor an activation.
#pragma once

#include "ir/trace.h"

namespace fsdpc {

// Pre:  a forward or backward trace after bucketing (before schedule). A
//       parameter gather is an all_gather of a fully_sharded f32 or bf16
//       value (a shard, a cast of one, or a pack of shards) whose future one
//       wait reads; its gather dim is 0. (bucketing with int8_gathers
//       already quantized each shard of a unit before packing it, so that
//       no block straddles two parameters; those gathers move i8 and are
//       left as they are.)
// Post: each such gather, where it stood, is
//         q = quantize(x, block=256)     x: the shard, or a cast's source
//         f = all_gather(q, ...)          (when the cast is read only here:
//         w = wait(f)                      its f32 source codes more exactly)
//         y = dequantize(w, block=256, dtype=<the old wait's dtype>)
//       with a reshape around dequantize for a 1-D (packed) buffer, whose
//       gathered rows sit end to end; y keeps the old wait's name and type,
//       so nothing after it changes. Verifies.
Trace quantize_gathers(const Trace& t);

}  // namespace fsdpc
