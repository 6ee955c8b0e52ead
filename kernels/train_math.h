// The per-element and per-row formulas of the dense models, shared by the CPU ops
// (train/cpu_train_ops.cc, train/model.cc) and the CUDA kernels
// (kernels/cuda/train_ops.cu), so both backends compute the same thing from one source. Heads work in
// double, as they always have on the CPU. Plain C++ for the host; nvcc also compiles them for the
// device.
#pragma once

#include <math.h>

#include <cstddef>

#include "kernels/train_ops.h"

#if defined(__CUDACC__)
#define ZPS_HOST_DEVICE __host__ __device__
#else
#define ZPS_HOST_DEVICE
#endif

namespace zps::kernels::train_math {

ZPS_HOST_DEVICE inline float relu(float v) { return v > 0.0f ? v : 0.0f; }
// ReLU passes the gradient where its output was positive.
ZPS_HOST_DEVICE inline float reluBackward(float delta, float act) { return act > 0.0f ? delta : 0.0f; }

ZPS_HOST_DEVICE inline double sigmoid(double v) {
  if (v >= 0) return 1.0 / (1.0 + exp(-v));
  const double e = exp(v);
  return e / (1.0 + e);
}

// sum_k exp(z[k] - m) over c logits, with m (written to *max) their maximum, so exp never
// overflows.
ZPS_HOST_DEVICE inline double shiftedExpSum(const float* z, size_t c, double* max) {
  double m = z[0];
  for (size_t k = 1; k < c; ++k) m = m < z[k] ? static_cast<double>(z[k]) : m;
  double s = 0;
  for (size_t k = 0; k < c; ++k) s += exp(z[k] - m);
  *max = m;
  return s;
}

// The loss of one row's c logits against its label, and (if grad is not null) d(loss)/d(logits).
ZPS_HOST_DEVICE inline double headLoss(LossHead head, const float* z, size_t c, float label, float* grad) {
  switch (head) {
    case LossHead::kSquared: {
      const double d = static_cast<double>(z[0]) - label;
      if (grad) grad[0] = static_cast<float>(2.0 * d);
      return d * d;
    }
    case LossHead::kSoftmax: {
      const size_t t = static_cast<size_t>(label);
      double m = 0;
      const double s = shiftedExpSum(z, c, &m);
      const double lse = m + log(s);
      if (grad) {
        for (size_t k = 0; k < c; ++k) grad[k] = static_cast<float>(exp(z[k] - lse) - (k == t ? 1.0 : 0.0));
      }
      return lse - z[t];
    }
    case LossHead::kLogistic: {
      const double v = z[0];
      if (grad) grad[0] = static_cast<float>(sigmoid(v) - label);
      // softplus(v) - t * v, written so that exp never overflows.
      return (v > 0.0 ? v : 0.0) - label * v + log1p(exp(-fabs(v)));
    }
  }
  return 0;
}

// The head's outputs for one row: the value, the class probabilities, or P(1).
ZPS_HOST_DEVICE inline void headOutput(LossHead head, const float* z, size_t c, float* out) {
  switch (head) {
    case LossHead::kSquared: out[0] = z[0]; return;
    case LossHead::kSoftmax: {
      double m = 0;
      const double s = shiftedExpSum(z, c, &m);
      for (size_t k = 0; k < c; ++k) out[k] = static_cast<float>(exp(z[k] - m) / s);
      return;
    }
    case LossHead::kLogistic: out[0] = static_cast<float>(sigmoid(z[0])); return;
  }
}

}  // namespace zps::kernels::train_math
