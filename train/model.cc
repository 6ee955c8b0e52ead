#include "train/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/train_math.h"
#include "train/cpu_train_ops.h"
#include "train/random.h"

namespace zps::train {
namespace {

using kernels::LossHead;
using kernels::TrainBuffer;
using kernels::TrainOps;
namespace math = kernels::train_math;

std::string joinSizes(const std::vector<size_t>& sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "-" : "") + std::to_string(sizes[i]);
  return s;
}

// A stack of fully connected layers (ReLU between them) with a loss head on top, over an input
// matrix the owning model assembles. It is the engine of all three models; each model only decides
// what the input rows are. Owned by one Model, used by its thread only.
class DenseNet {
 public:
  DenseNet(TrainOps& ops, size_t input, const std::vector<size_t>& hidden, size_t output, LossHead head)
      : ops_(ops), head_(head), delta_(ops), prev_delta_(ops) {
    widths_.push_back(input);
    widths_.insert(widths_.end(), hidden.begin(), hidden.end());
    widths_.push_back(output);
    size_t offset = 0;
    for (size_t l = 0; l + 1 < widths_.size(); ++l) {
      weight_offset_.push_back(offset);
      offset += widths_[l] * widths_[l + 1];
      bias_offset_.push_back(offset);
      offset += widths_[l + 1];
    }
    num_params_ = offset;
    for (size_t l = 0; l < numLayers(); ++l) acts_.emplace_back(ops);
  }

  size_t numLayers() const { return widths_.size() - 1; }
  size_t numParams() const { return num_params_; }
  size_t inputWidth() const { return widths_.front(); }
  size_t outputWidth() const { return widths_.back(); }
  const std::vector<size_t>& widths() const { return widths_; }
  TrainOps& ops() const { return ops_; }

  // Host memory: initial weights are made on the host and uploaded by their owner.
  void init(float* params, uint64_t seed, bool zeros) const {
    std::fill(params, params + num_params_, 0.0f);
    if (zeros) return;
    Rng rng(mixSeeds(seed, 0x1417));
    for (size_t l = 0; l < numLayers(); ++l) {
      const size_t in = widths_[l], out = widths_[l + 1];
      // He for layers feeding a ReLU keeps activations from shrinking layer by layer; Glorot for
      // the output layer keeps the first logits of order one, so early steps are not saturated.
      const bool last = l + 1 == numLayers();
      const double sd =
          last ? std::sqrt(2.0 / static_cast<double>(in + out)) : std::sqrt(2.0 / static_cast<double>(in));
      float* w = params + weight_offset_[l];
      for (size_t i = 0; i < in * out; ++i) w[i] = static_cast<float>(sd * rng.normal());
    }
  }

  // Forward over the n x inputWidth() matrix x (backend memory); the last layer's pre-head outputs
  // (logits or values) end up in logits().
  void forward(const float* params, const float* x, size_t n) {
    const float* in = x;
    for (size_t l = 0; l < numLayers(); ++l) {
      const size_t wi = widths_[l], wo = widths_[l + 1];
      float* out = acts_[l].reserve(n * wo);
      if (out == nullptr) return;  // the ops recorded why
      ops_.fillRows(out, params + bias_offset_[l], n, wo);
      ops_.gemm(false, false, n, wo, wi, 1.0f, in, wi, params + weight_offset_[l], wo, 1.0f, out, wo);
      if (l + 1 < numLayers()) ops_.relu(out, n * wo);
      in = out;
    }
  }
  const float* logits() const { return acts_.back().data(); }

  // Forward + backward on backend memory. Overwrites grad (numParams()) with the summed gradient
  // and, if dx is not null, writes d(loss sum)/d(x) (n x inputWidth()). Returns the summed loss.
  double lossAndGrad(const float* params, const float* x, size_t n, const float* labels, float* grad, float* dx) {
    if (n == 0) {
      ops_.setZero(grad, num_params_);
      return 0.0;
    }
    forward(params, x, n);
    const size_t c = outputWidth();
    if (delta_.reserve(n * c) == nullptr || !ops_.status().ok()) return 0.0;
    const double loss = ops_.headLossGrad(head_, logits(), labels, n, c, delta_.data());

    for (size_t l = numLayers(); l-- > 0;) {
      const size_t wi = widths_[l], wo = widths_[l + 1];
      const float* in = l == 0 ? x : acts_[l - 1].data();
      ops_.gemm(true, false, wi, wo, n, 1.0f, in, wi, delta_.data(), wo, 0.0f, grad + weight_offset_[l], wo);
      ops_.columnSums(delta_.data(), n, wo, grad + bias_offset_[l]);
      if (l == 0 && dx == nullptr) break;
      float* prev = l > 0 ? prev_delta_.reserve(n * wi) : dx;
      if (prev == nullptr) return 0.0;
      ops_.gemm(false, true, n, wi, wo, 1.0f, delta_.data(), wo, params + weight_offset_[l], wo, 0.0f, prev, wi);
      if (l == 0) break;
      ops_.reluBackward(prev, acts_[l - 1].data(), n * wi);
      std::swap(delta_, prev_delta_);
    }
    return loss;
  }

  // Forward on the backend; the heads' outputs (into host `out`) and losses (against host
  // `labels`) on the host, from the logits brought back.
  void predict(const float* params, const float* x, size_t n, const float* labels, float* out, double* loss_sum) {
    const size_t c = outputWidth();
    const size_t per_row = head_ == LossHead::kLogistic ? 1 : c;
    double loss = 0;
    if (n > 0) {
      forward(params, x, n);
      host_logits_.resize(n * c);
      if (ops_.status().ok()) ops_.download(host_logits_.data(), logits(), n * c);
    }
    for (size_t i = 0; i < n; ++i) {
      const float* z = host_logits_.data() + i * c;
      math::headOutput(head_, z, c, out + i * per_row);
      if (loss_sum) loss += math::headLoss(head_, z, c, labels[i], nullptr);
    }
    if (loss_sum) *loss_sum = loss;
  }

 private:
  TrainOps& ops_;
  LossHead head_;
  std::vector<size_t> widths_;
  std::vector<size_t> weight_offset_, bias_offset_;
  size_t num_params_ = 0;
  // acts_[l]: the output of layer l (after the ReLU, except for the last layer).
  std::vector<TrainBuffer> acts_;
  TrainBuffer delta_, prev_delta_;
  std::vector<float> host_logits_;
};

// A batch's input matrix and labels: assembled on the host in staging memory (pinned on a GPU,
// reused from step to step), then sent to the backend with one copy, labels right after the rows.
// The next batch reuses the staging memory only after the net has waited on the backend (its head
// or its predict does), so an upload in flight is never overwritten.
class BatchInput {
 public:
  explicit BatchInput(TrainOps& ops) : ops_(ops), staging_(ops, TrainBuffer::kStaging), backend_(ops) {}

  // The n x width host rows to fill, or nullptr when the staging memory cannot be had. The labels
  // of `rows` are gathered already.
  float* hostRows(const Dataset& data, const size_t* rows, size_t n, size_t width) {
    n_ = n;
    width_ = width;
    float* x = staging_.reserve(n * width + n);
    if (x == nullptr) return nullptr;
    for (size_t i = 0; i < n; ++i) x[n * width + i] = data.labels[rows[i]];
    return x;
  }
  // Sends the filled rows and labels to the backend; false when that memory cannot be had.
  bool upload() {
    const size_t floats = n_ * width_ + n_;
    if (backend_.reserve(floats) == nullptr) return false;
    ops_.upload(backend_.data(), staging_.data(), floats);
    return true;
  }
  const float* x() const { return backend_.data(); }
  const float* labels() const { return backend_.data() + n_ * width_; }
  const float* hostLabels() const { return staging_.data() + n_ * width_; }

 private:
  TrainOps& ops_;
  TrainBuffer staging_, backend_;
  size_t n_ = 0, width_ = 0;
};

Status checkArrays(const Dataset& data) {
  if (data.numeric.size() != data.rows * data.num_numeric ||
      data.categorical.size() != data.rows * data.num_categorical || data.labels.size() != data.rows) {
    return InvalidArgument("dataset '" + data.name + "' has inconsistent array sizes");
  }
  return Status::OK();
}

Status checkClassLabels(const Dataset& data, int classes) {
  for (size_t r = 0; r < data.rows; ++r) {
    const float l = data.labels[r];
    if (!(l >= 0 && l < classes && l == std::floor(l))) {
      return InvalidArgument("dataset '" + data.name + "' row " + std::to_string(r) + ": label " + std::to_string(l) +
                             " is not a class in [0, " + std::to_string(classes) + ")");
    }
  }
  return Status::OK();
}

// Models over the numeric features alone: linear (squared head), logreg and mlp (softmax head).
// linear and logreg have convex losses and start at zero (`zero_init`).
class NumericModel : public Model {
 public:
  NumericModel(TrainOps& ops, std::string kind, size_t features, const std::vector<size_t>& hidden, size_t outputs,
               LossHead head, bool zero_init)
      : kind_(std::move(kind)),
        head_(head),
        zero_init_(zero_init),
        net_(ops, features, hidden, outputs, head),
        input_(ops) {}

  std::string describe() const override { return kind_ + " " + joinSizes(net_.widths()); }
  size_t numDenseParams() const override { return net_.numParams(); }
  void initDense(float* params, uint64_t seed) const override { net_.init(params, seed, zero_init_); }
  size_t outputsPerRow() const override { return net_.outputWidth(); }

  Status checkData(const Dataset& data) const override {
    ZPS_RETURN_IF_ERROR(checkArrays(data));
    if (data.num_numeric != net_.inputWidth()) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_numeric) +
                             " features, model " + describe() + " expects " + std::to_string(net_.inputWidth()));
    }
    if (head_ == LossHead::kSquared) {
      if (!data.isRegression()) {
        return InvalidArgument("model " + describe() + " does regression, but dataset '" + data.name + "' has " +
                               std::to_string(data.num_classes) + " classes");
      }
      return Status::OK();
    }
    if (data.num_classes != static_cast<int>(net_.outputWidth())) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_classes) +
                             " classes, model " + describe() + " expects " + std::to_string(net_.outputWidth()));
    }
    return checkClassLabels(data, data.num_classes);
  }

  double lossAndGrad(const float* params, const Dataset& data, const size_t* rows, size_t n, const float*,
                     float* grad_dense, float*) override {
    if (!gather(data, rows, n)) return 0.0;
    return net_.lossAndGrad(params, input_.x(), n, input_.labels(), grad_dense, nullptr);
  }

  void predict(const float* params, const Dataset& data, const size_t* rows, size_t n, const float*, float* out,
               double* loss_sum) override {
    if (!gather(data, rows, n)) return;
    net_.predict(params, input_.x(), n, input_.hostLabels(), out, loss_sum);
  }

 private:
  bool gather(const Dataset& data, const size_t* rows, size_t n) {
    const size_t f = data.num_numeric;
    float* x = input_.hostRows(data, rows, n, f);
    if (x == nullptr) return false;
    for (size_t i = 0; i < n; ++i) std::memcpy(x + i * f, data.numericRow(rows[i]), f * sizeof(float));
    return input_.upload();
  }

  std::string kind_;
  LossHead head_;
  bool zero_init_;
  DenseNet net_;
  BatchInput input_;
};

// The CTR model: each row's input is its fields' embedding rows, then its numeric features.
class CtrModel : public Model {
 public:
  CtrModel(TrainOps& ops, size_t numeric, size_t fields, size_t dim, const std::vector<size_t>& hidden)
      : numeric_(numeric),
        fields_(fields),
        dim_(dim),
        net_(ops, fields * dim + numeric, hidden, 1, LossHead::kLogistic),
        hidden_(hidden),
        input_(ops),
        dx_(ops) {}

  std::string describe() const override {
    std::vector<size_t> rest = hidden_;
    rest.push_back(1);
    return "ctr " + std::to_string(fields_) + "x" + std::to_string(dim_) + "+" + std::to_string(numeric_) + "-" +
           joinSizes(rest);
  }
  size_t numDenseParams() const override { return net_.numParams(); }
  void initDense(float* params, uint64_t seed) const override { net_.init(params, seed, false); }
  size_t embeddingDim() const override { return dim_; }
  size_t outputsPerRow() const override { return 1; }

  Status checkData(const Dataset& data) const override {
    ZPS_RETURN_IF_ERROR(checkArrays(data));
    if (data.num_numeric != numeric_ || data.num_categorical != fields_) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_numeric) + " numeric and " +
                             std::to_string(data.num_categorical) + " categorical fields, model " + describe() +
                             " expects " + std::to_string(numeric_) + " and " + std::to_string(fields_));
    }
    if (data.num_classes != 2) {
      return InvalidArgument(
          "model " + describe() + " needs 0/1 labels, but dataset '" + data.name + "' has " +
          (data.isRegression() ? std::string("regression targets") : std::to_string(data.num_classes) + " classes"));
    }
    return checkClassLabels(data, 2);
  }

  double lossAndGrad(const float* params, const Dataset& data, const size_t* rows, size_t n, const float* emb,
                     float* grad_dense, float* grad_emb) override {
    if (!gather(data, rows, n, emb)) return 0.0;
    const size_t in = net_.inputWidth();
    if (grad_emb == nullptr) {
      return net_.lossAndGrad(params, input_.x(), n, input_.labels(), grad_dense, nullptr);
    }
    if (dx_.reserve(n * in) == nullptr) return 0.0;
    const double loss = net_.lossAndGrad(params, input_.x(), n, input_.labels(), grad_dense, dx_.data());
    // The embedding gradients go to the servers from the host.
    host_dx_.resize(n * in);
    net_.ops().download(host_dx_.data(), dx_.data(), n * in);
    const size_t e = fields_ * dim_;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(grad_emb + i * e, host_dx_.data() + i * in, e * sizeof(float));
    }
    return loss;
  }

  void predict(const float* params, const Dataset& data, const size_t* rows, size_t n, const float* emb, float* out,
               double* loss_sum) override {
    if (!gather(data, rows, n, emb)) return;
    net_.predict(params, input_.x(), n, input_.hostLabels(), out, loss_sum);
  }

 private:
  bool gather(const Dataset& data, const size_t* rows, size_t n, const float* emb) {
    const size_t e = fields_ * dim_;
    const size_t in = net_.inputWidth();
    float* x = input_.hostRows(data, rows, n, in);
    if (x == nullptr) return false;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(x + i * in, emb + i * e, e * sizeof(float));
      std::memcpy(x + i * in + e, data.numericRow(rows[i]), numeric_ * sizeof(float));
    }
    return input_.upload();
  }

  size_t numeric_, fields_, dim_;
  DenseNet net_;
  std::vector<size_t> hidden_;
  BatchInput input_;
  TrainBuffer dx_;
  std::vector<float> host_dx_;
};

TrainOps& opsOrCpu(TrainOps* ops) { return ops ? *ops : cpuTrainOps(); }

}  // namespace

std::unique_ptr<Model> makeLinear(size_t features, TrainOps* ops) {
  return std::make_unique<NumericModel>(opsOrCpu(ops), "linear", features, std::vector<size_t>{}, 1, LossHead::kSquared,
                                        true);
}

std::unique_ptr<Model> makeMlp(size_t features, std::vector<size_t> hidden, int classes, TrainOps* ops) {
  return std::make_unique<NumericModel>(opsOrCpu(ops), "mlp", features, hidden, static_cast<size_t>(classes),
                                        LossHead::kSoftmax, false);
}

std::unique_ptr<Model> makeLogreg(size_t features, int classes, TrainOps* ops) {
  return std::make_unique<NumericModel>(opsOrCpu(ops), "logreg", features, std::vector<size_t>{},
                                        static_cast<size_t>(classes), LossHead::kSoftmax, true);
}

std::unique_ptr<Model> makeCtr(size_t numeric, size_t fields, size_t dim, std::vector<size_t> hidden, TrainOps* ops) {
  return std::make_unique<CtrModel>(opsOrCpu(ops), numeric, fields, dim, hidden);
}

StatusOr<std::unique_ptr<Model>> makeModel(const std::string& name, const Dataset& data,
                                           const std::vector<size_t>& hidden, size_t embedding_dim, TrainOps* ops) {
  for (size_t h : hidden) {
    if (h == 0) return InvalidArgument("hidden layer sizes must be positive");
  }
  std::unique_ptr<Model> model;
  if (name == "linear") {
    if (!data.isRegression()) {
      return InvalidArgument("model 'linear' does regression, but dataset '" + data.name + "' has " +
                             std::to_string(data.num_classes) + " classes (use logreg, mlp or ctr)");
    }
    model = makeLinear(data.num_numeric, ops);
  } else if (name == "mlp" || name == "logreg") {
    if (data.isRegression()) {
      return InvalidArgument("model '" + name + "' does classification, but dataset '" + data.name +
                             "' has regression targets (use linear)");
    }
    if (data.num_categorical > 0) {
      return InvalidArgument("dataset '" + data.name + "' has categorical fields, which " + name +
                             " cannot read (use ctr)");
    }
    model = name == "mlp" ? makeMlp(data.num_numeric, hidden, data.num_classes, ops)
                          : makeLogreg(data.num_numeric, data.num_classes, ops);
  } else if (name == "ctr") {
    if (data.num_categorical == 0) {
      return InvalidArgument("model 'ctr' needs categorical fields, and dataset '" + data.name +
                             "' has none (use mlp or linear)");
    }
    if (embedding_dim == 0) return InvalidArgument("model 'ctr' needs an embedding dimension >= 1");
    model = makeCtr(data.num_numeric, data.num_categorical, embedding_dim, hidden, ops);
  } else {
    return InvalidArgument("unknown model '" + name + "' (valid: linear, logreg, mlp, ctr)");
  }
  ZPS_RETURN_IF_ERROR(model->checkData(data));
  return model;
}

}  // namespace zps::train
