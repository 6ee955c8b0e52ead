#include "server/param_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "ps/common/config.h"

namespace zps {
namespace {

Outgoing ack(PeerId peer, const pb::Data& request) { return replyTo(peer, request); }

std::vector<uint64_t> keysOf(const wire::DataMessage& msg) {
  std::vector<uint64_t> keys(msg.data.rows().count());
  if (!keys.empty()) std::memcpy(keys.data(), msg.keys.data(), keys.size() * sizeof(uint64_t));
  return keys;
}

// A table also costs its index entries and bookkeeping; 1 KiB stands for them.
constexpr uint64_t kTableOverhead = 1024;

}  // namespace

ParamStore::~ParamStore() {
  for (auto& [key, t] : tables_) {
    if (t.sizes.rows == nullptr) continue;
    t.sizes.rows->add(-static_cast<double>(t.rows.size()));
    t.sizes.bytes->add(-static_cast<double>(t.rows.size() * t.rows.rowBytes()));
  }
  if (budget_ != nullptr) budget_->releaseRows(rows_charged_);
}

void ParamStore::handle(PeerId peer, int worker, uint32_t local_rank, const wire::DataMessage& msg,
                        std::vector<Outgoing>* out) {
  const pb::Data& request = msg.data;
  if (request.has_declare()) {
    bool checkpoint_refused = false;
    Status s = declare(request.declare().key(), local_rank, msg, &checkpoint_refused);
    if (s.ok()) {
      out->push_back(ack(peer, request));
      return;
    }
    out->push_back(errorReply(peer, request, s.message()));
    // A refused checkpoint file is the user's to fix, not a failure of the job: the worker exits 2.
    out->back().data.mutable_error()->set_user_error(checkpoint_refused);
    return;
  }
  const uint64_t key = wire::keyOf(request);
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    out->push_back(errorReply(peer, request, "table key " + std::to_string(key) + " was never declared"));
    return;
  }
  Table& t = it->second;
  std::string where = "table '" + t.name + "' round " + std::to_string(wire::roundOf(request));
  if (request.has_rows() && request.rows().push()) {
    Status s = push(t, worker, local_rank, msg);
    if (!s.ok()) {
      out->push_back(errorReply(peer, request, s.withContext(where).message()));
      return;
    }
    out->push_back(ack(peer, request));
    if (!t.async) applyRounds(key, t, out);
    return;
  }
  if (request.has_rows()) {
    const pb::Rows& h = request.rows();
    if (h.row_dim() != t.dim) {
      out->push_back(errorReply(peer, request,
                                where + ": row_dim " + std::to_string(h.row_dim()) + " != " + std::to_string(t.dim)));
      return;
    }
    auto keys = keysOf(msg);
    counters_.bytes_in += keys.size() * sizeof(uint64_t);
    if (t.async || h.round() <= t.completed + 1) {
      pullNow(t, peer, request, keys, out);
    } else if (h.round() > t.completed + kMaxPullRoundsAhead) {
      out->push_back(
          errorReply(peer, request, where + ": pull is too far ahead of round " + std::to_string(t.completed)));
    } else if (std::any_of(t.parked.begin(), t.parked.end(), [&](const Table::Parked& q) {
                 return q.peer == peer && q.request.request_id() == request.request_id();
               })) {
      // a resend of a pull that is already waiting
    } else if (t.parked.size() >= static_cast<size_t>(pushers(t)) * (kMaxPullRoundsAhead + 1) * 2) {
      out->push_back(errorReply(peer, request, where + ": too many requests waiting"));
    } else {
      t.parked.push_back(Table::Parked{peer, request, std::move(keys)});
    }
    return;
  }
  if (request.has_checkpoint()) {
    if (place_.dir.empty()) {
      out->push_back(errorReply(peer, request, "this server has no ZPS_CHECKPOINT_DIR"));
      return;
    }
    const uint64_t step = request.checkpoint().step();
    if (t.async || step <= t.completed) {
      Status s = checkpointRequested(t, step);
      out->push_back(s.ok() ? ack(peer, request) : errorReply(peer, request, s.message()));
    } else {
      t.parked.push_back(Table::Parked{peer, request, {}});
    }
    return;
  }
  out->push_back(errorReply(peer, request,
                            "command " + pb::DataCommand_Name(wire::commandOf(request)) + " is not valid for a table"));
}

Status ParamStore::declare(uint64_t key, uint32_t local_rank, const wire::DataMessage& msg, bool* checkpoint_refused) {
  const pb::Declare& h = msg.data.declare();
  const auto& o = h.optimizer();
  if (msg.dtype != DType::kFloat32) return InvalidArgument("tables hold float32 rows");
  if (h.row_dim() == 0 || h.row_dim() > 65536) return InvalidArgument("row_dim must be in [1, 65536]");
  const uint32_t local_size = std::max<uint32_t>(h.local_size(), 1);  // 0: a worker without local ranks
  if (local_size > static_cast<uint32_t>(kMaxLocalSize))
    return InvalidArgument("local_size " + std::to_string(local_size) + " is out of range (1 to " +
                           std::to_string(kMaxLocalSize) + ")");
  if (local_rank >= local_size)
    return InvalidArgument("this connection's HELLO gave local rank " + std::to_string(local_rank) +
                           ", outside the DECLARE's local size " + std::to_string(local_size));
  if (o.kind() > static_cast<uint32_t>(kernels::OptimizerKind::kAdagrad))
    return InvalidArgument("optimizer kind " + std::to_string(o.kind()) + " is unknown");
  if (!(o.lr() > 0) || !(o.init_scale() >= 0) || !(o.eps() >= 0))
    return InvalidArgument("optimizer needs lr > 0, eps >= 0 and init_scale >= 0");
  auto it = tables_.find(key);
  if (it != tables_.end()) {
    const Table& t = it->second;
    if (t.name != h.name() || t.dim != h.row_dim() || t.async != h.async() ||
        static_cast<uint32_t>(t.optimizer.kind) != o.kind())
      return InvalidArgument("table key " + std::to_string(key) + " was declared as '" + t.name + "' (dim " +
                             std::to_string(t.dim) + ") but this worker declares '" + h.name() + "' (dim " +
                             std::to_string(h.row_dim()) + ") or another optimizer/async setting");
    if (t.local_size != local_size)
      return InvalidArgument("table '" + t.name + "' was declared by nodes of " + std::to_string(t.local_size) +
                             " local ranks but this worker has " + std::to_string(local_size) +
                             "; every worker node needs the same ZPS_LOCAL_SIZE");
    return Status::OK();
  }
  // One name at two keys: two workers declared their tables at different points (a table's key follows
  // the tensors declared before it); its rounds would wait for pushes that go to the other key.
  for (const auto& [other_key, other] : tables_)
    if (other.name == h.name())
      return InvalidArgument("table '" + h.name() + "' is declared at key " + std::to_string(key) +
                             " but another worker declared it at key " + std::to_string(other_key) +
                             "; every worker must declare the same tensors and tables in the same order");
  ZPS_RETURN_IF_ERROR(memory_.take(kTableOverhead, "table '" + h.name() + "'"));
  Table t;
  t.name = h.name();
  t.dim = h.row_dim();
  t.optimizer.kind = static_cast<kernels::OptimizerKind>(o.kind());
  t.optimizer.lr = o.lr();
  t.optimizer.momentum = o.momentum();
  t.optimizer.beta1 = o.beta1();
  t.optimizer.beta2 = o.beta2();
  t.optimizer.eps = o.eps();
  t.optimizer.initial_accumulator = o.initial_accumulator();
  t.init_scale = o.init_scale();
  t.init_seed = o.init_seed();
  t.async = h.async();
  t.local_size = local_size;
  t.state_floats = kernels::optimizerStateFloats(t.optimizer.kind);
  t.rows = RowStore(t.dim, static_cast<uint32_t>(t.state_floats), row_format_);
  if (h.restore_step() > 0) {
    Status restored = restore(t, h.restore_step());
    if (!restored.ok()) {
      memory_.give(kTableOverhead);
      *checkpoint_refused = restored.code() == StatusCode::kInvalidArgument;
      return restored;
    }
  }
  registerMetrics(tables_.emplace(key, std::move(t)).first->second);
  return Status::OK();
}

Status ParamStore::ensureRows(Table& t, const std::vector<uint64_t>& keys, bool force) {
  const uint64_t tick = ++clock_;
  std::vector<uint64_t> fresh;
  uint64_t pinned = 0;  // rows of this request that exist: not evictable for it
  for (uint64_t k : keys) {
    const uint32_t slot = t.rows.find(k);
    if (slot == RowStore::kNoRow) {
      fresh.push_back(k);
    } else {
      pinned += t.rows.lastUsed(slot) < tick ? 1 : 0;
      t.rows.touch(slot, tick);
    }
  }
  if (fresh.empty()) return Status::OK();
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
  const uint64_t bytes = fresh.size() * t.rows.rowBytes();
  const std::string what = std::to_string(fresh.size()) + " new rows of table '" + t.name + "'";
  if (!makeRoom(bytes, pinned * t.rows.rowBytes(), tick, force))
    return FailedPrecondition(what + " need " + std::to_string(bytes) + " bytes, more than ZPS_TABLE_MEMORY_BYTES=" +
                              std::to_string(budget_->tables().max_bytes) +
                              " leaves after evicting every row not in this request; raise it or add servers");
  if (force) {
    memory_.takeAnyway(bytes);
  } else if (Status s = memory_.take(bytes, what); !s.ok()) {
    if (budget_ != nullptr) budget_->releaseRows(bytes);
    rows_charged_ -= bytes;
    return s;
  }
  for (uint64_t k : fresh) createRow(t, k, tick);
  return Status::OK();
}

bool ParamStore::makeRoom(uint64_t bytes, uint64_t pinned_bytes, uint64_t tick, bool force) {
  if (budget_ == nullptr) return true;
  // Evicting every row but the pinned ones would not make room: refuse before evicting any.
  const uint64_t max = budget_->tables().max_bytes;
  const uint64_t evictable = rows_charged_ - std::min(pinned_bytes, rows_charged_);
  const uint64_t used = budget_->rowsUsed();
  if (!force && max > 0 && (used - std::min(evictable, used)) + bytes > max) return false;
  while (!budget_->reserveRows(bytes)) {
    // The least recently used row of all this store's tables, if it was used before this request.
    Table* victim = nullptr;
    uint64_t oldest = tick;
    for (auto& [key, t] : tables_) {
      const uint32_t slot = t.rows.leastRecentlyUsed();
      if (slot != RowStore::kNoRow && t.rows.lastUsed(slot) < oldest) {
        oldest = t.rows.lastUsed(slot);
        victim = &t;
      }
    }
    if (victim == nullptr) {
      if (!force) return false;
      budget_->reserveRows(bytes, /*force=*/true);
      break;
    }
    evictRow(*victim, victim->rows.leastRecentlyUsed());
  }
  rows_charged_ += bytes;
  return true;
}

void ParamStore::evictRow(Table& t, uint32_t slot) {
  const uint64_t bytes = t.rows.rowBytes();
  t.rows.remove(slot);
  if (budget_ != nullptr) budget_->releaseRows(bytes);
  rows_charged_ -= bytes;
  memory_.give(bytes);
  ++t.counts.evicted;
  ++rows_evicted_;
  t.sizes.evicted->inc();
  t.sizes.rows->add(-1);
  t.sizes.bytes->add(-static_cast<double>(bytes));
}

uint32_t ParamStore::createRow(Table& t, uint64_t key, uint64_t tick) {
  // Deterministic: the same (seed, key) gives the same row on any server, whatever the arrival order,
  // and a row evicted and touched again starts over exactly as it first did.
  std::vector<float> values(t.dim);
  kernels::initEmbeddingRow(key, t.init_seed, t.init_scale, values.data(), t.dim);
  std::vector<float> state(t.state_floats * t.dim);
  if (t.state_floats > 0) kernels::initOptimizerState(t.optimizer, state.data(), t.dim);
  ++t.counts.created;
  ++rows_created_;
  if (t.sizes.rows != nullptr) {
    t.sizes.created->inc();
    t.sizes.rows->add(1);
    t.sizes.bytes->add(static_cast<double>(t.rows.rowBytes()));
  }
  return t.rows.add(key, values.data(), state.data(), 0, tick);
}

uint32_t ParamStore::slotOf(const Table& t, uint64_t key) const {
  const uint32_t slot = t.rows.find(key);
  CHECK_NE(slot, RowStore::kNoRow) << "row " << key << " of table '" << t.name << "' was not ensured";
  return slot;
}

void ParamStore::applyRow(Table& t, uint64_t key, const float* grad) {
  const uint32_t slot = slotOf(t, key);
  const uint64_t step = t.rows.nextUpdate(slot);
  if (t.rows.format() == RowFormat::kFloat32) {
    kernels::applyOptimizer(t.optimizer, t.rows.values32() + size_t{slot} * t.dim, t.rows.state(slot), grad, t.dim,
                            step);
    return;
  }
  std::vector<float> row(t.dim);
  t.rows.readValues(slot, row.data());
  kernels::applyOptimizer(t.optimizer, row.data(), t.rows.state(slot), grad, t.dim, step);
  t.rows.writeValues(slot, row.data());
}

Status ParamStore::push(Table& t, int worker, uint32_t local_rank, const wire::DataMessage& msg) {
  const pb::Rows& h = msg.data.rows();
  if (h.row_dim() != t.dim)
    return InvalidArgument("row_dim " + std::to_string(h.row_dim()) + " != the table's " + std::to_string(t.dim));
  if (local_rank >= t.local_size)
    return InvalidArgument("local rank " + std::to_string(local_rank) + " is outside the table's local size " +
                           std::to_string(t.local_size));
  // Exactly once per (worker, local rank, round) or, async, per (worker, local rank, push_seq): each
  // local rank pushes its own rows.
  const size_t pusher = static_cast<size_t>(worker) * t.local_size + local_rank;
  if (t.async) return pushAsync(t, pusher, msg);
  size_t n = h.count();
  // Rows are created when pushed, not when the round is applied, so that a push the server cannot hold
  // is refused before it is acknowledged. Initial values depend only on (seed, key): creating a row
  // early changes nothing.
  if (h.round() > t.completed && h.round() <= t.completed + kMaxRoundsAhead)
    ZPS_RETURN_IF_ERROR(ensureRows(t, keysOf(msg)));
  counters_.bytes_in += n * sizeof(uint64_t) + msg.payload.size();
  counters_.rows_pushed += n;
  if (h.round() <= t.completed) return Status::OK();  // a resend of a push already applied
  if (h.round() > t.completed + kMaxRoundsAhead)
    return FailedPrecondition("push is too far ahead: last applied round is " + std::to_string(t.completed));
  auto& r = t.open[h.round()];
  if (r.pushed.empty()) {
    r.pushed.assign(static_cast<size_t>(pushers(t)), false);
    r.by_pusher.resize(static_cast<size_t>(pushers(t)));
  }
  if (r.pushed[pusher]) return Status::OK();  // a duplicate: acknowledged, not applied twice
  auto& mine = r.by_pusher[pusher];
  mine.keys = keysOf(msg);
  mine.grads.resize(n * t.dim);
  if (n > 0) std::memcpy(mine.grads.data(), msg.payload.data(), n * t.dim * sizeof(float));
  r.pushed[pusher] = true;
  ++r.count;
  return Status::OK();
}

Status ParamStore::pushAsync(Table& t, size_t pusher, const wire::DataMessage& msg) {
  if (t.applied.empty()) {
    const size_t windows = static_cast<size_t>(pushers(t));
    ZPS_RETURN_IF_ERROR(memory_.take(windows * sizeof(SequenceWindow), "async push numbers of table '" + t.name + "'"));
    t.applied.resize(windows);
  }
  SequenceWindow& seen = t.applied[pusher];
  std::string why;
  switch (seen.check(msg.data.rows().push_seq(), &why)) {
    case SequenceWindow::Verdict::kRefused: return FailedPrecondition(why);
    case SequenceWindow::Verdict::kDuplicate: countDuplicateAsyncPush(); return Status::OK();
    case SequenceWindow::Verdict::kApply: break;
  }
  ZPS_RETURN_IF_ERROR(ensureRows(t, keysOf(msg)));
  const size_t n = msg.data.rows().count();
  counters_.bytes_in += n * sizeof(uint64_t) + msg.payload.size();
  counters_.rows_pushed += n;
  // The payload may be unaligned; copy each row out before use.
  std::vector<float> row(t.dim);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(row.data(), msg.payload.data() + i * t.dim * sizeof(float), t.dim * sizeof(float));
    applyRow(t, msg.keyAt(i), row.data());
  }
  seen.applied(msg.data.rows().push_seq());
  return Status::OK();
}

void ParamStore::applyRounds(uint64_t key, Table& t, std::vector<Outgoing>* out) {
  for (;;) {
    auto it = t.open.find(t.completed + 1);
    if (it == t.open.end() || it->second.count < pushers(t)) break;
    // Sum in pusher order, whatever order the pushes arrived in: float sums of more than two pushers
    // depend on their order, and a rerun (or a recovery's redo) must round identically.
    std::unordered_map<uint64_t, std::vector<float>> sums;
    for (const auto& p : it->second.by_pusher) {
      for (size_t i = 0; i < p.keys.size(); ++i) {
        const float* row = p.grads.data() + i * t.dim;
        auto [entry, fresh] = sums.try_emplace(p.keys[i]);
        if (fresh) {
          entry->second.assign(row, row + t.dim);
        } else {
          for (uint32_t j = 0; j < t.dim; ++j) entry->second[j] += row[j];
        }
      }
    }
    // Apply in key order so every run (and every restart) updates rows identically.
    std::vector<const std::pair<const uint64_t, std::vector<float>>*> ordered;
    ordered.reserve(sums.size());
    for (const auto& entry : sums) ordered.push_back(&entry);
    std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
    // Rows evicted since their push are created again (the round was acknowledged: past the budget
    // if nothing else can go).
    std::vector<uint64_t> round_keys;
    round_keys.reserve(ordered.size());
    for (const auto* entry : ordered) round_keys.push_back(entry->first);
    if (Status s = ensureRows(t, round_keys, /*force=*/true); !s.ok()) {
      LOG_FIRST_N(ERROR, 10) << "server " << server_rank_ << ": table '" << t.name << "': " << s.message();
    }
    // One batch per round, so an engine on the GPU updates all of its rows in one pass.
    std::vector<uint32_t> slots;
    std::vector<uint64_t> steps;
    std::vector<float> grads;
    slots.reserve(ordered.size());
    steps.reserve(ordered.size());
    grads.reserve(ordered.size() * t.dim);
    for (const auto* entry : ordered) {
      const uint32_t slot = slotOf(t, entry->first);
      slots.push_back(slot);
      steps.push_back(t.rows.nextUpdate(slot));
      grads.insert(grads.end(), entry->second.begin(), entry->second.end());
    }
    applyBatch(t, slots, steps, grads);
    t.completed = it->first;
    t.open.erase(it);
  }
  serveParked(key, t, out);
}

void ParamStore::applyBatch(Table& t, const std::vector<uint32_t>& slots, const std::vector<uint64_t>& steps,
                            const std::vector<float>& grads) {
  // Float32 rows are updated in place; 16-bit rows are widened into a batch of their own (the state
  // with them, as the kernels index both by slot), updated, and rounded back.
  const bool in_place = t.rows.format() == RowFormat::kFloat32;
  const size_t state_count = t.state_floats * t.dim;
  std::vector<uint32_t> batch_slots;
  std::vector<float> values, state;
  if (!in_place) {
    batch_slots.resize(slots.size());
    values.resize(slots.size() * t.dim);
    state.resize(slots.size() * state_count);
    for (size_t i = 0; i < slots.size(); ++i) {
      batch_slots[i] = static_cast<uint32_t>(i);
      t.rows.readValues(slots[i], values.data() + i * t.dim);
      std::copy_n(t.rows.state(slots[i]), state_count, state.data() + i * state_count);
    }
  }
  const uint32_t* at = in_place ? slots.data() : batch_slots.data();
  float* value_base = in_place ? t.rows.values32() : values.data();
  float* state_base = in_place ? t.rows.stateData() : state.data();
  bool applied = false;
  if (engine_ != nullptr) {
    const Status s =
        engine_->applyRows(t.optimizer, t.dim, slots.size(), at, steps.data(), grads.data(), value_base, state_base);
    // The engine leaves the rows untouched when it fails; the CPU then applies the round.
    if (!s.ok()) {
      LOG_FIRST_N(WARNING, 10) << "server " << server_rank_ << ": table '" << t.name << "': the " << engine_->name()
                               << " engine failed (" << s.message() << "); applying the round on the CPU";
    }
    applied = s.ok();
  }
  if (!applied)
    kernels::applyOptimizerRows(t.optimizer, t.dim, slots.size(), at, steps.data(), grads.data(), value_base,
                                state_base);
  if (in_place) return;
  for (size_t i = 0; i < slots.size(); ++i) {
    t.rows.writeValues(slots[i], values.data() + i * t.dim);
    std::copy_n(state.data() + i * state_count, state_count, t.rows.state(slots[i]));
  }
}

void ParamStore::serveParked(uint64_t /*key*/, Table& t, std::vector<Outgoing>* out) {
  std::vector<Table::Parked> still;
  for (auto& p : t.parked) {
    const uint64_t round = wire::roundOf(p.request);
    if (p.request.has_rows() && round <= t.completed + 1) {
      pullNow(t, p.peer, p.request, p.keys, out);
    } else if (p.request.has_checkpoint() && round <= t.completed) {
      Status s = checkpointRequested(t, round);
      out->push_back(s.ok() ? ack(p.peer, p.request) : errorReply(p.peer, p.request, s.message()));
    } else {
      still.push_back(std::move(p));
    }
  }
  t.parked.swap(still);
}

void ParamStore::pullNow(Table& t, PeerId peer, const pb::Data& request, const std::vector<uint64_t>& keys,
                         std::vector<Outgoing>* out) {
  if (Status s = ensureRows(t, keys); !s.ok()) {
    out->push_back(errorReply(peer, request, s.message()));
    return;
  }
  auto buf = std::make_shared<AlignedBuffer>(keys.size() * t.dim * sizeof(float));
  auto* rows = reinterpret_cast<float*>(buf->data());
  for (size_t i = 0; i < keys.size(); ++i) {
    t.rows.readValues(slotOf(t, keys[i]), rows + i * t.dim);
  }
  counters_.rows_pulled += keys.size();
  counters_.bytes_out += buf->size();
  Outgoing o = ack(peer, request);
  o.data.mutable_reply()->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  o.data.mutable_reply()->set_num_elements(keys.size() * t.dim);
  o.payload = Blob::fromBuffer(std::move(buf));
  out->push_back(std::move(o));
}

}  // namespace zps
