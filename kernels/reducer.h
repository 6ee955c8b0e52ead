// The reduction interface shared by the CPU reducer (always built) and the CUDA reducer (built with CUDA).
// A Reducer is owned by one server engine thread and called only from that thread; implementations need no
// internal locking. The server's sum engine talks only to this interface, so the CPU and CUDA engines are
// interchangeable (kernels/reducer_factory.h picks one by ZPS_SERVER_ENGINE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/optimizer.h"
#include "zps/dtype.h"
#include "zps/status.h"

namespace zps::kernels {

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual const char* name() const = 0;

  // dst[i] += src[i] for i in [0, count). Both are host pointers. dst is our own buffer, aligned to at least
  // 64 bytes; src usually points into a receive buffer and may have ANY alignment. Integer sums wrap
  // (two's complement); float16/bfloat16 are summed in float32 and rounded to nearest even once per call.
  virtual Status sum(void* dst, const void* src, size_t count, DType dtype) = 0;

  // Accumulating one round of a key (the server's SumStore), which an engine may keep on its device
  // from the first push to the last: start() sets the round's value to src, add() adds src to it,
  // collect() makes dst's host bytes hold the value. Between start and collect dst's host bytes are
  // undefined, and src may be reused as soon as the call returns. Rounds of different keys (different
  // dst) may be in flight together: that is where the CUDA engine overlaps copies and sums. The
  // defaults do each step at once, in host memory.
  // holdsRounds() says whether the store should use them: the CPU reducer does not (the store then
  // sums in host memory itself, adopting the first push's buffer without a copy).
  virtual bool holdsRounds() const { return false; }
  virtual Status start(void* dst, const void* src, size_t count, DType dtype);
  virtual Status add(void* dst, const void* src, size_t count, DType dtype) { return sum(dst, src, count, dtype); }
  virtual Status collect(void* /*dst*/) { return Status::OK(); }
  // Forgets a started round that will never be collected (its store is being reset).
  virtual void discard(void* /*dst*/) {}

  // Server param mode: applies one round's summed gradients to `rows` distinct rows of a table. Row i
  // is the table's row slots[i]: its values at values + slot * dim, its optimizer state at state +
  // slot * optimizerStateFloats * dim, its gradient at grads + i * dim, and steps[i] is its update
  // count including this one. The CPU reducer runs applyOptimizer row by row; the CUDA engine
  // updates every row in one kernel. On failure no row has changed.
  virtual Status applyRows(const OptimizerConfig& config, uint32_t dim, size_t rows, const uint32_t* slots,
                           const uint64_t* steps, const float* grads, float* values, float* state);
};

// The vectorised CPU reducer. Never fails for a valid dtype.
std::unique_ptr<Reducer> makeCpuReducer();

// Free function form of the CPU reducer, for callers without a Reducer object (worker-side local reduce).
void cpuSum(void* dst, const void* src, size_t count, DType dtype);

// IEEE binary16 and bfloat16 conversions (round to nearest even; NaN stays NaN).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace zps::kernels
