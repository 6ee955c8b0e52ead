#include "server/engine.h"

#include <glog/logging.h>

#include <chrono>

#include "ps/node/observability.h"
#include "server/server_observer.h"

namespace zps {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

Engine::Engine(int index, std::unique_ptr<kernels::Reducer> reducer, int num_workers, const ShardPlace& checkpoints,
               MemoryBudget* budget, Transport* transport, PushPacer* pacer, bool threaded, bool skip_zeros)
    : index_(index),
      reducer_(std::move(reducer)),
      num_workers_(num_workers),
      checkpoints_(checkpoints),
      budget_(budget),
      skip_zeros_(skip_zeros),
      transport_(transport),
      pacer_(pacer),
      queue_(1024) {
  resetStores();
  if (threaded) thread_ = std::thread([this] { run(); });
}

void Engine::stop() {
  closed_ = true;
  queue_.close();
  if (thread_.joinable()) thread_.join();
}

void Engine::process(const EngineTask& task) {
  if (task.reset) {
    resetStores();
    return;
  }
  out_.clear();
  handle(task, &out_);
  if (pacer_ != nullptr) pacer_->offerAll(&out_);
  for (auto& o : out_) (void)transport_->send(o.peer, wire::encodeData(std::move(o.data), std::move(o.payload)));
}

void Engine::handle(const EngineTask& task, std::vector<Outgoing>* out) {
  const size_t first = out->size();
  const int64_t obs_start = unixMicros();
  ServerObserver* obs = ServerObserver::current();
  const pb::Data& request = task.msg.data;
  bool param = request.has_rows() || request.has_checkpoint() ||
               (request.has_declare() && request.declare().mode() == pb::MODE_PARAM);
  if (param) {
    params_->handle(task.peer, task.worker, task.local_rank, task.msg, out);
  } else {
    store_->handle(task.peer, task.worker, task.msg, out, task.local_rank);
  }
  size_t reply_bytes = 0, replies = 0;
  for (size_t i = first; i < out->size(); ++i) {
    const Outgoing& o = (*out)[i];
    if (o.data.has_error()) {
      LOG_EVERY_N(WARNING, 20) << "server: error reply to worker " << task.worker << ": " << o.data.error().text();
    }
    if (o.payload.size() == 0) continue;
    reply_bytes += o.payload.size();
    ++replies;
  }
  if (obs != nullptr)
    obs->handled(index_, task.worker, request, task.msg.payload.size(), obs_start, reply_bytes, replies);
}

void Engine::submit(EngineTask task) {
  while (!queue_.push(std::move(task), Clock::now() + std::chrono::seconds(1))) {
    if (closed_) return;
    LOG_EVERY_N(WARNING, 10) << "server engine " << index_ << " queue is full; waiting";
  }
}

void Engine::run() {
  for (;;) {
    auto task = queue_.pop(Clock::now() + std::chrono::seconds(3600));
    if (!task) {
      if (closed_) return;
      continue;
    }
    ServerObserver* obs = ServerObserver::current();
    if (obs != nullptr && !task->reset) obs->queueDepth(index_, queue_.size());
    process(*task);
  }
}

void Engine::resetStores() {
  store_.reset();  // gives its memory charge back before the new store takes any
  params_.reset();
  store_ = std::make_unique<SumStore>(num_workers_, reducer_.get(), budget_, &sum_counts_, skip_zeros_);
  params_ = std::make_unique<ParamStore>(num_workers_, checkpoints_, budget_, reducer_.get());
}

}  // namespace zps
