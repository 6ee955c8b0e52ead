// The GPU backend of kernels/train_ops.h: cuBLAS products (kernels/cuda/cublas_gemm.cc) and the
// kernels below, all on the GpuGemm's stream so they run in order without host waits. The formulas
// come from kernels/train_math.h, shared with the CPU backend. Every call and launch is checked; the
// first failure is kept, with its call, file and line, in status(), and later ops do nothing.
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda_blas.h"
#include "kernels/cuda_optimizer.h"
#include "kernels/train_math.h"
#include "kernels/train_ops.h"

namespace zps::kernels {
namespace {

namespace math = train_math;

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

unsigned gridFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks == 0) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

#define ZPS_TRAIN_GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); i += size_t{gridDim.x} * blockDim.x)

__global__ void fillRowsKernel(float* __restrict__ out, const float* __restrict__ row, size_t rows, size_t width) {
  ZPS_TRAIN_GRID_STRIDE(i, rows * width) out[i] = row[i % width];
}

__global__ void reluKernel(float* x, size_t n) { ZPS_TRAIN_GRID_STRIDE(i, n) x[i] = math::relu(x[i]); }

__global__ void reluBackwardKernel(float* __restrict__ delta, const float* __restrict__ act, size_t n) {
  ZPS_TRAIN_GRID_STRIDE(i, n) delta[i] = math::reluBackward(delta[i], act[i]);
}

// One thread per column, adding the rows in order: the CPU's order, hence its exact sums.
__global__ void columnSumsKernel(const float* __restrict__ x, size_t rows, size_t width, float* __restrict__ out) {
  ZPS_TRAIN_GRID_STRIDE(o, width) {
    float s = 0.0f;
    for (size_t r = 0; r < rows; ++r) s = __fadd_rn(s, x[r * width + o]);
    out[o] = s;
  }
}

__global__ void scaleKernel(float* x, size_t n, float factor) {
  ZPS_TRAIN_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], factor);
}

__global__ void subtractKernel(float* out, const float* a, const float* b, size_t n) {
  ZPS_TRAIN_GRID_STRIDE(i, n) out[i] = __fsub_rn(a[i], b[i]);
}

// One thread per row: its loss (into row_loss) and its logits' gradient.
__global__ void headKernel(LossHead head, const float* __restrict__ logits, const float* __restrict__ labels,
                           size_t rows, size_t width, float* __restrict__ delta, double* __restrict__ row_loss) {
  ZPS_TRAIN_GRID_STRIDE(i, rows) {
    row_loss[i] = math::headLoss(head, logits + i * width, width, labels[i], delta + i * width);
  }
}

// The row losses added in row order, as the CPU adds them. One thread: a batch has few rows.
__global__ void sumInOrderKernel(const double* __restrict__ x, size_t n, double* __restrict__ out) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  *out = s;
}

// Inside CudaTrainOps: records the first failing CUDA call of an op (its text, file and line).
#define ZPS_TRAIN_OPS_CUDA(call) static_cast<void>(ok((call), #call, __FILE__, __LINE__))

class CudaTrainOps final : public TrainOps {
 public:
  CudaTrainOps(int device, std::unique_ptr<GpuGemm> gemm)
      : device_(device), gemm_(std::move(gemm)), stream_(static_cast<cudaStream_t>(gemm_->stream())) {}
  ~CudaTrainOps() override { static_cast<void>(cudaSetDevice(device_)); }

  std::string describe() const override { return "cuda (cuBLAS on GPU " + std::to_string(device_) + ")"; }
  Status status() const override { return error_; }

  float* allocate(size_t floats) override {
    void* p = nullptr;
    if (!ready() || !ok(cudaMalloc(&p, floats * sizeof(float)), "cudaMalloc", __FILE__, __LINE__)) return nullptr;
    return static_cast<float*>(p);
  }
  // Buffers are released when they grow, possibly while queued ops still read them: cudaFree
  // only "may" synchronise (cuMemFree's documentation), so the stream is drained first.
  void release(float* p) override {
    if (p == nullptr) return;
    static_cast<void>(cudaSetDevice(device_));
    static_cast<void>(cudaStreamSynchronize(stream_));
    static_cast<void>(cudaFree(p));
  }
  float* allocateStaging(size_t floats) override {
    void* p = nullptr;
    if (!ready() ||
        !ok(cudaHostAlloc(&p, floats * sizeof(float), cudaHostAllocDefault), "cudaHostAlloc", __FILE__, __LINE__))
      return nullptr;
    return static_cast<float*>(p);
  }
  void releaseStaging(float* p) override {
    if (p == nullptr) return;
    static_cast<void>(cudaSetDevice(device_));
    static_cast<void>(cudaStreamSynchronize(stream_));  // an upload may still read it
    static_cast<void>(cudaFreeHost(p));
  }

  void upload(float* dst, const float* host, size_t n) override {
    if (ready() && n > 0)
      ZPS_TRAIN_OPS_CUDA(cudaMemcpyAsync(dst, host, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  void download(float* host, const float* src, size_t n) override {
    if (ready() && n > 0)
      ZPS_TRAIN_OPS_CUDA(cudaMemcpyAsync(host, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }
  void synchronize() override {
    if (ready()) ZPS_TRAIN_OPS_CUDA(cudaStreamSynchronize(stream_));
  }

  void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
            const float* b, size_t ldb, float beta, float* c, size_t ldc) override {
    if (ready()) keep(gemm_->gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  }
  void fillRows(float* out, const float* row, size_t rows, size_t width) override {
    if (!ready() || rows * width == 0) return;
    fillRowsKernel<<<gridFor(rows * width), kThreads, 0, stream_>>>(out, row, rows, width);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  void setZero(float* x, size_t n) override {
    if (ready() && n > 0) ZPS_TRAIN_OPS_CUDA(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (ready() && n > 0 && dst != src)
      ZPS_TRAIN_OPS_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void relu(float* x, size_t n) override {
    if (!ready() || n == 0) return;
    reluKernel<<<gridFor(n), kThreads, 0, stream_>>>(x, n);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  void reluBackward(float* delta, const float* act, size_t n) override {
    if (!ready() || n == 0) return;
    reluBackwardKernel<<<gridFor(n), kThreads, 0, stream_>>>(delta, act, n);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  void columnSums(const float* x, size_t rows, size_t width, float* out) override {
    if (!ready() || width == 0) return;
    columnSumsKernel<<<gridFor(width), kThreads, 0, stream_>>>(x, rows, width, out);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  void scale(float* x, size_t n, float factor) override {
    if (!ready() || n == 0) return;
    scaleKernel<<<gridFor(n), kThreads, 0, stream_>>>(x, n, factor);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  void subtract(float* out, const float* a, const float* b, size_t n) override {
    if (!ready() || n == 0) return;
    subtractKernel<<<gridFor(n), kThreads, 0, stream_>>>(out, a, b, n);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
  }
  double headLossGrad(LossHead head, const float* logits, const float* labels, size_t rows, size_t width,
                      float* delta) override {
    if (!ready() || rows == 0) return 0.0;
    if (!keep(row_loss_.reserve(rows * sizeof(double))) || !keep(loss_.reserve(sizeof(double))) ||
        !keep(host_loss_.reserve(sizeof(double))))
      return 0.0;
    auto* row_loss = static_cast<double*>(row_loss_.data());
    auto* loss = static_cast<double*>(loss_.data());
    headKernel<<<gridFor(rows), kThreads, 0, stream_>>>(head, logits, labels, rows, width, delta, row_loss);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
    sumInOrderKernel<<<1, 1, 0, stream_>>>(row_loss, rows, loss);
    ZPS_TRAIN_OPS_CUDA(cudaGetLastError());
    ZPS_TRAIN_OPS_CUDA(cudaMemcpyAsync(host_loss_.data(), loss, sizeof(double), cudaMemcpyDeviceToHost, stream_));
    synchronize();
    return error_.ok() ? *static_cast<const double*>(host_loss_.data()) : 0.0;
  }
  void applyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                      uint64_t step) override {
    if (ready()) keep(cudaApplyOptimizer(config, params, state, grad, n, step, stream_));
  }

 private:
  // True while no op has failed, with this backend's GPU current for the calling thread.
  bool ready() { return error_.ok() && ok(cudaSetDevice(device_), "cudaSetDevice", __FILE__, __LINE__); }
  bool ok(cudaError_t e, const char* what, const char* file, int line) {
    if (e == cudaSuccess) return true;
    if (error_.ok()) static_cast<void>(error_ = cuda::cudaErrorToStatus(e, what, file, line));
    return false;
  }
  bool keep(Status s) {
    if (!s.ok() && error_.ok()) static_cast<void>(error_ = std::move(s));
    return error_.ok();
  }

  const int device_;
  std::unique_ptr<GpuGemm> gemm_;
  cudaStream_t stream_;
  Status error_;
  cuda::DeviceBuffer row_loss_, loss_;
  cuda::PinnedBuffer host_loss_;
};

}  // namespace

StatusOr<std::unique_ptr<TrainOps>> makeCudaTrainOps(int device) {
  ZPS_ASSIGN_OR_RETURN(std::unique_ptr<GpuGemm> gemm, makeCublasGemm(device));
  return std::unique_ptr<TrainOps>(std::make_unique<CudaTrainOps>(device, std::move(gemm)));
}

}  // namespace zps::kernels
