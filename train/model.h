// Models for the built-in training programs, with forward and backward passes on a TrainOps backend
// (kernels/train_ops.h: the CPU with OpenBLAS by default, or a GPU with cuBLAS):
//   linear  y = w.x + b, squared-error loss (t - y)^2 per sample, so loss / n is the MSE
//   logreg  multinomial logistic regression: softmax cross-entropy over num_classes of x W + b
//   mlp     ReLU hidden layers, softmax cross-entropy over num_classes
//   ctr     concat(embedding rows of the categorical fields, numeric features) -> ReLU MLP ->
//           one logit, logistic loss (binary cross-entropy)
//
// Parameters live outside the model: all dense parameters form one flat float vector that the
// caller owns (and pushes, pulls and updates) in the backend's memory (device memory on a GPU; the
// gradient too); embedding rows are gathered by the caller (from the
// servers, or from a LocalEmbeddingTable) into a batch-shaped buffer. A model only holds its shape
// and scratch space.
//
// Layout of the dense vector: layer by layer, each layer's weights (in x out, row-major:
// W[i * out + o]) then its biases (out). The linear model is one such layer: w[0..features), b.
//
// A Model is owned by one training thread and called only from it (lossAndGrad and predict reuse
// scratch buffers). Results are deterministic: identical inputs give bit-identical outputs, because
// OpenBLAS runs on one thread (blas.h) and every other reduction runs in a fixed order (on a GPU too;
// cuBLAS and OpenBLAS round differently, so the two backends agree only to rounding). Backend errors
// are sticky in the backend's status(), which callers check after each step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/train_ops.h"
#include "train/dataset.h"
#include "zps/status.h"

namespace zps::train {

class Model {
 public:
  virtual ~Model() = default;

  // "linear 10-1", "mlp 64-128-10", "ctr 26x8+13-64-32-1"; for log lines.
  virtual std::string describe() const = 0;
  virtual size_t numDenseParams() const = 0;
  // Host memory (the caller uploads it). Deterministic from the seed: He initialisation for layers followed by a ReLU,
  // Glorot for the output layer, zero biases. The linear and logreg models start at all zeros (convex losses).
  virtual void initDense(float* params, uint64_t seed) const = 0;
  // Floats per embedding row (ctr); 0 for models without embeddings.
  virtual size_t embeddingDim() const { return 0; }
  // Checks that `data` fits this model (feature and field counts, task, label range). Call once
  // after loading: lossAndGrad and predict assume it.
  virtual Status checkData(const Dataset& data) const = 0;

  // Forward and backward over data rows rows[0..n). Overwrites grad_dense (numDenseParams() floats)
  // with the SUM over the n samples of d(loss)/d(params), not the mean: the caller divides by the
  // global batch, which is what makes data-parallel workers add up to one big batch. For ctr, `emb`
  // holds n x num_categorical x embeddingDim() floats (row i's field f at (i * fields + f) * dim)
  // and grad_emb receives d(loss sum)/d(emb) in the same layout; both are nullptr for the other
  // models; emb and grad_emb are host memory. Returns the summed loss of the n samples.
  virtual double lossAndGrad(const float* params, const Dataset& data, const size_t* rows, size_t n, const float* emb,
                             float* grad_dense, float* grad_emb) = 0;

  // Outputs per row of predict: 1 for linear (the value), num_classes for mlp (probabilities), 1
  // for ctr (P(click)).
  virtual size_t outputsPerRow() const = 0;
  // n x outputsPerRow() outputs into host `out`. `emb` as in lossAndGrad. If loss_sum is not null, it
  // receives the summed loss of the n samples (what lossAndGrad would return).
  virtual void predict(const float* params, const Dataset& data, const size_t* rows, size_t n, const float* emb,
                       float* out, double* loss_sum = nullptr) = 0;
};

// `ops` is the backend (it must outlive the model); nullptr is the CPU (cpu_train_ops.h).
std::unique_ptr<Model> makeLinear(size_t features, kernels::TrainOps* ops = nullptr);
std::unique_ptr<Model> makeMlp(size_t features, std::vector<size_t> hidden, int classes,
                               kernels::TrainOps* ops = nullptr);
std::unique_ptr<Model> makeLogreg(size_t features, int classes, kernels::TrainOps* ops = nullptr);
std::unique_ptr<Model> makeCtr(size_t numeric, size_t fields, size_t dim, std::vector<size_t> hidden,
                               kernels::TrainOps* ops = nullptr);

// Builds the named model ("linear", "logreg", "mlp" or "ctr") for a dataset's shape, or says why it cannot:
// an unknown name (listing the valid ones), linear on classification data, logreg or mlp on
// regression data,
// ctr on data without categorical fields or with more than two classes. `hidden` is ignored by
// linear and logreg; `embedding_dim` is used only by ctr.
StatusOr<std::unique_ptr<Model>> makeModel(const std::string& name, const Dataset& data,
                                           const std::vector<size_t>& hidden, size_t embedding_dim,
                                           kernels::TrainOps* ops = nullptr);

}  // namespace zps::train
