#include "worker/train/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "worker/train/blas.h"
#include "worker/train/random.h"

namespace zps::train {
namespace {

enum class Head { kSquared, kSoftmax, kLogistic };

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
  DenseNet(size_t input, const std::vector<size_t>& hidden, size_t output, Head head)
      : head_(head) {
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
    acts_.resize(numLayers());
  }

  size_t numLayers() const { return widths_.size() - 1; }
  size_t numParams() const { return num_params_; }
  size_t inputWidth() const { return widths_.front(); }
  size_t outputWidth() const { return widths_.back(); }
  const std::vector<size_t>& widths() const { return widths_; }

  void init(float* params, uint64_t seed, bool zeros) const {
    std::fill(params, params + num_params_, 0.0f);
    if (zeros) return;
    Rng rng(mixSeeds(seed, 0x1417));
    for (size_t l = 0; l < numLayers(); ++l) {
      const size_t in = widths_[l], out = widths_[l + 1];
      // He for layers feeding a ReLU keeps activations from shrinking layer by layer; Glorot for
      // the output layer keeps the first logits of order one, so early steps are not saturated.
      const bool last = l + 1 == numLayers();
      const double sd = last ? std::sqrt(2.0 / static_cast<double>(in + out))
                             : std::sqrt(2.0 / static_cast<double>(in));
      float* w = params + weight_offset_[l];
      for (size_t i = 0; i < in * out; ++i) w[i] = static_cast<float>(sd * rng.normal());
    }
  }

  // Forward over the n x inputWidth() matrix x; the last layer's pre-head outputs (logits or
  // values) end up in logits().
  void forward(const float* params, const float* x, size_t n) {
    const float* in = x;
    for (size_t l = 0; l < numLayers(); ++l) {
      const size_t wi = widths_[l], wo = widths_[l + 1];
      std::vector<float>& out = acts_[l];
      out.resize(n * wo);
      const float* bias = params + bias_offset_[l];
      for (size_t i = 0; i < n; ++i) std::memcpy(out.data() + i * wo, bias, wo * sizeof(float));
      gemm(false, false, n, wo, wi, 1.0f, in, wi, params + weight_offset_[l], wo, 1.0f, out.data(),
           wo);
      if (l + 1 < numLayers()) {
        for (float& v : out) v = v > 0.0f ? v : 0.0f;
      }
      in = out.data();
    }
  }
  const float* logits() const { return acts_.back().data(); }

  // The loss of row i's logits against its label, and (if grad is not null) d(loss)/d(logits).
  double headLoss(const float* z, float label, float* grad) const {
    const size_t c = outputWidth();
    switch (head_) {
      case Head::kSquared: {
        const double d = static_cast<double>(z[0]) - label;
        if (grad) grad[0] = static_cast<float>(2.0 * d);
        return d * d;
      }
      case Head::kSoftmax: {
        const size_t t = static_cast<size_t>(label);
        double m = z[0];
        for (size_t k = 1; k < c; ++k) m = std::max(m, static_cast<double>(z[k]));
        double s = 0;
        for (size_t k = 0; k < c; ++k) s += std::exp(z[k] - m);
        const double lse = m + std::log(s);
        if (grad) {
          for (size_t k = 0; k < c; ++k) {
            grad[k] = static_cast<float>(std::exp(z[k] - lse) - (k == t ? 1.0 : 0.0));
          }
        }
        return lse - z[t];
      }
      case Head::kLogistic: {
        const double v = z[0];
        if (grad) grad[0] = static_cast<float>(sigmoid(v) - label);
        // softplus(v) - t * v, written so that exp never overflows.
        return std::max(v, 0.0) - label * v + std::log1p(std::exp(-std::fabs(v)));
      }
    }
    return 0;
  }

  // The head's outputs for row i: the value, the class probabilities, or P(1).
  void headOutput(const float* z, float* out) const {
    const size_t c = outputWidth();
    switch (head_) {
      case Head::kSquared: out[0] = z[0]; return;
      case Head::kSoftmax: {
        double m = z[0];
        for (size_t k = 1; k < c; ++k) m = std::max(m, static_cast<double>(z[k]));
        double s = 0;
        for (size_t k = 0; k < c; ++k) s += std::exp(z[k] - m);
        for (size_t k = 0; k < c; ++k) out[k] = static_cast<float>(std::exp(z[k] - m) / s);
        return;
      }
      case Head::kLogistic: out[0] = static_cast<float>(sigmoid(z[0])); return;
    }
  }

  // Forward + backward. Overwrites grad (numParams()) with the summed gradient and, if dx is not
  // null, writes d(loss sum)/d(x) (n x inputWidth()). Returns the summed loss.
  double lossAndGrad(const float* params, const float* x, size_t n, const float* labels,
                     float* grad, float* dx) {
    if (n == 0) {
      std::fill(grad, grad + num_params_, 0.0f);
      return 0.0;
    }
    forward(params, x, n);
    const size_t c = outputWidth();
    delta_.resize(n * c);
    double loss = 0;
    for (size_t i = 0; i < n; ++i) {
      loss += headLoss(logits() + i * c, labels[i], delta_.data() + i * c);
    }

    for (size_t l = numLayers(); l-- > 0;) {
      const size_t wi = widths_[l], wo = widths_[l + 1];
      const float* in = l == 0 ? x : acts_[l - 1].data();
      gemm(true, false, wi, wo, n, 1.0f, in, wi, delta_.data(), wo, 0.0f, grad + weight_offset_[l],
           wo);
      float* gb = grad + bias_offset_[l];
      std::fill(gb, gb + wo, 0.0f);
      for (size_t i = 0; i < n; ++i) {
        const float* d = delta_.data() + i * wo;
        for (size_t o = 0; o < wo; ++o) gb[o] += d[o];
      }
      if (l == 0 && dx == nullptr) break;
      float* prev = dx;
      if (l > 0) {
        prev_delta_.resize(n * wi);
        prev = prev_delta_.data();
      }
      gemm(false, true, n, wi, wo, 1.0f, delta_.data(), wo, params + weight_offset_[l], wo, 0.0f,
           prev, wi);
      if (l == 0) break;
      // ReLU passes the gradient where its output was positive.
      const float* a = acts_[l - 1].data();
      for (size_t i = 0; i < n * wi; ++i) {
        if (!(a[i] > 0.0f)) prev[i] = 0.0f;
      }
      std::swap(delta_, prev_delta_);
    }
    return loss;
  }

  void predict(const float* params, const float* x, size_t n, const float* labels, float* out,
               double* loss_sum) {
    const size_t c = outputWidth();
    const size_t per_row = head_ == Head::kLogistic ? 1 : c;
    double loss = 0;
    if (n > 0) forward(params, x, n);
    for (size_t i = 0; i < n; ++i) {
      headOutput(logits() + i * c, out + i * per_row);
      if (loss_sum) loss += headLoss(logits() + i * c, labels[i], nullptr);
    }
    if (loss_sum) *loss_sum = loss;
  }

 private:
  static double sigmoid(double v) {
    if (v >= 0) return 1.0 / (1.0 + std::exp(-v));
    const double e = std::exp(v);
    return e / (1.0 + e);
  }

  Head head_;
  std::vector<size_t> widths_;
  std::vector<size_t> weight_offset_, bias_offset_;
  size_t num_params_ = 0;
  // acts_[l]: the output of layer l (after the ReLU, except for the last layer).
  std::vector<std::vector<float>> acts_;
  std::vector<float> delta_, prev_delta_;
};

// The labels of the batch rows, gathered once so the net sees a contiguous array.
void gatherLabels(const Dataset& data, const size_t* rows, size_t n, std::vector<float>* out) {
  out->resize(n);
  for (size_t i = 0; i < n; ++i) (*out)[i] = data.labels[rows[i]];
}

Status checkArrays(const Dataset& data) {
  if (data.numeric.size() != data.rows * data.num_numeric ||
      data.categorical.size() != data.rows * data.num_categorical ||
      data.labels.size() != data.rows) {
    return InvalidArgument("dataset '" + data.name + "' has inconsistent array sizes");
  }
  return Status::OK();
}

Status checkClassLabels(const Dataset& data, int classes) {
  for (size_t r = 0; r < data.rows; ++r) {
    const float l = data.labels[r];
    if (!(l >= 0 && l < classes && l == std::floor(l))) {
      return InvalidArgument("dataset '" + data.name + "' row " + std::to_string(r) + ": label " +
                             std::to_string(l) + " is not a class in [0, " +
                             std::to_string(classes) + ")");
    }
  }
  return Status::OK();
}

// Models over the numeric features alone: linear (squared head) and mlp (softmax head).
class NumericModel : public Model {
 public:
  NumericModel(std::string kind, size_t features, const std::vector<size_t>& hidden, size_t outputs,
               Head head)
      : kind_(std::move(kind)), head_(head), net_(features, hidden, outputs, head) {}

  std::string describe() const override { return kind_ + " " + joinSizes(net_.widths()); }
  size_t numDenseParams() const override { return net_.numParams(); }
  void initDense(float* params, uint64_t seed) const override {
    net_.init(params, seed, head_ == Head::kSquared);
  }
  size_t outputsPerRow() const override { return net_.outputWidth(); }

  Status checkData(const Dataset& data) const override {
    ZPS_RETURN_IF_ERROR(checkArrays(data));
    if (data.num_numeric != net_.inputWidth()) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_numeric) +
                             " features, model " + describe() + " expects " +
                             std::to_string(net_.inputWidth()));
    }
    if (head_ == Head::kSquared) {
      if (!data.isRegression()) {
        return InvalidArgument("model " + describe() + " does regression, but dataset '" +
                               data.name + "' has " + std::to_string(data.num_classes) +
                               " classes");
      }
      return Status::OK();
    }
    if (data.num_classes != static_cast<int>(net_.outputWidth())) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_classes) +
                             " classes, model " + describe() + " expects " +
                             std::to_string(net_.outputWidth()));
    }
    return checkClassLabels(data, data.num_classes);
  }

  double lossAndGrad(const float* params, const Dataset& data, const size_t* rows, size_t n,
                     const float*, float* grad_dense, float*) override {
    gather(data, rows, n);
    return net_.lossAndGrad(params, x_.data(), n, labels_.data(), grad_dense, nullptr);
  }

  void predict(const float* params, const Dataset& data, const size_t* rows, size_t n, const float*,
               float* out, double* loss_sum) override {
    gather(data, rows, n);
    net_.predict(params, x_.data(), n, labels_.data(), out, loss_sum);
  }

 private:
  void gather(const Dataset& data, const size_t* rows, size_t n) {
    const size_t f = data.num_numeric;
    x_.resize(n * f);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(x_.data() + i * f, data.numericRow(rows[i]), f * sizeof(float));
    }
    gatherLabels(data, rows, n, &labels_);
  }

  std::string kind_;
  Head head_;
  DenseNet net_;
  std::vector<float> x_, labels_;
};

// The CTR model: each row's input is its fields' embedding rows, then its numeric features.
class CtrModel : public Model {
 public:
  CtrModel(size_t numeric, size_t fields, size_t dim, const std::vector<size_t>& hidden)
      : numeric_(numeric),
        fields_(fields),
        dim_(dim),
        net_(fields * dim + numeric, hidden, 1, Head::kLogistic),
        hidden_(hidden) {}

  std::string describe() const override {
    std::vector<size_t> rest = hidden_;
    rest.push_back(1);
    return "ctr " + std::to_string(fields_) + "x" + std::to_string(dim_) + "+" +
           std::to_string(numeric_) + "-" + joinSizes(rest);
  }
  size_t numDenseParams() const override { return net_.numParams(); }
  void initDense(float* params, uint64_t seed) const override { net_.init(params, seed, false); }
  size_t embeddingDim() const override { return dim_; }
  size_t outputsPerRow() const override { return 1; }

  Status checkData(const Dataset& data) const override {
    ZPS_RETURN_IF_ERROR(checkArrays(data));
    if (data.num_numeric != numeric_ || data.num_categorical != fields_) {
      return InvalidArgument("dataset '" + data.name + "' has " + std::to_string(data.num_numeric) +
                             " numeric and " + std::to_string(data.num_categorical) +
                             " categorical fields, model " + describe() + " expects " +
                             std::to_string(numeric_) + " and " + std::to_string(fields_));
    }
    if (data.num_classes != 2) {
      return InvalidArgument("model " + describe() + " needs 0/1 labels, but dataset '" +
                             data.name + "' has " +
                             (data.isRegression() ? std::string("regression targets")
                                                  : std::to_string(data.num_classes) + " classes"));
    }
    return checkClassLabels(data, 2);
  }

  double lossAndGrad(const float* params, const Dataset& data, const size_t* rows, size_t n,
                     const float* emb, float* grad_dense, float* grad_emb) override {
    gather(data, rows, n, emb);
    const size_t in = net_.inputWidth();
    if (grad_emb == nullptr) {
      return net_.lossAndGrad(params, x_.data(), n, labels_.data(), grad_dense, nullptr);
    }
    dx_.resize(n * in);
    const double loss =
        net_.lossAndGrad(params, x_.data(), n, labels_.data(), grad_dense, dx_.data());
    const size_t e = fields_ * dim_;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(grad_emb + i * e, dx_.data() + i * in, e * sizeof(float));
    }
    return loss;
  }

  void predict(const float* params, const Dataset& data, const size_t* rows, size_t n,
               const float* emb, float* out, double* loss_sum) override {
    gather(data, rows, n, emb);
    net_.predict(params, x_.data(), n, labels_.data(), out, loss_sum);
  }

 private:
  void gather(const Dataset& data, const size_t* rows, size_t n, const float* emb) {
    const size_t e = fields_ * dim_;
    const size_t in = net_.inputWidth();
    x_.resize(n * in);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(x_.data() + i * in, emb + i * e, e * sizeof(float));
      std::memcpy(x_.data() + i * in + e, data.numericRow(rows[i]), numeric_ * sizeof(float));
    }
    gatherLabels(data, rows, n, &labels_);
  }

  size_t numeric_, fields_, dim_;
  DenseNet net_;
  std::vector<size_t> hidden_;
  std::vector<float> x_, dx_, labels_;
};

}  // namespace

std::unique_ptr<Model> makeLinear(size_t features) {
  return std::make_unique<NumericModel>("linear", features, std::vector<size_t>{}, 1,
                                        Head::kSquared);
}

std::unique_ptr<Model> makeMlp(size_t features, std::vector<size_t> hidden, int classes) {
  return std::make_unique<NumericModel>("mlp", features, hidden, static_cast<size_t>(classes),
                                        Head::kSoftmax);
}

std::unique_ptr<Model> makeCtr(size_t numeric, size_t fields, size_t dim,
                               std::vector<size_t> hidden) {
  return std::make_unique<CtrModel>(numeric, fields, dim, hidden);
}

StatusOr<std::unique_ptr<Model>> makeModel(const std::string& name, const Dataset& data,
                                           const std::vector<size_t>& hidden,
                                           size_t embedding_dim) {
  for (size_t h : hidden) {
    if (h == 0) return InvalidArgument("hidden layer sizes must be positive");
  }
  std::unique_ptr<Model> model;
  if (name == "linear") {
    if (!data.isRegression()) {
      return InvalidArgument("model 'linear' does regression, but dataset '" + data.name +
                             "' has " + std::to_string(data.num_classes) +
                             " classes (use mlp or ctr)");
    }
    model = makeLinear(data.num_numeric);
  } else if (name == "mlp") {
    if (data.isRegression()) {
      return InvalidArgument("model 'mlp' does classification, but dataset '" + data.name +
                             "' has regression targets (use linear)");
    }
    if (data.num_categorical > 0) {
      return InvalidArgument("dataset '" + data.name +
                             "' has categorical fields, which mlp cannot read (use ctr)");
    }
    model = makeMlp(data.num_numeric, hidden, data.num_classes);
  } else if (name == "ctr") {
    if (data.num_categorical == 0) {
      return InvalidArgument("model 'ctr' needs categorical fields, and dataset '" + data.name +
                             "' has none (use mlp or linear)");
    }
    if (embedding_dim == 0) return InvalidArgument("model 'ctr' needs an embedding dimension >= 1");
    model = makeCtr(data.num_numeric, data.num_categorical, embedding_dim, hidden);
  } else {
    return InvalidArgument("unknown model '" + name + "' (valid: linear, mlp, ctr)");
  }
  ZPS_RETURN_IF_ERROR(model->checkData(data));
  return model;
}

}  // namespace zps::train
