// The CUDA backend of kernels/train_ops.h against the CPU backend: every op on the shared scenario
// (tests/common/train_ops_scenario.h: exact data, so products, sums and ReLU must agree bit for
// bit), then whole models (mlp, ctr) forward and backward with parameters, activations and
// gradients in device memory, and a few optimizer steps, within float tolerance (cuBLAS and
// OpenBLAS round their dot products differently).
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/train_ops.h"
#include "tests/common/random_dataset.h"
#include "tests/common/train_ops_scenario.h"
#include "train/cpu_train_ops.h"
#include "train/model.h"

namespace zps::testing {
namespace {

std::unique_ptr<kernels::TrainOps> cudaOps() {
  auto made = kernels::makeCudaTrainOps(0);
  if (!made.ok()) FAIL(made.status().toString());
  return std::move(made).value();
}

bool exactOp(const std::string& name) {
  return name.find("loss") == std::string::npos && name.find("grad") == std::string::npos &&
         name.find("adam") == std::string::npos;
}

TEST_CASE("CUDA train ops match the CPU train ops on exact data", "[cuda][train]") {
  auto gpu = cudaOps();
  const auto want = runTrainOpsScenario(train::cpuTrainOps());
  const auto got = runTrainOpsScenario(*gpu);
  REQUIRE(gpu->status().ok());
  REQUIRE(got.size() == want.size());
  for (size_t r = 0; r < got.size(); ++r) {
    const auto& [name, values] = got[r];
    INFO(name);
    REQUIRE(name == want[r].first);
    REQUIRE(values.size() == want[r].second.size());
    for (size_t i = 0; i < values.size(); ++i) {
      INFO("element " << i);
      if (exactOp(name))
        CHECK(values[i] == want[r].second[i]);
      else
        CHECK(values[i] == Approx(want[r].second[i]).margin(1e-6).epsilon(1e-6));
    }
  }
}

void requireClose(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) {
    INFO(what << " element " << i);
    REQUIRE(gpu[i] == Approx(cpu[i]).margin(1e-5).epsilon(1e-4));
  }
}

// One model on both backends from the same host weights: loss, dense and embedding gradients,
// predictions, then three Adam steps on device memory against the same steps on the host.
void compareModel(const std::string& name, const train::Dataset& data, size_t dim) {
  CAPTURE(name);
  auto gpu = cudaOps();
  auto on_gpu = train::makeModel(name, data, {16, 8}, dim, gpu.get());
  auto on_cpu = train::makeModel(name, data, {16, 8}, dim, nullptr);
  REQUIRE(on_gpu.ok());
  REQUIRE(on_cpu.ok());
  train::Model& g = **on_gpu;
  train::Model& c = **on_cpu;
  const size_t np = c.numDenseParams();
  std::vector<float> params(np);
  c.initDense(params.data(), 3);
  kernels::TrainBuffer d_params(*gpu), d_grad(*gpu), d_state(*gpu);
  REQUIRE(d_params.reserve(np));
  REQUIRE(d_grad.reserve(np));
  REQUIRE(d_state.reserve(2 * np));
  gpu->upload(d_params.data(), params.data(), np);
  gpu->setZero(d_state.data(), 2 * np);
  std::vector<size_t> rows(data.rows);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
  std::vector<float> emb(data.rows * data.num_categorical * dim);
  for (size_t i = 0; i < emb.size(); ++i) emb[i] = 0.01f * static_cast<float>(i % 17);
  const float* e = dim ? emb.data() : nullptr;
  std::vector<float> cpu_state(2 * np, 0.0f), cpu_grad(np), gpu_grad(np);
  std::vector<float> cpu_emb_grad(emb.size()), gpu_emb_grad(emb.size());
  kernels::OptimizerConfig adam;
  adam.kind = kernels::OptimizerKind::kAdam;
  adam.lr = 0.01f;
  for (uint64_t step = 1; step <= 3; ++step) {
    const double cpu_loss = c.lossAndGrad(params.data(), data, rows.data(), rows.size(), e, cpu_grad.data(),
                                          dim ? cpu_emb_grad.data() : nullptr);
    const double gpu_loss = g.lossAndGrad(d_params.data(), data, rows.data(), rows.size(), e, d_grad.data(),
                                          dim ? gpu_emb_grad.data() : nullptr);
    REQUIRE(gpu->status().ok());
    CHECK(gpu_loss == Approx(cpu_loss).epsilon(1e-5));
    gpu->download(gpu_grad.data(), d_grad.data(), np);
    requireClose(gpu_grad, cpu_grad, "dense gradient");
    if (dim) requireClose(gpu_emb_grad, cpu_emb_grad, "embedding gradient");
    kernels::applyOptimizer(adam, params.data(), cpu_state.data(), cpu_grad.data(), np, step);
    gpu->applyOptimizer(adam, d_params.data(), d_state.data(), d_grad.data(), np, step);
  }
  std::vector<float> gpu_params(np);
  gpu->download(gpu_params.data(), d_params.data(), np);
  REQUIRE(gpu->status().ok());
  requireClose(gpu_params, params, "parameters after 3 steps");
  std::vector<float> cpu_out(data.rows * c.outputsPerRow()), gpu_out(cpu_out.size());
  double cpu_loss = 0, gpu_loss = 0;
  c.predict(params.data(), data, rows.data(), rows.size(), e, cpu_out.data(), &cpu_loss);
  g.predict(d_params.data(), data, rows.data(), rows.size(), e, gpu_out.data(), &gpu_loss);
  REQUIRE(gpu->status().ok());
  requireClose(gpu_out, cpu_out, "predictions");
  CHECK(gpu_loss == Approx(cpu_loss).epsilon(1e-5));
}

TEST_CASE("CUDA-resident models train like the CPU models", "[cuda][train]") {
  compareModel("mlp", randomData(40, 12, 0, 3, 5), 0);
  compareModel("ctr", randomData(40, 5, 3, 2, 5), 4);
}

}  // namespace
}  // namespace zps::testing
