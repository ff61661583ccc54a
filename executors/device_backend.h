// What the runtime needs of a device beyond the kernels of a trace: memory,
// copies to and from the host, and the flat-array loops of a training step
// that are not trace ops (gradient accumulation, the clipping norm and
// scale, the optimizer updates). The CPU backend runs them as loops on host
// memory; the CUDA backend as kernels on the rank's compute stream. The
// allocator, optimizer and engine are written once against this interface,
// so the CPU tests exercise the same runtime code a GPU runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/types.h"

namespace fsdpc {

// One optimizer update of a flat f32 shard: PyTorch's rules, documented in
// runtime/optimizer.h. Arithmetic in double on the CPU.
struct SgdStep {
  double lr, momentum, weight_decay;
  bool first;  // the momentum buffer starts as the first gradient
  // Clipping's coefficient, folded into the update's read of the gradient
  // (g * grad_scale in float, as torch scales): 1 when not clipping.
  float grad_scale = 1.0f;
};
struct AdamwStep {
  double lr, beta1, beta2, eps, weight_decay;
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float grad_scale = 1.0f;        // as SgdStep's
  // The parameter's first step: exp_avg and exp_avg_sq are uninitialised
  // and read as 0 (the optimizer skips zeroing them).
  bool first = false;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual Device device() const = 0;

  // Raw memory for the caching allocator: nullptr when the device is out of
  // memory. Blocks are aligned to alignment() bytes.
  virtual size_t alignment() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  virtual void zero(void* p, size_t bytes) = 0;

  // Host <-> device. copy_to_host returns once the bytes are on the host.
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Device to device, in stream order (DiLoCo's anchor <-> parameters).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // dst += src; x *= s.
  virtual void add_into(float* dst, const float* src, int64_t n) = 0;
  virtual void scale(float* x, int64_t n, float s) = 0;
  // The sum of the squares of every element of every span, in double,
  // returned to the host once (one synchronisation for all the gradients).
  struct Span {
    const float* data;
    int64_t n;
  };
  virtual double sum_squares(const std::vector<Span>& xs) = 0;

  // momentum_buf may be null (no momentum).
  virtual void sgd_update(float* param, const float* grad, float* momentum_buf, int64_t n, const SgdStep& s) = 0;
  virtual void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                            const AdamwStep& s) = 0;

  // Blocks until every queued operation on the device is done.
  virtual void synchronize() = 0;
};

// The host: aligned malloc'd memory and loops (executors/cpu/cpu_backend.cpp).
DeviceBackend& cpu_backend();

}  // namespace fsdpc
