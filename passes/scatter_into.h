// scatter_into: a scatter-add onto zeros whose result is then added to
// another value scatters into that value instead. Autodiff makes this
// pattern for every tied embedding: the lookup's gradient is an index_add
// into a [V, C] full of zeros, and the head's gradient of the same weight
// (computed at the start of the backward and held to its end) is added to
// it. Three [V, C] buffers are live at that add: the head's gradient, the
// zeros and the scatter's result, 441 MiB for GPT-2 in f32 and the step's
// peak under block remat. Scattered into the head's gradient, two.
//
// Pre:  verify(trace) passes; no fusion regions, no `del` yet (the joint
//       trace, after grad, elide and widen).
// Post: verify() passes. For every top-level
//         z = full(shape=S, value=0, dtype=D)     (z's only use is y; or z
//                                                  a cast of such a full)
//         y = index_add(z, idx, src, dim=d)       (y's only use is s)
//         s = add(a, y)  or  s = add(y, a)        (a a tensor of y's type)
//       the zeros and the index_add go, and s = index_add(a, idx, src,
//       dim=d) sits at the add's place, s keeping its name and type. The
//       sum only changes order: a + Σ src rows rather than (0 + Σ src
//       rows) + a, an f32 rounding apart. Everything else is kept in
//       order; provenance "scatter_into". A trace with nothing to fold
//       comes back as it was.
//
//   t40 = full(shape=[V, C], value=0.0)
//   t41 = index_add(t40, t38, t39, dim=0)   ==>   t42 = index_add(t12, t38, t39, dim=0)
//   t42 = add(t12, t41)
#pragma once

#include "ir/trace.h"

namespace fsdpc {

Trace scatter_into(const Trace& trace);

}  // namespace fsdpc
