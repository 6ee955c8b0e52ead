// SumStore: the BytePS-style summation service for the keys of one engine thread. For every key and
// round it sums exactly one push per worker, then answers that round's pulls with the sum. Pure logic:
// no sockets, no threads. It is owned and called by exactly one server engine thread; keys are sharded
// across engine threads, so no key is ever touched by two threads.
//
// Rounds: a key's rounds complete in order. Pushes may run ahead of the last completed round by up to
// kMaxRoundsAhead (a worker may push round r+1 while others still pull round r); the results of the
// last kKeptResults rounds stay available to pull. Each worker counts once per round: a repeated push is
// acknowledged but not summed again. A round's pushes are added in worker-rank order, whatever order
// they arrive in: a push that comes before a lower rank's waits (its receive buffer held, not copied)
// until every rank below it is in, so a sum is bit-identical from rerun to rerun for any number of
// workers (float addition is not associative). A result goes earlier once every worker has said, in a request's
// received_through, that it has that round's replies and will not ask again: then no honest request can
// need it, and a key holds about one result and one open round instead of kKeptResults + 1.
//
// Push hints: a PUSH that sets wants_awaited (a worker with priority scheduling) is answered with the
// open rounds of this store's keys that wait for that worker alone: every other worker has pushed
// them (lowest key first, at most wire::kMaxAwaitedRounds), so that it sends those next
// (worker/scheduling/push_scheduler.h). Only with three workers or more: then the others agree on an order.
//
// Process sets: a key declared with `contributors` below the number of workers completes a round
// with that many pushes (whichever workers the members are); they are held until the last one comes,
// then added in rank order, so such a sum is as reproducible as any other. With several processes per
// worker node (ZPS_LOCAL_SIZE) a set's key is declared with the node's local size: each member process
// pushes the whole tensor on its own, so the key counts pushers, worker x local size + local rank (the
// rank of the process in the job), and its sum is added in that order.
//
// Async keys (BytePS async, declared with async=true) have no rounds: the key holds one running sum, each
// push is added to it at once, and a pull returns a snapshot of it at once. Workers use them to hold
// parameters: worker 0 pushes the initial weights, and every worker pushes its own weight deltas. Each
// push is added exactly once: it carries the worker's number for it (push_seq), and a number the key's
// SequenceWindow for that worker has seen is acknowledged (a push-pull answered) without adding it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/reducer.h"
#include "ps/common/blob.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "server/memory_budget.h"
#include "server/replies.h"
#include "server/sequence_window.h"
#include "server/sum_buffers.h"

namespace zps {

class SumStore {
 public:
  static constexpr uint64_t kMaxRoundsAhead = 2;
  // A worker may push kMaxRoundsAhead rounds past a round it has not pulled yet, so keep one more.
  static constexpr size_t kKeptResults = kMaxRoundsAhead + 1;
  // Idle sum buffers a key keeps for its next rounds (SumBuffers): the steady state takes one and
  // frees one per round.
  static constexpr size_t kIdleSumBuffers = 1;

  // `budget` (may be null) is charged for every key declared: the most buffers the key can hold at once.
  // `counts` (may be null; it outlives the store) counts what this store takes in and adds.
  // skip_zeros: a completed float32 round is kept, and answered, nonzero-encoded where that saves
  // enough (ZPS_SKIP_ZEROS; kernels/nonzero_encoding.h).
  SumStore(int num_workers, kernels::Reducer* reducer, MemoryBudget* budget = nullptr, SumCounts* counts = nullptr,
           bool skip_zeros = false)
      : num_workers_(num_workers), reducer_(reducer), memory_(budget), counts_(counts), skip_zeros_(skip_zeros) {}
  // Open rounds the reducer still holds are discarded there (the reducer outlives its stores).
  ~SumStore();
  SumStore(const SumStore&) = delete;
  SumStore& operator=(const SumStore&) = delete;

  // Handles a DECLARE, PUSH, PULL or PUSH_PULL from `worker` (a validated rank) and appends the replies
  // to send, now or for parked pulls of other workers, to *out. A push's payload must be this store's
  // alone (a received frame, or a copy): the first push of a round becomes the sum in place.
  // `local_rank`: the local rank of the worker's HELLO, which tells apart the pushers of a process
  // set's key with local ranks (other keys have one pusher per worker node).
  void handle(PeerId peer, int worker, const wire::DataMessage& msg, std::vector<Outgoing>* out,
              uint32_t local_rank = 0);

  size_t numKeys() const { return keys_.size(); }

 private:
  struct OpenRound {
    // Worker 0's receive buffer, adopted as the sum: no staging copy. Only this store references
    // it (the transport handed the frame over), so adding into it in place is safe.
    Blob sum;
    std::vector<bool> pushed;
    int count = 0;   // pushes received
    int summed = 0;  // ranks [0, summed) are in `sum`
    // Pushes of ranks above `summed` that came early, by rank; each is added (and let go) in turn.
    std::vector<wire::DataMessage> waiting;
    bool on_engine = false;  // the engine holds the sum (start/add) until collect() fills `sum`
    // A push of the round came without its zeros: only then may the sum have enough to leave out (a
    // sum has zeros where every push has, and a push that had too few came dense).
    bool zeros_left_out = false;
  };
  struct ParkedPull {
    PeerId peer;
    pb::Data request;  // a pull or push-pull of a sum key (a Tensor)
    uint64_t round() const { return request.tensor().round(); }
  };
  // A completed round's sum, as it is answered: dense, or nonzero-encoded (then the dense buffer is
  // let go, so a kept result never takes more memory than a dense one).
  struct Result {
    uint64_t round = 0;
    Blob payload;
    pb::PayloadEncoding encoding = pb::ENCODING_DENSE;
    uint64_t nonzero = 0;  // ENCODING_NONZERO: the elements that travel
  };
  struct KeyState {
    std::string name;
    DType dtype;
    uint64_t num_elements;
    size_t bytes;
    uint64_t completed = 0;  // last completed round (rounds start at 1)
    std::map<uint64_t, OpenRound> open;
    std::deque<Result> results;      // sent to pullers without copying
    std::vector<uint64_t> received;  // per pusher: the newest received_through it sent (<= completed)
    std::vector<ParkedPull> parked;
    bool async = false;
    // Workers that push each round: num_workers_ for a key of every worker, fewer for a process
    // set's key. Then a round's pushes wait until all of them are in and are added in rank order.
    int contributors = 0;
    // Processes per worker node that push this key each on their own: 1 for every key but a process
    // set's with local ranks. A round then has num_workers_ x local_size pushers.
    int local_size = 1;
    std::shared_ptr<SumBuffers> sums;        // sync keys: the rounds' sum buffers, reused
    std::shared_ptr<AlignedBuffer> running;  // async keys: the running sum
    std::vector<SequenceWindow> applied;     // async keys: per worker, the pushes already added
  };

  // How many workers push each round of the key a DECLARE declares (0 on the wire: all of them).
  int contributorsOf(const pb::Declare& d) const {
    return d.contributors() == 0 ? num_workers_ : static_cast<int>(d.contributors());
  }
  int pushers(const KeyState& k) const { return num_workers_ * k.local_size; }
  // The index of a push's sender among the key's pushers; an error for a local rank outside its local size.
  StatusOr<int> pusherOf(const KeyState& k, int worker, uint32_t local_rank) const;
  Status declare(const wire::DataMessage& msg);
  // `pusher`: pusherOf the push's sender.
  Status push(KeyState& k, int pusher, const wire::DataMessage& msg);
  // Adds the push of rank r.summed into the round's sum (the first one becomes it).
  Status addNextRank(const KeyState& k, OpenRound& r, const wire::DataMessage& msg);
  // An async key's push (added once per push_seq), pull or push-pull.
  void handleAsync(KeyState& k, PeerId peer, int worker, const wire::DataMessage& msg, std::vector<Outgoing>* out);
  Status pushAsync(KeyState& k, const wire::DataMessage& msg);
  // Adds a push's payload (dense or compressed) into `sum`, which the round's first push overwrites.
  Status addPush(const KeyState& k, uint8_t* sum, bool first, const wire::DataMessage& msg);
  // dst += src with the reducer, timed into counts_ when it asks for that.
  Status reduce(uint8_t* dst, const uint8_t* src, const KeyState& k);
  // A round's push with an engine that holds rounds (Reducer::holdsRounds).
  Status addRoundPush(const KeyState& k, OpenRound& r, const wire::DataMessage& msg);
  Outgoing snapshot(KeyState& k, PeerId peer, const pb::Data& request);
  // The Reply to a pull or push-pull of key k carrying `sum` (a round's result or a snapshot).
  Outgoing sumReply(const KeyState& k, PeerId peer, const pb::Data& request, Blob sum) const;
  Outgoing resultReply(const KeyState& k, PeerId peer, const pb::Data& request, const Result& result) const;
  // A completed round's sum as it will be kept and answered.
  Result keptResult(const KeyState& k, uint64_t round, Blob sum, bool zeros_left_out) const;
  // Answers a pull now if its round is done, parks it otherwise.
  Status pull(KeyState& k, PeerId peer, const pb::Data& request, std::vector<Outgoing>* out);
  void completeReadyRounds(KeyState& k, std::vector<Outgoing>* out);
  // Records a pusher's received_through and frees the results no request can ask for any more.
  void noteReceived(KeyState& k, int pusher, uint64_t received_through);
  void forgetResults(KeyState& k);
  // Names in a push's reply the open rounds that wait for `worker` alone (push hints).
  void nameAwaited(int worker, uint32_t local_rank, pb::Reply* reply);

  const int num_workers_;
  kernels::Reducer* reducer_;
  std::unordered_map<uint64_t, KeyState> keys_;
  // Keys that took a push and may still have a round open, in key order: where nameAwaited looks (a
  // key leaves when it is found with no open round), so a reply costs the open rounds, not every key.
  std::set<uint64_t> pushed_keys_;
  bool hints_asked_ = false;  // a push asked for hints in a job of three workers or more: keep pushed_keys_
  MemoryCharge memory_;
  SumCounts* const counts_;
  const bool skip_zeros_;
};

}  // namespace zps
