// The server role's one object (server/server.h runs it), private to the server room. Threads:
//  - the transport's I/O thread moves bytes and dispatches: it decodes each message, checks who sent it
//    (HELLO binds a connection to a worker rank) and hands it to the engine thread that owns its key;
//  - ZPS_SERVER_ENGINE_THREADS engine threads each own a SumStore for key % threads and send replies;
//    summation keys of at most kInlineBytes (256 KiB) are summed by the dispatcher itself (the inline
//    engine);
//  - the SchedulerClient's thread handles heartbeats and the end of the job.
//
// server.cc holds its life, dispatch and engines; server_sessions.cc how workers connect (HELLO, the
// move to ipc, push lanes).
#pragma once

#include <glog/logging.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kernels/reducer.h"
#include "kernels/reducer_factory.h"
#include "ps/common/bounded_queue.h"
#include "ps/common/checkpoint_dir.h"
#include "ps/common/process_stats.h"
#include "ps/node/auth.h"
#include "ps/node/job_layout.h"
#include "ps/node/metrics.h"
#include "ps/node/scheduler_client.h"
#include "ps/node/signals.h"
#include "ps/wire/codec.h"
#include "server/engine.h"
#include "server/fused_messages.h"
#include "server/param_store.h"
#include "server/scheduling/push_pacer.h"
#include "server/sequence_window.h"
#include "server/server_observer.h"
#include "server/sessions.h"
#include "server/sum_store.h"

namespace zps::server_role {

using Clock = std::chrono::steady_clock;

// The setting's choices are checked where it is read; anything else holds float32 rows.
inline RowFormat rowFormatOf(const std::string& name) {
  auto format = rowFormatFromName(name);
  return format.ok() ? *format : RowFormat::kFloat32;
}

// Replies queued for one connection whose peer does not read them (a stranger on an open job that
// sends requests and never reads, say); past it, more are dropped, counted and logged. A worker's
// I/O thread reads its replies as they come, and there is at most one reply per request in flight:
// a fan-out of thousands of requests (fusion packs small ones into one message) stays an order of
// magnitude below, even if none were read. (A dropped reply would be waited for until
// ZPS_RESEND_TIMEOUT resends it, or ZPS_REQUEST_TIMEOUT.) A stranger's queued error replies cost
// about 10 MiB per connection (measured: test `memory attack: an open job's server bounds...`).
constexpr int kMaxQueuedRepliesPerConnection = 65536;

class Server {
 public:
  Server(const Config& config, Authenticator auth);

  // One reducer per engine thread, plus the last one for the inline engine.
  Status makeReducers(kernels::ReducerKind kind, std::vector<std::unique_ptr<kernels::Reducer>>* reducers);

  int run();

 private:
  void dispatch(TransportMessage msg);

  // A message the codec refused. A worker that sent a bad request (a bad compressed payload, say)
  // learns why instead of timing out; strangers get nothing (answering them would make the server an
  // amplifier), except that a HELLO of protocol version 1 hears, in its own framing, why it is refused.
  void refused(PeerId peer, const pb::Data& rejected, const Status& why);

  // Work of another generation (ZPS_RECOVERY): the worker rolls back when it hears this. A fused
  // message's entries are answered each.
  void refuseGeneration(PeerId peer, const wire::DataMessage& data);

  // A request a store answers: summed inline when small, else queued to the engine that owns its key.
  void toEngine(PeerId peer, int worker, wire::DataMessage data);

  // A fused message: each entry is handled as the request it stands for, by the inline engine (entries
  // are summation keys of at most kInlineBytes; a larger one is refused with an answer of its own), in
  // order, and the answers to the sender go back fused (server/fused_messages.h).
  void dispatchFused(PeerId peer, int worker, wire::DataMessage& fused);

  // ZPS_RECOVERY: a node was lost. Everything of the old generation goes: the workers' connections
  // (they say HELLO again) and every key and table (they declare them again, tables restored from the
  // latest checkpoint). Each engine drops its stores after the requests already queued to it.
  void startGeneration(uint64_t generation);

  // Summation keys of at most kInlineBytes are summed by the dispatcher itself: for them a hand-off to
  // an engine thread and back (two thread wake-ups, 20-60 us on loopback) costs more than the work (a
  // 256 KiB float32 sum is about 30 us on one core). A key's size is fixed by its DECLARE (the store
  // refuses other sizes), so every message of a key goes the same way and one thread owns each key.
  static constexpr uint64_t kInlineBytes = 256 << 10;
  static bool runsInline(const wire::DataMessage& m);
  // A scheduled push whose acknowledgement returns push credit (server/scheduling/push_pacer.h).
  static bool holdsCredit(const wire::DataMessage& m);

  // A credit-holding push arrived: the pacer counts it, and sends the acknowledgements it then releases.
  void pace(PeerId peer, int worker, const wire::DataMessage& push);

  void reply(PeerId peer, Outgoing o);
  void sendAll(std::vector<Outgoing> out);
  // Acknowledgements held past the pacer's deadline leave (server/scheduling/push_pacer.h).
  std::vector<Outgoing> expireHeldAcknowledgements();

  // A refused HELLO: the reply says why, and the transport then forgets a connection that is no worker's.
  void refuseHello(PeerId peer, const pb::Data& hello, const std::string& why);

  void forgetStranger(PeerId peer);

  void hello(PeerId peer, const pb::Data& request);

  static uint64_t newToken();

  const Config config_;
  const Authenticator auth_;
  // New in every server process: with a token, the password of this server's data connections is
  // derived from it (dataHandshakePassword), so a password seen on the wire opens no other server,
  // and no server of a later job. Not a secret itself (logged), only unpredictable.
  const std::string data_salt_ = Authenticator::newNonce();
  NonceCache nonces_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<metrics::ScopedCallback> refused_metric_;          // reads transport_
  std::unique_ptr<metrics::ScopedCallback> dropped_replies_metric_;  // reads transport_
  MemoryBudget memory_;                  // before engines_: their stores give their charges back as they go
  std::unique_ptr<ServerObserver> obs_;  // before client_: the client's thread fills heartbeats from it
  std::unique_ptr<SchedulerClient> client_;
  std::mutex dispatch_mu_;  // held while the I/O thread dispatches; guards dispatch_stopped_
  bool dispatch_stopped_ = false;
  // Made once the address book says how the job is laid out (its lead may be chosen from it); before
  // the engines, which offer their answers to it.
  std::unique_ptr<PushPacer> pacer_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::unique_ptr<Engine> inline_engine_;  // small summation keys, run by the dispatcher
  Sessions sessions_;                      // the connections a HELLO bound to a worker
  std::string ipc_name_;
  wire::Limits limits_;
  std::atomic<bool> stop_{false};
  int rank_ = -1;
  uint64_t checkpoint_job_id_ = 0;                 // the checkpoint folder's job id (ps/common/checkpoint_dir.h)
  uint64_t generation_ = 0;                        // the dispatcher's
  std::atomic<uint64_t> announced_generation_{0};  // set by the scheduler link's thread
  std::atomic<uint64_t> malformed_{0};             // read by the metrics endpoint's thread
  uint64_t fused_messages_ = 0;                    // CMD_FUSED messages dispatched, and their entries
  uint64_t fused_entries_ = 0;
  std::string faults_error_;
};

}  // namespace zps::server_role
