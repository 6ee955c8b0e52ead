// The distributed trainer: what `zps train` runs on each worker process (and the Python binding can
// run), through the public worker API only, with the models, data and steps of train/.
//
// Synchronous (default): every step, each worker computes gradients on its slice of the global batch
// (worker r takes rows [r*b, (r+1)*b) of each global batch of W*b rows, in an epoch order every worker
// computes alike), push-pulls the dense gradient (server sum mode), divides by W*b and applies the dense
// optimizer itself, so every worker holds bit-identical weights. The CTR model's embedding rows live on
// the servers (param mode): a worker pulls the rows its batch uses and pushes their gradients, and the
// servers apply the table optimizer once per round.
//
// Several processes per worker node (ZPS_LOCAL_SIZE = L > 1): W counts processes, W = workers x L, and
// the process of local rank l on worker r is process r*L+l; the node's local reduction sums its
// processes' dense gradients before they reach the servers, while each process pulls and pushes its own
// embedding rows (the servers' table rounds count every process).
//
// Asynchronous (ZPS_ENABLE_ASYNC=1): the dense weights live in an async tensor on the servers (a running
// sum: worker 0 pushes the initial weights, then every worker pushes its own weight deltas), tables apply
// each push at once, and no worker waits for another.
//
// Checkpoints (ZPS_CHECKPOINT_DIR, synchronous runs): after every epoch, and every ZPS_CHECKPOINT_EVERY
// steps, process 0 (worker 0, local rank 0) has the servers write their table shards as of that step,
// then writes the dense model (dense-step-<s>.ckpt) and finally the pointer file `latest`. A restarted
// job resumes from `latest`, and so does a running one that lost a node (ZPS_RECOVERY): once the
// replacement is in, every worker rolls back to `latest` (to the start without a checkpoint) and redoes
// the steps since.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/optimizer.h"
#include "kernels/train_ops.h"
#include "ps/common/config.h"
#include "train/dataset.h"
#include "train/defaults.h"
#include "train/model.h"
#include "zps/worker.h"

namespace zps::train {

// Everything a training run needs, prepared before joining the job so that a bad setting or bad data
// is reported to the scheduler (which then ends the job for everyone) instead of leaving peers
// waiting. Owned by the caller; the trainer reads it and uses its model and backend.
struct TrainingSetup {
  Split split;
  std::unique_ptr<Model> model;
  std::string model_name;  // makeModel's name, e.g. "linear" (the references depend on it)
  std::string data_name;   // the dataset spec, for log lines
  kernels::OptimizerConfig dense_opt;
  int epochs = kDefaultEpochs;
  size_t batch_size = kDefaultBatchSize;  // per worker process
  uint64_t seed = 1;                      // initial weights and epoch order (the split was drawn with it too)
  std::string table_optimizer = kDefaultTableOptimizer;  // ctr: the servers' embedding optimizer
  float table_lr = defaultTableLr(kernels::OptimizerKind::kAdam);
  std::string weights_out;           // non-empty: process 0 of each node writes the final weights here
  kernels::TrainOps* ops = nullptr;  // where the dense model runs; outlives the run
};

// Trains `setup` on this worker process until the job's epochs are done, printing each epoch's and
// the final metrics on stdout. With ZPS_RECOVERY, a lost node makes every worker roll back to the
// latest checkpoint once its replacement is in, and train on from there. Runs on the calling thread.
Status runDistributedTraining(Worker& worker, TrainingSetup& setup, const Config& config);

}  // namespace zps::train
