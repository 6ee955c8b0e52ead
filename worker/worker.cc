// Worker: the public worker API (include/zps/worker.h), a thin facade over Worker::Impl
// (worker_impl.h), which holds the worker's parts and says which threads call them.
#include "zps/worker.h"

#include <glog/logging.h>

#include "worker/worker_impl.h"

namespace zps {

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

StatusOr<std::unique_ptr<Worker>> Worker::create() {
  auto env = processEnv();
  auto role = env("DMLC_ROLE");
  if (role && !role->empty() && *role != "worker")
    return InvalidArgument("this is a worker program but DMLC_ROLE=" + *role + "; set DMLC_ROLE=worker");
  ZPS_ASSIGN_OR_RETURN(Config config, loadConfig(env, Role::kWorker));
  ZPS_RETURN_IF_ERROR(initObservability(env));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->obs = std::make_unique<WorkerObserver>(impl->config);
  ZPS_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

int Worker::rank() const { return impl_->rank; }
int Worker::localRank() const { return impl_->config.local_rank; }
int Worker::localSize() const { return impl_->config.local_size; }
TrafficCounters Worker::traffic() const { return impl_->tensors->traffic(); }
int Worker::numWorkers() const { return impl_->config.num_workers; }
int Worker::numServers() const { return impl_->config.num_servers; }
size_t Worker::partitionBytes() const { return impl_->config.partition_bytes; }

StatusOr<TensorId> Worker::declare(const std::string& name, size_t bytes, DType dtype) {
  return impl_->tensors->declare(name, bytes, dtype, false, DeclareOptions());
}

StatusOr<TensorId> Worker::declare(const std::string& name, size_t bytes, DType dtype, const DeclareOptions& options) {
  // The first tensor scheduled by its own priority opens the push lanes (ZPS_PRIORITY=1 opened them at
  // the start); a job without scheduled tensors keeps one connection per server.
  if (options.priority) impl_->links->wantLanes();
  return impl_->tensors->declare(name, bytes, dtype, false, options);
}

StatusOr<TensorId> Worker::declareAsync(const std::string& name, size_t bytes, DType dtype) {
  return impl_->tensors->declare(name, bytes, dtype, true, DeclareOptions());
}

Compressor Worker::compressorOf(TensorId tensor) const { return impl_->tensors->compressorOf(tensor); }

std::optional<int64_t> Worker::priorityOf(TensorId tensor) const { return impl_->tensors->priorityOf(tensor); }

StatusOr<Handle> Worker::push(TensorId t, const void* data) {
  return impl_->local_path->route(t, pb::CMD_PUSH, data, nullptr);
}

StatusOr<Handle> Worker::pull(TensorId t, void* out) { return impl_->local_path->route(t, pb::CMD_PULL, nullptr, out); }

StatusOr<Handle> Worker::pushPull(TensorId t, const void* data, void* out) {
  return impl_->local_path->route(t, pb::CMD_PUSH_PULL, data, out);
}

Status Worker::wait(Handle handle, std::chrono::milliseconds timeout) { return impl_->waits->wait(handle, timeout); }

Status Worker::wait(Handle handle) { return wait(handle, impl_->config.request_timeout); }

StatusOr<bool> Worker::poll(Handle handle) const { return impl_->requests->poll(handle); }

Status Worker::barrier() { return impl_->local_path->barrier(); }

int Worker::finish(const Status& result) {
  // Every process (each local rank has its own requests): what a lossy network cost.
  if (const uint64_t resent = impl_->requests->resent(); resent > 0)
    LOG(INFO) << impl_->me() << ": resent " << resent << " requests";
  if (const uint64_t hurried = impl_->scheduler->hurried(); hurried > 0)
    LOG(INFO) << impl_->me() << ": push hints sent " << hurried
              << " queued requests ahead of their priority (rounds that waited for it alone)";
  if (const std::string credit = impl_->scheduler->creditReport(); !credit.empty())
    LOG(INFO) << impl_->me() << ": " << credit;
  if (impl_->local) return impl_->local_path->finish(result);
  auto shutdown = impl_->client->finish(result.ok(), result.message(), impl_->config.job_end_timeout);
  if (!shutdown.ok()) {
    LOG(ERROR) << "worker " << impl_->rank << ": " << shutdown.status().message();
    return 1;
  }
  if (shutdown->exit_code() != 0)
    LOG(ERROR) << "worker " << impl_->rank << ": " << shutdown->reason();
  else
    LOG(INFO) << "worker " << impl_->rank << ": " << shutdown->reason();
  if (!result.ok()) return 1;
  return shutdown->exit_code();
}

int Worker::serverOfRow(uint64_t key) const { return impl_->tables->serverOfRow(key); }

StatusOr<TableId> Worker::declareTable(const std::string& name, const TableOptions& options) {
  return impl_->tables->declare(name, options, impl_->tensors->count());
}

StatusOr<Handle> Worker::pullRows(TableId table, const uint64_t* keys, size_t n, float* out) {
  return impl_->tables->pullRows(table, keys, n, out);
}

StatusOr<Handle> Worker::pullRowsAhead(TableId table, const uint64_t* keys, size_t n, float* out, uint32_t ahead) {
  return impl_->tables->pullRows(table, keys, n, out, ahead);
}

StatusOr<Handle> Worker::pushRows(TableId table, const uint64_t* keys, size_t n, const float* grads) {
  return impl_->tables->pushRows(table, keys, n, grads);
}

Status Worker::checkpointTables(uint64_t step) { return impl_->tables->checkpoint(step); }

void Worker::reportTrainingProgress(uint64_t step, double loss, double samples_per_sec, uint64_t epoch,
                                    uint64_t epochs) {
  impl_->obs->progress(step, loss, samples_per_sec, epoch, epochs);
}

StatusOr<std::vector<ServerStats>> Worker::serverStats() {
  std::vector<ServerStats> stats(numServers());
  FanOut fan("asking the servers for their stats");
  for (int s = 0; s < numServers(); ++s) {
    pb::Data d = impl_->requests->newRequest();
    d.mutable_stats();
    OutgoingRequest o(d, RequestSpec::to(s), wire::encodeBody(d));
    // Runs before the wait below returns, or never (a reply after a failed wait is dropped).
    o.request.on_reply = [&stats, s](const pb::Data& answer) {
      const pb::StatsReply& r = answer.stats_reply();  // all zero when a server sent a plain Reply
      stats[s] = ServerStats{r.cpu_ns(), r.peak_rss_bytes(), r.pushed_bytes(), r.summed_bytes(), r.sum_ns()};
      return Status::OK();
    };
    fan.requests.push_back(std::move(o));
  }
  ZPS_RETURN_IF_ERROR(impl_->requests->run(std::move(fan), impl_->config.request_timeout));
  return stats;
}

std::vector<PartitionInfo> Worker::partitions(TensorId t) const { return impl_->tensors->partitions(t); }

bool Worker::recovering() const { return impl_->recovery->recovering(); }

Status Worker::recover() { return impl_->recover(); }

}  // namespace zps
