#include "server/sum_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/compressor.h"
#include "kernels/nonzero_encoding.h"
#include "ps/common/config.h"

namespace zps {
namespace {

Outgoing notServed(PeerId peer, const pb::Data& request) {
  return errorReply(peer, request, "command " + pb::DataCommand_Name(wire::commandOf(request)) + " is not served here");
}

}  // namespace

SumStore::~SumStore() {
  for (auto& [key, k] : keys_) {
    for (auto& [round, r] : k.open) {
      if (r.on_engine) reducer_->discard(const_cast<uint8_t*>(r.sum.data()));
    }
  }
}

StatusOr<int> SumStore::pusherOf(const KeyState& k, int worker, uint32_t local_rank) const {
  if (k.local_size == 1) return worker;  // local ranks push pieces of their own: one pusher per node
  if (local_rank >= static_cast<uint32_t>(k.local_size))
    return InvalidArgument("local rank " + std::to_string(local_rank) + " is outside the key's local size " +
                           std::to_string(k.local_size));
  return worker * k.local_size + static_cast<int>(local_rank);
}

void SumStore::handle(PeerId peer, int worker, const wire::DataMessage& msg, std::vector<Outgoing>* out,
                      uint32_t local_rank) {
  const pb::Data& request = msg.data;
  if (request.has_declare()) {
    Status s = declare(msg);
    out->push_back(s.ok() ? replyTo(peer, request) : errorReply(peer, request, s.message()));
    return;
  }
  if (!request.has_tensor()) {
    out->push_back(notServed(peer, request));
    return;
  }
  const pb::Tensor& t = request.tensor();
  std::string where = "key " + std::to_string(t.key()) + " round " + std::to_string(t.round());
  auto it = keys_.find(t.key());
  if (it == keys_.end()) {
    out->push_back(errorReply(peer, request, "key " + std::to_string(t.key()) + " was never declared"));
    return;
  }
  KeyState& k = it->second;
  if (k.async) {
    handleAsync(k, peer, worker, msg, out);
    return;
  }
  StatusOr<int> pusher = pusherOf(k, worker, local_rank);
  if (!pusher.ok()) {
    out->push_back(errorReply(peer, request, pusher.status().withContext(where + " of '" + k.name + "'").message()));
    return;
  }
  noteReceived(k, *pusher, t.received_through());
  if (t.op() == pb::OP_PUSH || t.op() == pb::OP_PUSH_PULL) {
    Status s = push(k, *pusher, msg);
    if (!s.ok()) {
      out->push_back(errorReply(peer, request, s.withContext(where + " of '" + k.name + "'").message()));
      return;
    }
    // With two workers "every other worker" is one peer, whose order is no better than this one's:
    // following it measured slower (docs/performance.md), so hints need at least three.
    const bool asks_hints = t.wants_awaited() && num_workers_ >= 3;
    // Only push hints read the set: a job whose pushes never ask for them (no priority scheduling,
    // ZPS_PUSH_HINTS=0, fewer than three workers) pays nothing for it. A key pushed before the first
    // push that asks is missed until its next round: hints are advice, never needed for a sum.
    hints_asked_ = hints_asked_ || asks_hints;
    if (hints_asked_) pushed_keys_.insert(t.key());
    if (t.op() == pb::OP_PUSH) {
      out->push_back(replyTo(peer, request));
      if (asks_hints) nameAwaited(worker, local_rank, out->back().data.mutable_reply());
    }
    completeReadyRounds(k, out);
    if (t.op() == pb::OP_PUSH) return;
  }
  if (t.op() == pb::OP_PULL || t.op() == pb::OP_PUSH_PULL) {
    Status s = pull(k, peer, request, out);
    if (!s.ok()) out->push_back(errorReply(peer, request, s.withContext(where + " of '" + k.name + "'").message()));
    return;
  }
  out->push_back(notServed(peer, request));
}

Status SumStore::declare(const wire::DataMessage& msg) {
  const pb::Declare& h = msg.data.declare();
  if (h.mode() != pb::MODE_SUM)
    return InvalidArgument("key mode " + pb::KeyMode_Name(h.mode()) + " is not supported yet");
  if (h.num_elements() == 0) return InvalidArgument("key " + std::to_string(h.key()) + " declared with 0 elements");
  // Only a process set's key (contributors set) has pushers of its own per local rank.
  const uint32_t local_size = std::max<uint32_t>(h.local_size(), 1);
  if (local_size > static_cast<uint32_t>(kMaxLocalSize) || (local_size > 1 && h.contributors() == 0))
    return InvalidArgument("key " + std::to_string(h.key()) + " declared with local size " +
                           std::to_string(h.local_size()) + "; 1 to " + std::to_string(kMaxLocalSize) +
                           ", above 1 for a process set's key (with contributors) only");
  const uint64_t max_contributors = static_cast<uint64_t>(num_workers_) * local_size;
  if (h.contributors() > max_contributors || (h.contributors() != 0 && h.async()))
    return InvalidArgument("key " + std::to_string(h.key()) + " declared with " + std::to_string(h.contributors()) +
                           " contributors" + (h.async() ? " and async" : "") + "; a job of " +
                           std::to_string(num_workers_) + " workers x " + std::to_string(local_size) +
                           " local ranks takes 0 (all) to " + std::to_string(max_contributors) +
                           ", for sync keys only");
  auto it = keys_.find(h.key());
  if (it != keys_.end()) {
    const KeyState& k = it->second;
    const bool same_pushers = k.contributors == contributorsOf(h) && k.local_size == static_cast<int>(local_size);
    if (k.dtype != msg.dtype || k.num_elements != h.num_elements() || k.name != h.name() || k.async != h.async() ||
        !same_pushers) {
      // Process sets' keys: who pushes them, as this worker says and as declared.
      const std::string pushers = same_pushers
                                      ? ""
                                      : " for " + std::to_string(contributorsOf(h)) + " contributors x local size " +
                                            std::to_string(local_size) + " (declared for " +
                                            std::to_string(k.contributors) + " x " + std::to_string(k.local_size) + ")";
      return InvalidArgument("key " + std::to_string(h.key()) + " was declared as '" + k.name + "' (" +
                             std::to_string(k.num_elements) + " x " + std::string(dtypeName(k.dtype)) +
                             ") but this worker declares '" + h.name() + "' (" + std::to_string(h.num_elements()) +
                             " x " + std::string(dtypeName(msg.dtype)) + ")" + pushers +
                             "; every worker must declare the same tensors in the same order");
    }
    return Status::OK();
  }
  // Sync keys hold up to kMaxRoundsAhead open rounds (a sum and the pushes waiting for their turn: one
  // buffer per pusher at most) and kKeptResults results; async keys a running sum and a snapshot being
  // sent. 256 bytes stand for the bookkeeping.
  uint64_t bytes = h.num_elements() * dtypeSize(msg.dtype);
  const uint64_t buffers = h.async() ? 2 : kMaxRoundsAhead * max_contributors + kKeptResults;
  const uint64_t windows = h.async() ? sizeof(SequenceWindow) * static_cast<uint64_t>(num_workers_) : 0;
  ZPS_RETURN_IF_ERROR(
      memory_.take(bytes * buffers + windows + 256, "key " + std::to_string(h.key()) + " of '" + h.name() + "'"));
  KeyState k;
  k.name = h.name();
  k.dtype = msg.dtype;
  k.num_elements = h.num_elements();
  k.bytes = static_cast<size_t>(h.num_elements() * dtypeSize(msg.dtype));  // bounded by the codec's payload limit
  k.async = h.async();
  k.contributors = contributorsOf(h);
  k.local_size = static_cast<int>(local_size);
  k.sums = SumBuffers::create(k.bytes, kIdleSumBuffers);
  if (k.async) k.applied.resize(num_workers_);
  k.received.assign(static_cast<size_t>(pushers(k)), 0);
  keys_.emplace(h.key(), std::move(k));
  return Status::OK();
}

void SumStore::handleAsync(KeyState& k, PeerId peer, int worker, const wire::DataMessage& msg,
                           std::vector<Outgoing>* out) {
  const pb::Data& request = msg.data;
  const pb::Tensor& h = request.tensor();
  if (h.op() == pb::OP_PUSH || h.op() == pb::OP_PUSH_PULL) {
    SequenceWindow& seen = k.applied[worker];
    std::string why;
    const SequenceWindow::Verdict verdict = seen.check(h.push_seq(), &why);
    Status s = verdict == SequenceWindow::Verdict::kRefused ? FailedPrecondition(why)
               : verdict == SequenceWindow::Verdict::kApply ? pushAsync(k, msg)
                                                            : Status::OK();
    if (!s.ok()) {
      out->push_back(errorReply(peer, request,
                                s.withContext("key " + std::to_string(h.key()) + " of '" + k.name + "'").message()));
      return;
    }
    if (verdict == SequenceWindow::Verdict::kApply)
      seen.applied(h.push_seq());
    else
      countDuplicateAsyncPush();
    if (h.op() == pb::OP_PUSH) out->push_back(replyTo(peer, request));
  }
  if (h.op() == pb::OP_PULL || h.op() == pb::OP_PUSH_PULL) out->push_back(snapshot(k, peer, request));
}

Status SumStore::pushAsync(KeyState& k, const wire::DataMessage& msg) {
  const pb::Tensor& h = msg.data.tensor();
  if (msg.dtype != k.dtype || h.num_elements() != k.num_elements)
    return InvalidArgument("push of " + std::to_string(h.num_elements()) + " x " + std::string(dtypeName(msg.dtype)) +
                           " does not match the declared " + std::to_string(k.num_elements) + " x " +
                           std::string(dtypeName(k.dtype)));
  const bool first = !k.running;
  if (first) k.running = std::make_shared<AlignedBuffer>(k.bytes);
  return addPush(k, k.running->data(), first, msg);
}

Status SumStore::reduce(uint8_t* dst, const uint8_t* src, const KeyState& k) {
  if (counts_ == nullptr || !counts_->timed.load(std::memory_order_relaxed))
    return reducer_->sum(dst, src, k.num_elements, k.dtype);
  const auto start = std::chrono::steady_clock::now();
  Status s = reducer_->sum(dst, src, k.num_elements, k.dtype);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  // Only this engine's thread writes its counts: a load and a store, no read-modify-write across cores.
  counts_->sum_ns.store(counts_->sum_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(ns.count()),
                        std::memory_order_relaxed);
  counts_->summed_bytes.store(counts_->summed_bytes.load(std::memory_order_relaxed) + k.bytes,
                              std::memory_order_relaxed);
  return s;
}

Status SumStore::addPush(const KeyState& k, uint8_t* sum, bool first, const wire::DataMessage& msg) {
  auto* dst = reinterpret_cast<float*>(sum);  // compressed payloads exist for float32 keys only (codec)
  switch (msg.data.tensor().encoding()) {
    case pb::ENCODING_FP16: kernels::addFp16(dst, msg.payload.data(), k.num_elements, first); return Status::OK();
    case pb::ENCODING_SPARSE:
      kernels::addSparse(dst, k.num_elements, msg.payload.data(), msg.data.tensor().sparse_count(), first);
      return Status::OK();
    case pb::ENCODING_NONZERO: kernels::addNonzero(dst, k.num_elements, msg.payload.data(), first); return Status::OK();
    default:
      if (!first) return reduce(sum, msg.payload.data(), k);
      std::memcpy(sum, msg.payload.data(), k.bytes);
      return Status::OK();
  }
}

Status SumStore::addRoundPush(const KeyState& k, OpenRound& r, const wire::DataMessage& msg) {
  const bool first = r.summed == 0;
  auto* sum = const_cast<uint8_t*>(r.sum.data());  // this store's own buffer
  // Dense pushes go through the engine's start/add. Compressed ones are decoded on the CPU into the
  // host buffer, so a sum the engine holds is brought home first (workers normally all compress a
  // key alike, so this is rare).
  if (msg.data.tensor().encoding() == pb::ENCODING_DENSE && (first || r.on_engine)) {
    r.on_engine = true;
    if (first) return reducer_->start(sum, msg.payload.data(), k.num_elements, k.dtype);
    return reducer_->add(sum, msg.payload.data(), k.num_elements, k.dtype);
  }
  if (r.on_engine) {
    r.on_engine = false;
    ZPS_RETURN_IF_ERROR(reducer_->collect(sum));
  }
  return addPush(k, sum, first, msg);
}

Outgoing SumStore::snapshot(KeyState& k, PeerId peer, const pb::Data& request) {
  // A copy: the running sum keeps changing while ZeroMQ sends the reply without copying.
  auto copy = std::make_shared<AlignedBuffer>(k.bytes);
  if (k.running)
    std::memcpy(copy->data(), k.running->data(), k.bytes);
  else
    std::memset(copy->data(), 0, k.bytes);
  return sumReply(k, peer, request, Blob::fromBuffer(std::move(copy)));
}

Outgoing SumStore::sumReply(const KeyState& k, PeerId peer, const pb::Data& request, Blob sum) const {
  Outgoing o = replyTo(peer, request);
  o.data.mutable_reply()->set_num_elements(k.num_elements);
  o.data.mutable_reply()->set_dtype(static_cast<uint32_t>(k.dtype));
  o.payload = std::move(sum);
  return o;
}

Outgoing SumStore::resultReply(const KeyState& k, PeerId peer, const pb::Data& request, const Result& result) const {
  Outgoing o = sumReply(k, peer, request, result.payload);
  if (result.encoding != pb::ENCODING_DENSE) {
    o.data.mutable_reply()->set_encoding(result.encoding);
    o.data.mutable_reply()->set_sparse_count(result.nonzero);
  }
  return o;
}

SumStore::Result SumStore::keptResult(const KeyState& k, uint64_t round, Blob sum, bool zeros_left_out) const {
  if (skip_zeros_ && zeros_left_out && k.dtype == DType::kFloat32) {
    const uint64_t nonzero = kernels::countNonzero(sum.data(), k.num_elements);
    if (kernels::nonzeroWorthIt(k.num_elements, nonzero)) {
      auto encoded = std::make_shared<AlignedBuffer>(kernels::nonzeroEncodedBytes(k.num_elements, nonzero));
      kernels::encodeNonzero(sum.data(), k.num_elements, encoded->data());
      return Result{round, Blob::fromBuffer(std::move(encoded)), pb::ENCODING_NONZERO, nonzero};
    }
  }
  return Result{round, std::move(sum)};
}

Status SumStore::push(KeyState& k, int pusher, const wire::DataMessage& msg) {
  const pb::Tensor& h = msg.data.tensor();
  if (msg.dtype != k.dtype || h.num_elements() != k.num_elements)
    return InvalidArgument("push of " + std::to_string(h.num_elements()) + " x " + std::string(dtypeName(msg.dtype)) +
                           " does not match the declared " + std::to_string(k.num_elements) + " x " +
                           std::string(dtypeName(k.dtype)));
  if (h.round() == 0) return InvalidArgument("rounds start at 1");
  if (h.round() <= k.completed) {
    // Every worker pushed a completed round, so this is a resend or a duplicate: acknowledge it (a
    // PUSH_PULL then gets the kept result) without summing. Rounds no longer kept are refused.
    for (const Result& kept : k.results)
      if (kept.round == h.round()) return Status::OK();
    return FailedPrecondition("push for round " + std::to_string(h.round()) +
                              ", which finished long ago (last completed round " + std::to_string(k.completed) + ")");
  }
  if (h.round() > k.completed + kMaxRoundsAhead)
    return FailedPrecondition("push is too far ahead: last completed round is " + std::to_string(k.completed));
  OpenRound& r = k.open[h.round()];
  const int all = pushers(k);
  if (r.pushed.empty()) {
    r.pushed.assign(all, false);
    r.waiting.resize(all);
  }
  if (r.pushed[pusher]) return Status::OK();  // a duplicate: acknowledged, not summed twice
  if (counts_ != nullptr)
    counts_->pushed_bytes.store(counts_->pushed_bytes.load(std::memory_order_relaxed) + msg.payload.size(),
                                std::memory_order_relaxed);
  if (k.contributors < all) {
    // A process set's key: which ranks push is not known here, so all pushes wait for the last one.
    if (r.count >= k.contributors)
      return FailedPrecondition("round " + std::to_string(h.round()) + " has all its " +
                                std::to_string(k.contributors) + " contributors already");
    r.waiting[pusher] = msg;
    r.pushed[pusher] = true;
    if (++r.count < k.contributors) return Status::OK();
    for (int rank = 0; rank < all; ++rank) {
      if (!r.pushed[rank]) continue;
      ZPS_RETURN_IF_ERROR(addNextRank(k, r, r.waiting[rank]));
      r.waiting[rank] = wire::DataMessage{};
    }
    return Status::OK();
  }
  if (pusher != r.summed) {
    r.waiting[pusher] = msg;  // a lower rank is still missing: this push waits for its turn
  } else {
    ZPS_RETURN_IF_ERROR(addNextRank(k, r, msg));
    // The ranks that came early and are next in line.
    while (r.summed < all && r.pushed[r.summed]) {
      const int rank = r.summed;
      ZPS_RETURN_IF_ERROR(addNextRank(k, r, r.waiting[rank]));
      r.waiting[rank] = wire::DataMessage{};  // its receive buffer goes back now
    }
  }
  r.pushed[pusher] = true;
  r.zeros_left_out |= h.encoding() == pb::ENCODING_NONZERO;
  ++r.count;
  return Status::OK();
}

Status SumStore::addNextRank(const KeyState& k, OpenRound& r, const wire::DataMessage& msg) {
  const bool first = r.summed == 0;
  if (reducer_->holdsRounds()) {
    // The engine keeps the sum (on its device) until collect() writes it into this buffer.
    if (first) r.sum = Blob::fromBuffer(k.sums->take());
    ZPS_RETURN_IF_ERROR(addRoundPush(k, r, msg));
  } else if (first && msg.data.tensor().encoding() == pb::ENCODING_DENSE) {
    // Adopted: the sum starts as worker 0's receive buffer. In shared memory that is worker 0's arena
    // slot, held while the result is kept (its next pushes may then find the arena full and go through
    // the socket); copying it instead put a second copy of every kept result in the server's memory.
    r.sum = msg.payload;
  } else {
    if (first) r.sum = Blob::fromBuffer(k.sums->take());  // decoded into
    ZPS_RETURN_IF_ERROR(addPush(k, const_cast<uint8_t*>(r.sum.data()), first, msg));
  }
  ++r.summed;
  return Status::OK();
}

void SumStore::completeReadyRounds(KeyState& k, std::vector<Outgoing>* out) {
  for (;;) {
    auto it = k.open.find(k.completed + 1);
    if (it == k.open.end() || it->second.count < k.contributors) return;
    k.completed = it->first;
    // The engine may still hold the sum on its device: bring it home before anyone reads it.
    const Status collected =
        it->second.on_engine ? reducer_->collect(const_cast<uint8_t*>(it->second.sum.data())) : Status::OK();
    if (!collected.ok()) {
      // The round is lost (its sum is unknown); its pulls get the reason, later ones "not kept".
      const std::string why = "the " + std::string(reducer_->name()) + " engine failed to produce round " +
                              std::to_string(it->first) + ": " + collected.message();
      std::vector<ParkedPull> still;
      for (auto& p : k.parked) {
        if (p.round() != it->first) {
          still.push_back(std::move(p));
          continue;
        }
        out->push_back(errorReply(p.peer, p.request, why));
      }
      k.parked.swap(still);
      k.open.erase(it);
      continue;
    }
    k.results.push_back(keptResult(k, it->first, std::move(it->second.sum), it->second.zeros_left_out));
    k.open.erase(it);
    forgetResults(k);  // never this round: no worker can have said it received it before now
    const Result& done = k.results.back();
    std::vector<ParkedPull> still;
    for (auto& p : k.parked) {
      if (p.round() != done.round) {
        still.push_back(std::move(p));
        continue;
      }
      out->push_back(resultReply(k, p.peer, p.request, done));
    }
    k.parked.swap(still);
  }
}

void SumStore::nameAwaited(int worker, uint32_t local_rank, pb::Reply* reply) {
  for (auto it = pushed_keys_.begin(); it != pushed_keys_.end() && reply->awaited_size() < wire::kMaxAwaitedRounds;) {
    auto key = keys_.find(*it);
    if (key == keys_.end() || key->second.open.empty()) {
      it = pushed_keys_.erase(it);  // every round it had open has completed
      continue;
    }
    StatusOr<int> pusher = pusherOf(key->second, worker, local_rank);
    for (const auto& [round, r] : key->second.open) {
      if (!pusher.ok() || r.count < key->second.contributors - 1 || r.pushed[*pusher] ||
          reply->awaited_size() >= wire::kMaxAwaitedRounds)
        continue;
      pb::AwaitedRound* awaited = reply->add_awaited();
      awaited->set_key(*it);
      awaited->set_round(round);
    }
    ++it;
  }
}

void SumStore::noteReceived(KeyState& k, int pusher, uint64_t received_through) {
  // A worker cannot have received a round that has not completed; a larger value (a bug or a hostile
  // peer) must not free results that do not exist yet, so it counts only up to the completed round.
  const uint64_t through = std::min(received_through, k.completed);
  if (through <= k.received[pusher]) return;
  k.received[pusher] = through;
  forgetResults(k);
}

void SumStore::forgetResults(KeyState& k) {
  const uint64_t everyone = *std::min_element(k.received.begin(), k.received.end());
  while (!k.results.empty() && (k.results.size() > kKeptResults || k.results.front().round <= everyone))
    k.results.pop_front();
}

Status SumStore::pull(KeyState& k, PeerId peer, const pb::Data& request, std::vector<Outgoing>* out) {
  const pb::Tensor& h = request.tensor();
  if (h.round() == 0) return InvalidArgument("rounds start at 1");
  if (h.round() > k.completed + kMaxRoundsAhead)
    return FailedPrecondition("pull is too far ahead: last completed round is " + std::to_string(k.completed));
  if (h.round() <= k.completed) {
    for (const Result& kept : k.results) {
      if (kept.round != h.round()) continue;
      out->push_back(resultReply(k, peer, request, kept));
      return Status::OK();
    }
    return FailedPrecondition("the result of this round is no longer kept (last completed round " +
                              std::to_string(k.completed) + ")");
  }
  // A resent pull that is already parked gets one answer, not two.
  for (const auto& p : k.parked)
    if (p.peer == peer && p.request.request_id() == request.request_id()) return Status::OK();
  // Honest workers park at most one pull per round each; a bound keeps a misbehaving one from growing it.
  if (k.parked.size() >= static_cast<size_t>(pushers(k)) * (kMaxRoundsAhead + 1) * 2)
    return FailedPrecondition("too many pulls waiting on this key");
  k.parked.push_back(ParkedPull{peer, request});
  return Status::OK();
}

}  // namespace zps
