// CUDA optimizer kernels against kernels/optimizer.cc. The kernels use the CPU loop's operations
// without FMA contraction, so they should agree bit for bit; the test requires agreement within a
// tight relative tolerance (the contract) and reports how many elements were bit-identical.
#include "kernels/cuda_optimizer.h"
#include "kernels/cuda_reducer.h"
#include "kernels/reducer.h"

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/optimizer.h"

namespace zps::kernels {
namespace {

struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& host) : n(host.size()) {
    REQUIRE(cudaMalloc(&ptr, (n == 0 ? 1 : n) * sizeof(float)) == cudaSuccess);
    if (n > 0) REQUIRE(cudaMemcpy(ptr, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(ptr); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> read() const {
    std::vector<float> out(n);
    if (n > 0) REQUIRE(cudaMemcpy(out.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
  float* get() { return static_cast<float*>(ptr); }
  void* ptr = nullptr;
  size_t n;
};

std::vector<float> randomFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Relative difference with a floor, so values near zero compare absolutely.
void requireClose(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  REQUIRE(gpu.size() == cpu.size());
  size_t identical = 0, bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (std::memcmp(&gpu[i], &cpu[i], sizeof(float)) == 0) {
      ++identical;
      continue;
    }
    const float diff = std::fabs(gpu[i] - cpu[i]);
    if (!(diff <= 1e-6f * std::max(1.0f, std::fabs(cpu[i])))) {
      if (bad++ < 3) FAIL_CHECK(what << " element " << i << ": gpu " << gpu[i] << ", cpu " << cpu[i]);
    }
  }
  WARN(what << ": " << identical << " of " << gpu.size() << " elements bit-identical to the CPU");
  REQUIRE(bad == 0);
}

void compare(OptimizerKind kind, size_t n) {
  OptimizerConfig config;
  config.kind = kind;
  config.lr = 0.05f;
  CAPTURE(optimizerName(kind), n);
  REQUIRE(validateOptimizerConfig(config).ok());
  const size_t state_floats = optimizerStateFloats(kind) * n;
  std::vector<float> params = randomFloats(n, 1, 1.0f);
  std::vector<float> state(state_floats);
  initOptimizerState(config, state.data(), n);
  DeviceFloats d_params(params);
  DeviceFloats d_state(state);
  // Several steps, so state carries over and Adam's bias correction changes with the step.
  for (uint64_t step = 1; step <= 5; ++step) {
    const std::vector<float> grad = randomFloats(n, 100 + static_cast<uint32_t>(step), 0.5f);
    DeviceFloats d_grad(grad);
    applyOptimizer(config, params.data(), state.data(), grad.data(), n, step);
    const Status s = cudaApplyOptimizer(config, d_params.get(), state_floats ? d_state.get() : nullptr, d_grad.get(), n,
                                        step, nullptr);
    REQUIRE(s.ok());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  requireClose(d_params.read(), params, "params");
  if (state_floats > 0) requireClose(d_state.read(), state, "state");
}

TEST_CASE("CUDA optimizers match the CPU optimizers", "[cuda]") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam, OptimizerKind::kAdagrad}) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) compare(kind, n);
  }
}

TEST_CASE("CUDA engine applies param-mode row batches like the CPU", "[cuda]") {
  // A table of 50 rows; each batch updates 20 rows in scrambled slot order with per-row step
  // counts (Adam's corrections differ by row), and the untouched rows must stay as they were.
  auto made = makeCudaReducer(0);
  REQUIRE(made.ok());
  Reducer& engine = **made;
  constexpr uint32_t kDim = 33;
  constexpr size_t kRows = 50;
  for (const OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam, OptimizerKind::kAdagrad}) {
    OptimizerConfig config;
    config.kind = kind;
    config.lr = 0.05f;
    CAPTURE(optimizerName(kind));
    const size_t state_floats = optimizerStateFloats(kind) * kDim;
    std::vector<float> cpu_values = randomFloats(kRows * kDim, 7, 1.0f);
    std::vector<float> cpu_state(kRows * state_floats);
    for (size_t r = 0; r < kRows; ++r) initOptimizerState(config, cpu_state.data() + r * state_floats, kDim);
    std::vector<float> gpu_values = cpu_values, gpu_state = cpu_state;
    std::vector<uint64_t> steps(kRows, 0);
    for (uint32_t batch = 0; batch < 4; ++batch) {
      std::vector<uint32_t> slots;
      std::vector<uint64_t> batch_steps;
      for (uint32_t i = 0; i < 20; ++i) {
        const uint32_t slot = (i * 7 + batch * 3) % kRows;
        slots.push_back(slot);
        batch_steps.push_back(++steps[slot]);
      }
      const std::vector<float> grads = randomFloats(slots.size() * kDim, 200 + batch, 0.5f);
      applyOptimizerRows(config, kDim, slots.size(), slots.data(), batch_steps.data(), grads.data(), cpu_values.data(),
                         cpu_state.data());
      REQUIRE(engine
                  .applyRows(config, kDim, slots.size(), slots.data(), batch_steps.data(), grads.data(),
                             gpu_values.data(), gpu_state.data())
                  .ok());
    }
    requireClose(gpu_values, cpu_values, "row values");
    if (state_floats > 0) requireClose(gpu_state, cpu_state, "row state");
  }
}

TEST_CASE("CUDA optimizer refuses stateful rules without state", "[cuda]") {
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdam;
  DeviceFloats params(std::vector<float>(4, 1.0f));
  const Status s = cudaApplyOptimizer(config, params.get(), nullptr, params.get(), 4, 1, nullptr);
  CHECK(s.code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zps::kernels
