#include "worker/tables.h"

#include "kernels/optimizer.h"
#include "ps/common/row_placement.h"
#include "ps/wire/codec.h"
#include "worker/placement.h"

namespace zps {
namespace {

// Row commands carry their keys as a frame of uint64.
Blob keyFrame(const std::vector<uint64_t>& keys) { return Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t)); }

}  // namespace

Tables::Tables(const Config& config, RequestTable* requests, WorkerObserver* obs)
    : config_(config), requests_(requests), obs_(obs) {}

int Tables::serverOfRow(uint64_t key) const { return zps::serverOfRow(key, config_.num_servers); }

StatusOr<TableId> Tables::declare(const std::string& name, const TableOptions& options, int tensors) {
  ZPS_ASSIGN_OR_RETURN(kernels::OptimizerKind kind, kernels::optimizerFromName(options.optimizer));
  if (options.dim == 0 || options.dim > 65536) return InvalidArgument("table '" + name + "': dim must be 1..65536");
  if (!(options.lr > 0)) return InvalidArgument("table '" + name + "': lr must be > 0");
  TableId id;
  Table t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = static_cast<TableId>(tables_.size());
    const int tensor_slot = tensors + (1 << 29) + id;
    t.name = name;
    t.key = static_cast<uint64_t>(tensor_slot) << kKeyPartitionBits;
    t.options = options;
    if (t.options.async < 0) t.options.async = config_.enable_async ? 1 : 0;
    t.push_round = options.restore_step;
    if (t.options.async == 1) t.async = std::make_shared<AsyncSequence>();
    tables_.push_back(t);
  }
  FanOut fan("declaring table '" + name + "'");
  for (int s = 0; s < config_.num_servers; ++s) {
    pb::Data d = requests_->newRequest();
    pb::Declare* declare = d.mutable_declare();
    declare->set_key(t.key);
    declare->set_mode(pb::MODE_PARAM);
    declare->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    declare->set_name(name);
    declare->set_row_dim(options.dim);
    declare->set_async(t.options.async == 1);
    declare->set_restore_step(options.restore_step);
    declare->set_local_size(static_cast<uint32_t>(config_.local_size));
    auto* o = declare->mutable_optimizer();
    o->set_kind(static_cast<uint32_t>(kind));
    o->set_lr(options.lr);
    o->set_momentum(options.momentum);
    o->set_beta1(options.beta1);
    o->set_beta2(options.beta2);
    o->set_eps(options.eps);
    o->set_initial_accumulator(options.initial_accumulator);
    o->set_init_scale(options.init_scale);
    o->set_init_seed(options.seed);
    fan.requests.emplace_back(d, RequestSpec::to(s, t.key, DType::kFloat32), wire::encodeBody(d));
  }
  ZPS_RETURN_IF_ERROR(requests_->run(std::move(fan), config_.request_timeout));
  return id;
}

StatusOr<Handle> Tables::pullRows(TableId table, const uint64_t* keys, size_t n, float* out, uint32_t ahead) {
  Table t;
  uint64_t round;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (table < 0 || table >= static_cast<int>(tables_.size())) return InvalidArgument("unknown table id");
    if (ahead > Worker::kMaxPullAhead)
      return InvalidArgument("table '" + tables_[table].name + "': a pull may wait for at most " +
                             std::to_string(Worker::kMaxPullAhead) + " push ahead, not " + std::to_string(ahead));
    // Sync tables: wait until every worker's pushes up to this worker's latest round (plus `ahead`,
    // the pushes this worker will make before it reads the rows) are applied.
    round = tables_[table].push_round + 1 + ahead;
    t = tables_[table];
  }
  const int servers = config_.num_servers;
  std::vector<std::vector<uint64_t>> by_server(servers);
  std::vector<std::shared_ptr<std::vector<uint32_t>>> positions(servers);
  for (int s = 0; s < servers; ++s) positions[s] = std::make_shared<std::vector<uint32_t>>();
  for (size_t i = 0; i < n; ++i) {
    int s = serverOfRow(keys[i]);
    by_server[s].push_back(keys[i]);
    positions[s]->push_back(static_cast<uint32_t>(i));
  }
  FanOut fan("pulling " + std::to_string(n) + " rows of '" + t.name + "' round " + std::to_string(round));
  for (int s = 0; s < servers; ++s) {
    if (by_server[s].empty()) continue;
    OutgoingRequest o;
    o.request = RequestSpec::to(s, t.key, DType::kFloat32);
    o.request.out = reinterpret_cast<uint8_t*>(out);
    o.request.positions = positions[s];
    o.request.row_dim = t.options.dim;
    pb::Data d = requests_->newRequest();
    o.id = d.request_id();
    pb::Rows* pull = d.mutable_rows();
    pull->set_key(t.key);
    pull->set_round(round);
    pull->set_count(by_server[s].size());
    pull->set_row_dim(t.options.dim);
    o.frames = wire::encodeBody(std::move(d));
    o.frames.push_back(keyFrame(by_server[s]));  // even when empty: a rows message has its keys frame
    const size_t rows = by_server[s].size();
    o.trace = RequestTrace{pb::CMD_PULL_ROWS, round, rows * t.options.dim * sizeof(float), t.name, rows};
    fan.requests.push_back(std::move(o));
  }
  return requests_->issue(std::move(fan));
}

StatusOr<Handle> Tables::pushRows(TableId table, const uint64_t* keys, size_t n, const float* grads) {
  Table t;
  uint64_t round;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (table < 0 || table >= static_cast<int>(tables_.size())) return InvalidArgument("unknown table id");
    round = ++tables_[table].push_round;
    t = tables_[table];
  }
  uint64_t seq = 0;
  if (t.async) {
    // Outside the lock: it may wait for an older push's answer.
    ZPS_ASSIGN_OR_RETURN(seq, t.async->begin(config_.request_timeout, "pushing rows of '" + t.name + "'"));
  }
  const int servers = config_.num_servers;
  const uint32_t dim = t.options.dim;
  std::vector<std::vector<uint64_t>> by_server(servers);
  std::vector<std::vector<float>> rows(servers);
  for (size_t i = 0; i < n; ++i) {
    int s = serverOfRow(keys[i]);
    by_server[s].push_back(keys[i]);
    rows[s].insert(rows[s].end(), grads + i * dim, grads + (i + 1) * dim);
  }
  FanOut fan("pushing " + std::to_string(n) + " rows of '" + t.name + "' round " + std::to_string(round));
  // Every server gets a push every round, empty or not: in sync mode each server counts its rounds.
  for (int s = 0; s < servers; ++s) {
    pb::Data d = requests_->newRequest();
    pb::Rows* push = d.mutable_rows();
    push->set_push(true);
    push->set_key(t.key);
    push->set_round(round);
    push->set_count(by_server[s].size());
    push->set_row_dim(dim);
    push->set_push_seq(seq);
    const size_t bytes = rows[s].size() * sizeof(float);
    std::vector<Blob> frames = wire::encodeBody(d);
    frames.push_back(keyFrame(by_server[s]));
    frames.push_back(Blob::copyOf(rows[s].data(), bytes));
    fan.requests.emplace_back(d, RequestSpec::to(s, t.key, DType::kFloat32), std::move(frames),
                              RequestTrace{pb::CMD_PUSH_ROWS, round, bytes, t.name, by_server[s].size()});
  }
  if (!t.async) return requests_->issue(std::move(fan));
  std::shared_ptr<AsyncSequence> sequence = t.async;
  fan.op->on_done = [sequence, seq] { sequence->end(seq); };
  fan.op->on_cancelled = [sequence, seq](const Status& failed) {
    sequence->end(seq);
    return failed;
  };
  StatusOr<Handle> handle = requests_->issue(std::move(fan));
  if (!handle.ok()) sequence->end(seq);
  return handle;
}

Status Tables::checkpoint(uint64_t step) {
  std::vector<Table> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tables = tables_;
  }
  FanOut fan("checkpointing tables at step " + std::to_string(step));
  for (const auto& t : tables) {
    for (int s = 0; s < config_.num_servers; ++s) {
      pb::Data d = requests_->newRequest();
      d.mutable_checkpoint()->set_key(t.key);
      d.mutable_checkpoint()->set_step(step);
      fan.requests.emplace_back(d, RequestSpec::to(s, t.key, DType::kFloat32), wire::encodeBody(d));
    }
  }
  ZPS_RETURN_IF_ERROR(requests_->run(std::move(fan), config_.request_timeout));
  if (obs_ != nullptr) obs_->checkpointed();
  return Status::OK();
}

void Tables::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  tables_.clear();
}

}  // namespace zps
