#include "train/distributed_trainer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>

#include "ps/common/checkpoint_dir.h"
#include "train/dense_checkpoint.h"
#include "train/embedding.h"
#include "train/metrics.h"

namespace zps::train {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// One run of the training loop on one worker process; made afresh for each (re)start.
class Trainer {
 public:
  Trainer(Worker& w, TrainingSetup& p, const Config& config)
      : w_(w), p_(p), config_(config), ops_(*p.ops), d_params_(ops_), d_state_(ops_), d_grad_(ops_), d_summed_(ops_) {}

  Status run() {
    const Dataset& train = p_.split.train;
    model_ = p_.model.get();
    async_ = config_.enable_async;
    W_ = static_cast<size_t>(w_.numWorkers()) * static_cast<size_t>(w_.localSize());
    me_ = static_cast<size_t>(w_.rank()) * static_cast<size_t>(w_.localSize()) + static_cast<size_t>(w_.localRank());
    first_ = me_ == 0;
    b_ = static_cast<size_t>(p_.batch_size);
    ZPS_RETURN_IF_ERROR(checkShapes());
    steps_per_epoch_ = train.rows / (W_ * b_);
    if (steps_per_epoch_ == 0)
      return InvalidArgument("the training split has " + std::to_string(train.rows) +
                             " rows, fewer than one global batch of " + std::to_string(W_ * b_) +
                             " (worker processes x --batch_size)");
    size_t n = model_->numDenseParams();
    params_.resize(n);
    state_.assign(kernels::optimizerStateFloats(p_.dense_opt.kind) * n, 0.f);
    kernels::initOptimizerState(p_.dense_opt, state_.data(), n);
    model_->initDense(params_.data(), p_.seed);

    uint64_t start_step = 0;
    // With recovery only worker 0 reads the checkpoint and the others take its copy (shareResumePoint):
    // a replacement worker's pod may have lost its files, and worker 0 may have been writing `latest`
    // when a node was lost.
    const bool read_checkpoint = !config_.recovery || first_;
    if (!config_.checkpoint_dir.empty() && (read_checkpoint || first_)) {
      // A folder that cannot take the checkpoints is found now, before the first step.
      auto job = prepareCheckpointDir(config_.checkpoint_dir);
      if (!job.ok()) return InvalidArgument("ZPS_CHECKPOINT_DIR: " + job.status().message());
      job_id_ = *job;
    }
    if (!config_.checkpoint_dir.empty() && read_checkpoint) {
      if (async_) LOG(WARNING) << "train: checkpoints are written only by synchronous runs";
      auto resumed = readDenseCheckpoint(config_.checkpoint_dir, job_id_, n, state_.size());
      if (resumed.ok()) {
        params_ = resumed->params;
        state_ = resumed->state;
        opt_step_ = resumed->opt_step;
        start_step = resumed->step;
        LOG(INFO) << "train: worker " << w_.rank() << " resumes from the checkpoint at step " << start_step << " in "
                  << config_.checkpoint_dir;
      } else if (resumed.status().code() != StatusCode::kNotFound) {
        return resumed.status();
      }
    }
    if (config_.recovery) ZPS_RETURN_IF_ERROR(shareResumePoint(&start_step));
    ZPS_RETURN_IF_ERROR(declare(start_step));
    ZPS_RETURN_IF_ERROR(toBackend());
    LOG(INFO) << "train: worker " << w_.rank() << ": " << model_->describe() << " on " << p_.data_name << " ("
              << train.rows << " train rows, " << p_.split.test.rows << " test rows), " << steps_per_epoch_
              << " steps per epoch of " << W_ << " x " << b_ << " samples, " << (async_ ? "async" : "sync") << ", "
              << kernels::optimizerName(p_.dense_opt.kind) << " lr " << p_.dense_opt.lr;

    uint64_t step = start_step;
    std::optional<Evaluation> last_eval;  // of the weights as they are now
    for (uint64_t epoch = step / steps_per_epoch_; epoch < static_cast<uint64_t>(p_.epochs); ++epoch) {
      std::vector<size_t> order = epochOrder(train.rows, p_.seed, epoch);
      double loss_sum = 0;
      size_t samples = 0;
      auto start = Clock::now();
      for (uint64_t k = step % steps_per_epoch_; k < steps_per_epoch_; ++k) {
        const size_t* rows = order.data() + k * W_ * b_ + me_ * b_;
        double loss = 0;
        if (Status s = async_ ? stepAsync(rows, &loss) : stepSync(rows, &loss); !s.ok())
          return s.withContext("step " + std::to_string(step + 1) + " (epoch " + std::to_string(epoch + 1) + ")");
        loss_sum += loss;
        samples += b_;
        ++step;
        w_.reportTrainingProgress(step, loss / b_,
                                  samples / std::max(std::chrono::duration<double>(Clock::now() - start).count(), 1e-9),
                                  epoch + 1, static_cast<uint64_t>(p_.epochs));
        if (!async_ && config_.checkpoint_every > 0 && step % config_.checkpoint_every == 0 && k + 1 < steps_per_epoch_)
          ZPS_RETURN_IF_ERROR(checkpoint(step));
      }
      double secs = std::chrono::duration<double>(Clock::now() - start).count();
      train_secs_ += secs;
      train_steps_ += samples / b_;
      if (!async_) ZPS_RETURN_IF_ERROR(checkpoint(step));
      ZPS_ASSIGN_OR_RETURN(Evaluation eval, evaluate(p_.split.test));
      last_eval = eval;
      // Every process trains on b rows per step, so the job's rate is this one's times W (exact for
      // synchronous runs, where all of them take the same steps).
      const double per_process = samples / std::max(secs, 1e-9);
      std::printf(
          "Training. Epoch %llu, train loss: %.6g, test %s, %.0f samples/s on this worker, %.0f "
          "samples/s for the job, Worker: %d\n",
          static_cast<unsigned long long>(epoch + 1), samples ? loss_sum / samples : 0.0, eval.summary().c_str(),
          per_process, per_process * static_cast<double>(W_), w_.rank());
      std::fflush(stdout);
    }
    if (async_) {
      // Every worker reports the same final model: the one on the servers once all pushes are in.
      ZPS_RETURN_IF_ERROR(w_.barrier());
      ZPS_ASSIGN_OR_RETURN(Handle h, w_.pull(dense_, d_params_.data()));
      ZPS_RETURN_IF_ERROR(w_.wait(h));
      last_eval.reset();  // the servers' weights, not this worker's
    }
    ZPS_RETURN_IF_ERROR(fromBackend());
    if (!last_eval) {
      ZPS_ASSIGN_OR_RETURN(last_eval, evaluate(p_.split.test));
    }
    const Evaluation& final_eval = *last_eval;
    std::printf("Final test %s (%zu rows), weights checksum %016llx, Worker: %d\n", final_eval.summary().c_str(),
                p_.split.test.rows, static_cast<unsigned long long>(fnv1a(params_.data(), params_.size() * 4)),
                w_.rank());
    printReferences(final_eval);
    // What gradient compression (docs/compression.md) saved, and what a step cost.
    const TrafficCounters t = w_.traffic();
    std::printf(
        "Traffic: dense tensor compressor %s, %llu bytes pushed for %llu tensor bytes, %.3f ms per step, "
        "Worker: %d\n",
        std::string(compressorName(w_.compressorOf(dense_))).c_str(),
        static_cast<unsigned long long>(t.network_bytes_pushed), static_cast<unsigned long long>(t.tensor_bytes_pushed),
        train_steps_ ? 1e3 * train_secs_ / static_cast<double>(train_steps_) : 0.0, w_.rank());
    std::fflush(stdout);
    if (!p_.weights_out.empty() && w_.localRank() == 0) {  // the local ranks' weights are identical
      std::ofstream out(p_.weights_out, std::ios::binary);
      out.write(reinterpret_cast<const char*>(params_.data()), static_cast<std::streamsize>(params_.size() * 4));
      if (!out) return InvalidArgument("--weights_out: cannot write " + p_.weights_out);
    }
    return Status::OK();
  }

 private:
  // The dense model moves to the backend's memory (the GPU's with --device cuda) once its starting
  // point is known, and stays there; the host copies params_ and state_ are refreshed only for
  // checkpoints and the final report.
  Status toBackend() {
    const size_t n = params_.size();
    if (!d_params_.reserve(n) || !d_grad_.reserve(n) || !d_summed_.reserve(n) || !d_state_.reserve(state_.size()))
      return ops_.status();
    ops_.upload(d_params_.data(), params_.data(), n);
    ops_.upload(d_state_.data(), state_.data(), state_.size());
    ops_.synchronize();
    return ops_.status();
  }
  Status fromBackend() {
    ops_.download(params_.data(), d_params_.data(), params_.size());
    ops_.download(state_.data(), d_state_.data(), state_.size());
    return ops_.status();
  }

  // What the final metric should be judged against: the closed-form least-squares fit for a linear
  // model on dense features, and the generator's own probabilities for synthetic CTR data.
  void printReferences(const Evaluation& final_eval) const {
    const Dataset& train = p_.split.train;
    const Dataset& test = p_.split.test;
    constexpr size_t kMaxLeastSquaresFeatures = 2000;  // normal equations cost features^3
    if (p_.model_name == "linear" && train.num_categorical == 0 && train.num_numeric <= kMaxLeastSquaresFeatures &&
        test.rows > 0) {
      const double reference = leastSquaresTestMse(train, test);
      std::printf("Reference: least-squares test mse %.4f; trained / least squares %.4f, Worker: %d\n", reference,
                  final_eval.mse / reference, w_.rank());
    }
    if (!test.true_probability.empty() && test.rows > 0) {
      const double bayes = rocAuc(test.true_probability.data(), test.labels.data(), test.rows);
      std::printf(
          "Reference: Bayes-optimal test auc %.4f (the generator's own probabilities); trained auc is "
          "%.4f below it, Worker: %d\n",
          bayes, bayes - final_eval.auc, w_.rank());
    }
  }

  // Every worker must train the same model on data of the same shape; a push-pull of the shape shows
  // a mismatch to all of them at once.
  Status checkShapes() {
    const Dataset& d = p_.split.train;
    int64_t mine[4] = {static_cast<int64_t>(d.num_numeric), static_cast<int64_t>(d.num_categorical),
                       static_cast<int64_t>(d.num_classes), static_cast<int64_t>(model_->numDenseParams())};
    int64_t sum[4] = {0, 0, 0, 0};
    ZPS_ASSIGN_OR_RETURN(TensorId t, w_.declare("train/shape", sizeof(mine), DType::kInt64));
    ZPS_ASSIGN_OR_RETURN(Handle h, w_.pushPull(t, mine, sum));
    ZPS_RETURN_IF_ERROR(w_.wait(h));
    for (int i = 0; i < 4; ++i) {
      if (sum[i] != mine[i] * static_cast<int64_t>(W_))
        return InvalidArgument("the workers' data or models differ in shape: this worker has " +
                               std::to_string(mine[0]) + " numeric features, " + std::to_string(mine[1]) +
                               " categorical fields, " + std::to_string(mine[2]) + " classes and " +
                               std::to_string(mine[3]) + " weights; give every worker the same --data and --model");
    }
    return Status::OK();
  }

  // Every worker takes worker 0's step, weights and optimizer state: worker 0 pushes them, the others
  // push zeros, so the sums are worker 0's values exactly.
  Status shareResumePoint(uint64_t* step) {
    const bool source = first_;
    int64_t mine[2] = {source ? static_cast<int64_t>(*step) : 0, source ? static_cast<int64_t>(opt_step_) : 0};
    int64_t steps[2] = {0, 0};
    ZPS_ASSIGN_OR_RETURN(TensorId t, w_.declare("train/resume_step", sizeof(mine), DType::kInt64));
    ZPS_ASSIGN_OR_RETURN(Handle h, w_.pushPull(t, mine, steps));
    ZPS_RETURN_IF_ERROR(w_.wait(h));
    std::vector<float> model(params_.size() + state_.size(), 0.f), shared(model.size());
    if (source) {
      std::copy(params_.begin(), params_.end(), model.begin());
      std::copy(state_.begin(), state_.end(), model.begin() + static_cast<std::ptrdiff_t>(params_.size()));
    }
    ZPS_ASSIGN_OR_RETURN(TensorId m, w_.declare("train/resume_model", model.size() * sizeof(float), DType::kFloat32));
    ZPS_ASSIGN_OR_RETURN(h, w_.pushPull(m, model.data(), shared.data()));
    ZPS_RETURN_IF_ERROR(w_.wait(h));
    std::copy_n(shared.begin(), params_.size(), params_.begin());
    std::copy(shared.begin() + static_cast<std::ptrdiff_t>(params_.size()), shared.end(), state_.begin());
    *step = static_cast<uint64_t>(steps[0]);
    opt_step_ = static_cast<uint64_t>(steps[1]);
    if (!source && *step > 0)
      LOG(INFO) << "train: worker " << w_.rank() << " resumes from worker 0's checkpoint at step " << *step;
    return Status::OK();
  }

  Status declare(uint64_t start_step) {
    size_t bytes = params_.size() * sizeof(float);
    if (async_) {
      ZPS_ASSIGN_OR_RETURN(dense_, w_.declareAsync("train/dense_weights", bytes, DType::kFloat32));
      if (w_.rank() == 0) {
        // Every local rank of the node takes part in the push; only process 0's values count.
        std::vector<float> zeros(first_ ? 0 : params_.size(), 0.f);
        ZPS_ASSIGN_OR_RETURN(Handle h, w_.push(dense_, first_ ? params_.data() : zeros.data()));
        ZPS_RETURN_IF_ERROR(w_.wait(h));
      }
      ZPS_RETURN_IF_ERROR(w_.barrier());  // nobody pulls before the initial weights are in
    } else {
      ZPS_ASSIGN_OR_RETURN(dense_, w_.declare("train/dense_grad", bytes, DType::kFloat32));
    }
    if (model_->embeddingDim() > 0) {
      TableOptions t;
      t.dim = static_cast<uint32_t>(model_->embeddingDim());
      t.optimizer = p_.table_optimizer;
      t.lr = p_.table_lr;
      t.init_scale = 0.01f;
      t.seed = p_.seed;
      t.async = async_ ? 1 : 0;
      t.restore_step = start_step;
      ZPS_ASSIGN_OR_RETURN(table_, w_.declareTable("train/embedding", t));
      dim_ = t.dim;
    }
    return Status::OK();
  }

  // Pulls the embedding rows of data rows rows[0..n) from the servers and lays them out in emb_ for
  // the model (collectBatchIds, expandRows: embedding.h), remembering the batch's ids in ids_.
  Status gatherEmbeddings(const Dataset& data, const size_t* rows, size_t n) {
    collectBatchIds(data, rows, n, &ids_);
    unique_rows_.resize(ids_.unique.size() * dim_);
    ZPS_ASSIGN_OR_RETURN(Handle h, w_.pullRows(table_, ids_.unique.data(), ids_.unique.size(), unique_rows_.data()));
    ZPS_RETURN_IF_ERROR(w_.wait(h));
    emb_.resize(ids_.slot_of.size() * dim_);
    expandRows(ids_, unique_rows_.data(), dim_, emb_.data());
    return Status::OK();
  }

  // Folds the per-slot embedding gradients into one per distinct id (reduceRowGrads), scales them
  // by 1 / global batch as the single-process loop does, and pushes them.
  Status pushEmbeddingGrads(float scale) {
    row_grads_.resize(ids_.unique.size() * dim_);
    reduceRowGrads(ids_, grad_emb_.data(), dim_, row_grads_.data());
    for (float& g : row_grads_) g *= scale;
    ZPS_ASSIGN_OR_RETURN(Handle h, w_.pushRows(table_, ids_.unique.data(), ids_.unique.size(), row_grads_.data()));
    return w_.wait(h);
  }

  // Gathers the batch's embedding rows (ctr) and computes the loss and the gradient sums of this
  // worker's rows into grad_ (and grad_emb_).
  Status forwardBackward(const size_t* rows, double* loss) {
    const Dataset& d = p_.split.train;
    const float* emb = nullptr;
    float* grad_emb = nullptr;
    if (table_ >= 0) {
      ZPS_RETURN_IF_ERROR(gatherEmbeddings(d, rows, b_));
      grad_emb_.resize(emb_.size());
      emb = emb_.data();
      grad_emb = grad_emb_.data();
    }
    *loss = model_->lossAndGrad(d_params_.data(), d, rows, b_, emb, d_grad_.data(), grad_emb);
    return ops_.status();
  }

  // A NaN or infinity in the loss or the gradient ends the run: weights that are not finite stay so,
  // and a job that trains on them reports nothing useful. `summed` is the gradient every worker
  // received alike (synchronous) or this worker's own (asynchronous).
  static std::string valueText(double v) {
    if (std::isnan(v)) return "nan";  // not "-nan": the sign of a NaN says nothing
    return std::isinf(v) ? (v > 0 ? "inf" : "-inf") : std::to_string(v);
  }

  Status checkFinite(const float* grad, double loss, const char* what) {
    const size_t n = params_.size();
    const size_t bad = ops_.firstNonFinite(grad, n);
    ZPS_RETURN_IF_ERROR(ops_.status());
    if (bad == n && std::isfinite(loss)) return Status::OK();
    std::string why;
    if (bad < n) {
      float v = 0;
      ops_.download(&v, grad + bad, 1);
      why = std::string(what) + " is " + valueText(v) + " at weight " + std::to_string(bad);
    }
    if (!std::isfinite(loss))
      why += (why.empty() ? "" : ", and ") + std::string("this worker's batch loss is ") + valueText(loss);
    char lr[32];
    std::snprintf(lr, sizeof(lr), "%g", static_cast<double>(p_.dense_opt.lr));
    return FailedPrecondition("training diverged: " + why + "; lower --lr (now " + lr +
                              "), or look for huge values in the data");
  }

  Status stepSync(const size_t* rows, double* loss) {
    ZPS_RETURN_IF_ERROR(forwardBackward(rows, loss));
    // A worker whose own loss is not finite poisons its gradient, so the sum shows every worker the
    // divergence at the same step and all of them stop with the same message.
    static const float kPoison = std::numeric_limits<float>::quiet_NaN();
    if (!std::isfinite(*loss)) ops_.upload(d_grad_.data(), &kPoison, 1);
    // Each worker contributes its sum; dividing by the global batch makes W workers on batch b the same
    // step as one worker on batch W*b.
    float scale = 1.0f / static_cast<float>(W_ * b_);
    ops_.scale(d_grad_.data(), params_.size(), scale);
    ops_.synchronize();  // the worker API reads the gradient from backend memory
    ZPS_RETURN_IF_ERROR(ops_.status());
    ZPS_ASSIGN_OR_RETURN(Handle h, w_.pushPull(dense_, d_grad_.data(), d_summed_.data()));
    if (table_ >= 0) ZPS_RETURN_IF_ERROR(pushEmbeddingGrads(scale));
    ZPS_RETURN_IF_ERROR(w_.wait(h));
    ZPS_RETURN_IF_ERROR(checkFinite(d_summed_.data(), *loss, "the summed dense gradient"));
    ops_.applyOptimizer(p_.dense_opt, d_params_.data(), d_state_.data(), d_summed_.data(), params_.size(), ++opt_step_);
    return ops_.status();
  }

  Status stepAsync(const size_t* rows, double* loss) {
    const size_t n = params_.size();
    ZPS_ASSIGN_OR_RETURN(Handle pull, w_.pull(dense_, d_params_.data()));
    ZPS_RETURN_IF_ERROR(w_.wait(pull));
    ZPS_RETURN_IF_ERROR(forwardBackward(rows, loss));
    float scale = 1.0f / static_cast<float>(b_);
    ops_.scale(d_grad_.data(), n, scale);
    ZPS_RETURN_IF_ERROR(checkFinite(d_grad_.data(), *loss, "this worker's dense gradient"));
    // The delta this worker's optimizer step makes; the servers add every worker's deltas.
    ops_.copy(d_summed_.data(), d_params_.data(), n);
    ops_.applyOptimizer(p_.dense_opt, d_summed_.data(), d_state_.data(), d_grad_.data(), n, ++opt_step_);
    ops_.subtract(d_summed_.data(), d_summed_.data(), d_params_.data(), n);
    ops_.synchronize();  // the worker API reads the delta from backend memory
    ZPS_RETURN_IF_ERROR(ops_.status());
    ZPS_ASSIGN_OR_RETURN(Handle push, w_.push(dense_, d_summed_.data()));
    if (table_ >= 0) ZPS_RETURN_IF_ERROR(pushEmbeddingGrads(scale));
    return w_.wait(push);
  }

  StatusOr<Evaluation> evaluate(const Dataset& data) {
    size_t per_row = model_->outputsPerRow();
    std::vector<float> out(data.rows * per_row);
    double loss_sum = 0;
    const size_t chunk = 4096;
    std::vector<size_t> rows;
    for (size_t start = 0; start < data.rows; start += chunk) {
      size_t n = std::min(chunk, data.rows - start);
      rows.resize(n);
      for (size_t i = 0; i < n; ++i) rows[i] = start + i;
      const float* emb = nullptr;
      if (table_ >= 0) {
        ZPS_RETURN_IF_ERROR(gatherEmbeddings(data, rows.data(), n));
        emb = emb_.data();
      }
      double part = 0;
      model_->predict(d_params_.data(), data, rows.data(), n, emb, out.data() + start * per_row, &part);
      ZPS_RETURN_IF_ERROR(ops_.status());
      loss_sum += part;
    }
    return evaluateOutputs(data, out.data(), per_row, data.rows ? loss_sum / data.rows : 0);
  }

  Status checkpoint(uint64_t step) {
    if (config_.checkpoint_dir.empty() || !first_) return Status::OK();
    ZPS_RETURN_IF_ERROR(fromBackend());
    if (table_ >= 0) ZPS_RETURN_IF_ERROR(w_.checkpointTables(step));
    DenseCheckpoint c;
    c.step = step;
    c.opt_step = opt_step_;
    c.params = params_;
    c.state = state_;
    ZPS_RETURN_IF_ERROR(
        writeDenseCheckpoint(config_.checkpoint_dir, job_id_, c).withContext("writing the dense checkpoint"));
    LOG(INFO) << "train: checkpoint at step " << step << " written to " << config_.checkpoint_dir;
    return Status::OK();
  }

  Worker& w_;
  TrainingSetup& p_;
  const Config& config_;
  Model* model_ = nullptr;
  bool async_ = false;
  size_t W_ = 1, b_ = 1;  // W_: worker processes (workers x local size)
  size_t me_ = 0;         // this process's index among them
  bool first_ = true;     // process 0: reads and writes the checkpoints
  uint64_t job_id_ = 0;   // the checkpoint folder's (ps/common/checkpoint_dir.h)
  uint64_t steps_per_epoch_ = 0;
  TensorId dense_ = -1;
  TableId table_ = -1;
  uint32_t dim_ = 0;
  uint64_t opt_step_ = 0;
  double train_secs_ = 0;  // time in training steps (no evaluation), for the time per step
  uint64_t train_steps_ = 0;
  kernels::TrainOps& ops_;
  // The dense model on the host (start, checkpoints, final report) and in backend memory (training).
  std::vector<float> params_, state_;
  kernels::TrainBuffer d_params_, d_state_, d_grad_, d_summed_;
  BatchIds ids_;  // the ids of the batch being trained or evaluated
  std::vector<float> unique_rows_, emb_, grad_emb_, row_grads_;
};

}  // namespace

Status runDistributedTraining(Worker& worker, TrainingSetup& setup, const Config& config) {
  for (;;) {
    Trainer trainer(worker, setup, config);
    Status result = trainer.run();
    // ZPS_RECOVERY: a node was lost. Once its replacement is in, every worker starts over from the
    // latest checkpoint, exactly as a restarted job would, and redoes the steps since.
    if (result.ok() || !worker.recovering()) return result;
    LOG(WARNING) << "train: worker " << worker.rank() << ": " << result.message()
                 << "; rolling back to the latest checkpoint once the lost node is replaced";
    ZPS_RETURN_IF_ERROR(worker.recover());
  }
}

}  // namespace zps::train
