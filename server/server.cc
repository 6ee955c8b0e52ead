// The server role. Threads:
//  - the transport's I/O thread moves bytes and dispatches: it decodes each message, checks who sent it
//    (HELLO binds a connection to a worker rank) and hands it to the engine thread that owns its key;
//  - ZPS_SERVER_ENGINE_THREADS engine threads each own a SumStore for key % threads and send replies;
//    summation keys of at most kInlineBytes (256 KiB) are summed by the dispatcher itself (the inline
//    engine);
//  - the SchedulerClient's thread handles heartbeats and the end of the job.
#include "server/server.h"

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
#include "server/sum_store.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

// The setting's choices are checked where it is read; anything else holds float32 rows.
RowFormat rowFormatOf(const std::string& name) {
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
  Server(const Config& config, Authenticator auth)
      : config_(config),
        auth_(std::move(auth)),
        memory_(config.server_max_bytes,
                TableRowPolicy{config.table_memory_bytes, rowFormatOf(config.table_row_format)}) {
    TransportOptions options;
    applyTransportSecurity(config, auth_, &options, SecuredLink::kData, data_salt_);
    options.name = "server";
    if (!config.test_faults.empty()) {
      auto faults = parseFaultInjection(config.test_faults);
      if (faults.ok())
        options.faults = *faults;
      else
        faults_error_ = faults.status().message();
    }
    options.max_frame_bytes = config.max_message_bytes;
    options.max_queued_replies = kMaxQueuedRepliesPerConnection;
    options.linger = config.shutdown_linger;
    // Workers on this host move to this socket (faster than TCP loopback); a random name, so only a
    // peer told it over its TCP connection, and sharing this network namespace, can connect. With
    // ZPS_IPC=0 none is offered and every worker stays on TCP.
    if (config.ipc) options.ipc_name = "zps-" + randomHex(Authenticator::newNonce());
    ipc_name_ = options.ipc_name;
    transport_ = makeZmqTransport(options);
    refused_metric_ = std::make_unique<metrics::ScopedCallback>(
        "zps_refused_connections_total", "Connections refused at the ZeroMQ handshake (missing or wrong token)", true,
        [t = transport_.get()] { return static_cast<double>(t->refusedHandshakes()); });
    dropped_replies_metric_ = std::make_unique<metrics::ScopedCallback>(
        "zps_dropped_replies_total", "Replies dropped because their peer did not read its earlier ones", true,
        [t = transport_.get()] { return static_cast<double>(t->droppedReplies()); });
    limits_.max_payload_bytes = config.max_message_bytes;
  }

  // One reducer per engine thread, plus the last one for the inline engine.
  Status makeReducers(kernels::ReducerKind kind, std::vector<std::unique_ptr<kernels::Reducer>>* reducers) {
    reducers->clear();
    for (int i = 0; i <= config_.server_engine_threads; ++i) {
      auto reducer = kernels::makeReducer(kind, i);
      if (!reducer.ok()) return reducer.status().withContext("engine thread " + std::to_string(i));
      reducers->push_back(std::move(*reducer));
    }
    return Status::OK();
  }

  int run() {
    if (!faults_error_.empty()) {
      LOG(ERROR) << "server: " << faults_error_;
      return 2;
    }
    // A folder that cannot take the shards is found now, not at the first checkpoint an epoch in.
    if (!config_.checkpoint_dir.empty()) {
      auto job = prepareCheckpointDir(config_.checkpoint_dir);
      if (!job.ok()) {
        LOG(ERROR) << "server: ZPS_CHECKPOINT_DIR: " << job.status().message();
        return 2;
      }
      checkpoint_job_id_ = *job;
    }
    // Engine selection before registering: a server that cannot run what was asked for is a user
    // error (exit 2), and the job should not count it as a member first.
    auto engine = kernels::chooseReducer(config_.server_engine);
    if (!engine.ok()) {
      LOG(ERROR) << "server: " << engine.status().message();
      return 2;
    }
    if (!engine->note.empty()) LOG(INFO) << "server: " << engine->note;
    std::vector<std::unique_ptr<kernels::Reducer>> reducers;
    Status made = makeReducers(engine->kind, &reducers);
    if (!made.ok() && engine->kind == kernels::ReducerKind::kCuda && config_.server_engine == "auto") {
      // The probe passed on one GPU, but an engine thread's GPU (thread i mod device count) cannot
      // be used, e.g. it is in exclusive-process mode and taken: auto means the CPU then.
      LOG(WARNING) << "server: ZPS_SERVER_ENGINE=auto: " << made.message() << "; using the CPU engine";
      engine->kind = kernels::ReducerKind::kCpu;
      made = makeReducers(engine->kind, &reducers);
    }
    if (!made.ok()) {
      LOG(ERROR) << "server: " << made.message();
      return 1;
    }
    auto port = transport_->listen(config_.bind_host, config_.node_port);
    if (!port.ok()) {
      LOG(ERROR) << "server: " << port.status().message() << "; set PORT/DMLC_PORT to a free port or 0";
      return 2;
    }
    client_ = std::make_unique<SchedulerClient>(config_, auth_, *port, data_salt_);
    obs_ = std::make_unique<ServerObserver>(config_, &malformed_);
    client_->onHeartbeat([this](pb::Heartbeat* hb) { obs_->fillHeartbeat(hb); });
    client_->onShutdown([this](const pb::Shutdown&) { stop_ = true; });
    client_->onRecovery([this](const pb::Recovery& r) {
      uint64_t g = announced_generation_.load();
      while (r.generation() > g && !announced_generation_.compare_exchange_weak(g, r.generation())) {
      }
    });
    auto book = client_->start();
    if (!book.ok()) {
      LOG(ERROR) << "server: " << book.status().message();
      return book.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    rank_ = book->rank();
    generation_ = book->generation();
    {
      Config chosen = config_;  // the servers choose the workers' pacing with the same rule
      LOG(INFO) << "server " << rank_ << ": " << chooseScheduling(layoutOf(*book), &chosen);
      pacer_ = std::make_unique<PushPacer>(config_.num_workers, chosen.push_pacing_bytes);
    }
    if (generation_ > 0)
      LOG(INFO) << "server " << rank_ << " replaces a lost server (generation " << generation_
                << "); workers restore its tables from ZPS_CHECKPOINT_DIR";
    if (Status s = obs_->start(rank_); !s.ok()) {
      LOG(ERROR) << "server " << rank_ << ": " << s.message();
      return 2;
    }
    LOG(INFO) << "server " << rank_ << " ready on " << config_.node_host << ":" << *port << " with "
              << config_.server_engine_threads << " engine threads (" << reducers[0]->name() << " reducer), "
              << "holding at most " << memory_.cap() << " bytes of keys and rows (ZPS_SERVER_MAX_BYTES)"
              << (auth_.enabled() ? "; data salt " + randomHex(data_salt_) : std::string());
    const ShardPlace checkpoints{config_.checkpoint_dir, static_cast<uint32_t>(rank_),
                                 static_cast<uint32_t>(config_.num_servers), checkpoint_job_id_,
                                 config_.table_checkpoint_increments};
    if (config_.table_memory_bytes > 0 || config_.table_row_format != "float32")
      LOG(INFO) << "server " << rank_ << ": table rows as " << config_.table_row_format << ", "
                << (config_.table_memory_bytes > 0
                        ? "evicting the least recently used past " + std::to_string(config_.table_memory_bytes) +
                              " bytes (ZPS_TABLE_MEMORY_BYTES)"
                        : std::string("no table budget"));
    for (int i = 0; i < config_.server_engine_threads; ++i)
      engines_.push_back(std::make_unique<Engine>(i, std::move(reducers[i]), config_.num_workers, checkpoints, &memory_,
                                                  transport_.get(), pacer_.get()));
    inline_engine_ =
        std::make_unique<Engine>(config_.server_engine_threads, std::move(reducers.back()), config_.num_workers,
                                 checkpoints, &memory_, transport_.get(), pacer_.get(), /*threaded=*/false);

    // The transport's I/O thread dispatches each message itself: one thread hand-off less per request.
    transport_->onMessage([this](TransportMessage msg) {
      std::lock_guard<std::mutex> lock(dispatch_mu_);
      if (!dispatch_stopped_) dispatch(std::move(msg));
    });
    while (!stop_) {
      if (announced_generation_ > generation_) {
        std::lock_guard<std::mutex> lock(dispatch_mu_);  // the dispatcher's state changes
        startGeneration(announced_generation_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      sendAll(expireHeldAcknowledgements());
    }
    {
      std::lock_guard<std::mutex> lock(dispatch_mu_);
      dispatch_stopped_ = true;  // engines_ goes away below
    }
    ParamCounters total;
    for (auto& e : engines_) e->stop();
    if (terminationRequested()) {
      for (auto& e : engines_) e->finalCheckpoint();
    }
    for (auto& e : engines_) {
      ParamCounters c = e->paramCounters();
      total.rows_pulled += c.rows_pulled;
      total.rows_pushed += c.rows_pushed;
      total.bytes_in += c.bytes_in;
      total.bytes_out += c.bytes_out;
      total.table_rows += c.table_rows;
      total.rows_created += c.rows_created;
      total.rows_evicted += c.rows_evicted;
    }
    engines_.clear();
    if (total.rows_pulled + total.rows_pushed > 0) {
      LOG(INFO) << "server " << rank_ << ": param tables: " << total.table_rows << " rows held, " << total.rows_pulled
                << " rows pulled, " << total.rows_pushed << " rows pushed, " << total.bytes_in + total.bytes_out
                << " bytes moved (" << total.bytes_in << " in, " << total.bytes_out << " out), " << total.rows_created
                << " rows created, " << total.rows_evicted << " evicted; peak resident memory " << peakRssBytes()
                << " bytes";
    }
    if (malformed_ > 0)
      LOG(WARNING) << "server " << rank_ << ": " << malformed_ << " malformed or unexpected messages were dropped";
    if (const uint64_t dropped = transport_->droppedReplies(); dropped > 0)
      LOG(WARNING) << "server " << rank_ << ": " << dropped << " replies to peers that did not read them were dropped"
                   << " (at most " << kMaxQueuedRepliesPerConnection << " wait per connection)";
    if (const uint64_t held = pacer_->held(); held > 0)
      LOG(INFO) << "server " << rank_ << ": " << held << " push acknowledgements waited for the slower workers ("
                << pacer_->expired() << " of them until the 100 ms deadline; ZPS_PUSH_PACING_BYTES)";
    if (fused_messages_ > 0)
      LOG(INFO) << "server " << rank_ << ": " << fused_messages_ << " fused messages carried " << fused_entries_
                << " requests (ZPS_FUSION_BYTES)";
    if (const uint64_t duplicates = duplicateAsyncPushes(); duplicates > 0)
      LOG(INFO) << "server " << rank_ << ": " << duplicates
                << " async pushes came again (resends, duplicates) and were acknowledged without applying them twice";
    pb::Shutdown s = client_->waitShutdown();
    if (s.exit_code() == 0)
      LOG(INFO) << "server " << rank_ << ": " << s.reason() << "; exiting";
    else
      LOG(ERROR) << "server " << rank_ << ": " << s.reason();
    transport_->close();
    return s.exit_code();
  }

 private:
  void dispatch(TransportMessage msg) {
    pb::DataHeader rejected;
    auto decoded = wire::decode(msg.frames, limits_, &rejected);
    if (!decoded.ok()) {
      refused(msg.peer, rejected, decoded.status());
      return;
    }
    auto* data = std::get_if<wire::DataMessage>(&decoded.value());
    if (data == nullptr) {
      ++malformed_;
      LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": control message on the data port ignored";
      return;
    }
    const auto& h = data->header;
    const bool answer = data->body == pb::Data::kReply || data->body == pb::Data::kHelloReply ||
                        data->body == pb::Data::kStatsReply || data->body == pb::Data::kError;
    if (h.generation() != generation_ && !answer) {
      refuseGeneration(msg.peer, *data);
      return;
    }
    if (data->body == pb::Data::kHello) {
      hello(msg.peer, h);
      return;
    }
    auto it = worker_of_peer_.find(msg.peer);
    if (it == worker_of_peer_.end()) {
      ++malformed_;
      reply(msg.peer, errorReply(msg.peer, h, "send HELLO before any other message"));
      return;
    }
    switch (data->body) {
      case pb::Data::kStats: {
        std::vector<SumCounts*> counts{inline_engine_->sumCounts()};
        for (auto& e : engines_) counts.push_back(e->sumCounts());
        reply(msg.peer, statsReply(msg.peer, h, counts));
        return;
      }
      case pb::Data::kFused: dispatchFused(msg.peer, it->second, *data); return;
      case pb::Data::kDeclare:
      case pb::Data::kTensor:
      case pb::Data::kRows:
      case pb::Data::kCheckpoint: toEngine(msg.peer, it->second, std::move(*data)); return;
      case pb::Data::kHello:  // handled above
      case pb::Data::kHelloReply:
      case pb::Data::kStatsReply:
      case pb::Data::kReply:
      case pb::Data::kError:
      case pb::Data::BODY_NOT_SET: break;
    }
    ++malformed_;  // an answer sent to the server
  }

  // A message the codec refused. A worker that sent a bad request (a bad compressed payload, say)
  // learns why instead of timing out; strangers get nothing (answering them would make the server an
  // amplifier), except that a HELLO of protocol version 1 hears, in its own framing, why it is refused.
  void refused(PeerId peer, pb::DataHeader& rejected, const Status& why) {
    ++malformed_;
    LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": malformed message from " << transport_->describe(peer) << ": "
                             << why.message() << " (" << malformed_ << " so far)";
    if (rejected.protocol_version() == 1 && rejected.command() == pb::CMD_HELLO) {
      (void)transport_->send(peer, wire::encodeVersion1Error(rejected.request_id(), why.message()));
    } else if (rejected.command() == pb::CMD_FUSED && worker_of_peer_.count(peer) > 0) {
      for (Outgoing& o : refuseEntries(peer, rejected, why.message())) reply(peer, std::move(o));
    } else if (rejected.request_id() != 0 && worker_of_peer_.count(peer) > 0) {
      rejected.set_dtype(0);  // the reply must decode even when the request's dtype did not
      reply(peer, errorReply(peer, rejected, why.message()));
    }
    forgetStranger(peer);
  }

  // Work of another generation (ZPS_RECOVERY): the worker rolls back when it hears this. A fused
  // message's entries are answered each.
  void refuseGeneration(PeerId peer, const wire::DataMessage& data) {
    const std::string why = "recovering: this server is at generation " + std::to_string(generation_) +
                            ", the request is of generation " + std::to_string(data.header.generation());
    std::vector<const wire::DataMessage*> requests{&data};
    if (data.body == pb::Data::kFused) {
      requests.clear();
      for (const auto& e : data.entries) requests.push_back(&e);
    }
    for (const wire::DataMessage* r : requests) {
      Outgoing o = errorReply(peer, r->header, why);
      o.header.set_recovering(true);
      o.header.set_generation(generation_);
      reply(peer, std::move(o));
    }
  }

  // A request a store answers: summed inline when small, else queued to the engine that owns its key.
  void toEngine(PeerId peer, int worker, wire::DataMessage data) {
    const auto& h = data.header;
    VLOG(2) << "server " << rank_ << ": " << pb::DataCommand_Name(h.command()) << " key " << h.key() << " round "
            << h.round() << " from worker " << worker << " (" << data.payload.size() << " B)";
    if (h.holds_credit()) pace(peer, worker, data);
    const uint32_t local_rank = local_rank_of_peer_[peer];
    if (runsInline(data)) {
      inline_engine_->process(EngineTask{peer, worker, std::move(data), false, local_rank});
      return;
    }
    // Keys of one tensor differ only in their low bits and single-partition tensors only in the high
    // bits, so mix them before picking an engine.
    uint64_t mixed = (h.key() ^ (h.key() >> 24)) * 0x9E3779B97F4A7C15ull;
    size_t engine = (mixed >> 32) % engines_.size();
    engines_[engine]->submit(EngineTask{peer, worker, std::move(data), false, local_rank});
  }

  // A fused message: each entry is handled as the request it stands for, by the inline engine (entries
  // are summation keys of at most kInlineBytes; a larger one is refused with an answer of its own), in
  // order, and the answers to the sender go back fused (server/fused_messages.h).
  void dispatchFused(PeerId peer, int worker, wire::DataMessage& fused) {
    ++fused_messages_;
    fused_entries_ += fused.entries.size();
    std::vector<Outgoing> out;
    const uint32_t local_rank = local_rank_of_peer_[peer];
    for (wire::DataMessage& e : fused.entries) {
      VLOG(2) << "server " << rank_ << ": fused " << pb::DataCommand_Name(e.header.command()) << " key "
              << e.header.key() << " round " << e.header.round() << " from worker " << worker << " ("
              << e.payload.size() << " B)";
      if (!runsInline(e)) {
        out.push_back(errorReply(peer, e.header,
                                 "a fused entry may hold at most " + std::to_string(kInlineBytes) +
                                     " bytes; send this key's requests alone (ZPS_FUSION_BYTES)"));
        continue;
      }
      if (e.header.holds_credit()) pace(peer, worker, e);
      inline_engine_->handle(EngineTask{peer, worker, entryAsRequest(std::move(e)), false, local_rank}, &out);
    }
    // Acknowledgements of credit-holding pushes go through the pacer.
    pacer_->offerAll(&out);
    for (auto& [to, frames] : packReplies(peer, std::move(out))) (void)transport_->send(to, std::move(frames));
  }

  // ZPS_RECOVERY: a node was lost. Everything of the old generation goes: the workers' connections
  // (they say HELLO again) and every key and table (they declare them again, tables restored from the
  // latest checkpoint). Each engine drops its stores after the requests already queued to it.
  void startGeneration(uint64_t generation) {
    LOG(WARNING) << "server " << rank_ << ": generation " << generation << ": dropping every key, table and worker "
                 << "connection of generation " << generation_ << "; the workers start over from the latest checkpoint";
    generation_ = generation;
    worker_of_peer_.clear();
    local_rank_of_peer_.clear();
    upgrade_token_of_peer_.clear();
    lane_token_of_peer_.clear();
    has_lane_.clear();
    hello_answer_of_peer_.clear();
    pacer_->clear();
    for (auto& e : engines_) e->submit(EngineTask{0, -1, {}, true});
    inline_engine_->process(EngineTask{0, -1, {}, true});
  }

  // Summation keys of at most kInlineBytes are summed by the dispatcher itself: for them a hand-off to
  // an engine thread and back (two thread wake-ups, 20-60 us on loopback) costs more than the work (a
  // 256 KiB float32 sum is about 30 us on one core). A key's size is fixed by its DECLARE (the store
  // refuses other sizes), so every message of a key goes the same way and one thread owns each key.
  static constexpr uint64_t kInlineBytes = 256 << 10;
  static bool runsInline(const wire::DataMessage& m) {
    const auto cmd = m.header.command();
    const bool sum_command = cmd == pb::CMD_PUSH || cmd == pb::CMD_PULL || cmd == pb::CMD_PUSH_PULL ||
                             (cmd == pb::CMD_DECLARE && m.header.mode() == pb::MODE_SUM);
    uint64_t bytes = 0;
    return sum_command && wire::checkedBytes(m.header.num_elements(), dtypeSize(m.dtype), &bytes) &&
           bytes <= kInlineBytes;
  }

  // A credit-holding push arrived: the pacer counts it, and sends the acknowledgements it then releases.
  void pace(PeerId peer, int worker, const wire::DataMessage& push) {
    if (!pacer_->enabled()) return;
    std::vector<Outgoing> released;
    pacer_->arrived(peer, push.header, worker, push.payload.size(), &released);
    sendAll(std::move(released));
  }

  void reply(PeerId peer, Outgoing o) {
    (void)transport_->send(peer, wire::encodeData(o.header, std::move(o.payload)));
  }
  void sendAll(std::vector<Outgoing> out) {
    for (Outgoing& o : out) reply(o.peer, std::move(o));
  }
  // Acknowledgements held past the pacer's deadline leave (server/scheduling/push_pacer.h).
  std::vector<Outgoing> expireHeldAcknowledgements() {
    std::vector<Outgoing> out;
    pacer_->expire(PushPacer::Clock::now(), &out);
    return out;
  }

  // A refused HELLO: the reply says why, and the transport then forgets a connection that is no worker's.
  void refuseHello(PeerId peer, const pb::DataHeader& h, const std::string& why) {
    reply(peer, errorReply(peer, h, why));
    forgetStranger(peer);
  }

  void forgetStranger(PeerId peer) {
    if (worker_of_peer_.count(peer) == 0) transport_->forget(peer);
  }

  void hello(PeerId peer, const pb::DataHeader& h) {
    if (h.magic() != wire::kMagic || h.protocol_version() != wire::kProtocolVersion) {
      ++malformed_;
      LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": HELLO with a wrong magic or protocol version from "
                               << transport_->describe(peer);
      refuseHello(peer, h,
                  "protocol mismatch: the worker speaks zps protocol version " + std::to_string(h.protocol_version()) +
                      ", this server version " + std::to_string(wire::kProtocolVersion) +
                      "; run the same zps release on every node");
      return;
    }
    // A resend of the HELLO this connection was answered for (its reply was lost) gets that answer
    // again; the same nonce from any other connection stays a replay (checkPeerProof).
    if (auto answered = hello_answer_of_peer_.find(peer);
        answered != hello_answer_of_peer_.end() && auth_.enabled() && !h.auth_nonce().empty() &&
        answered->second.nonce == h.auth_nonce() && h.request_id() == answered->second.reply.request_id() &&
        auth_.verify(kHelloContext, helloMacInput(h), h.auth_mac())) {
      Outgoing again;
      again.header = answered->second.reply;
      reply(peer, std::move(again));
      return;
    }
    if (auth_.enabled()) {
      Status proof = checkPeerProof(auth_, nonces_, kHelloContext, helloMacInput(h), h.auth_nonce(), h.auth_time_ms(),
                                    h.auth_mac());
      if (!proof.ok()) {
        ++malformed_;
        LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused HELLO from " << transport_->describe(peer) << ": "
                                 << proof.message();
        refuseHello(peer, h, proof.message());
        return;
      }
    }
    int rank = h.worker_rank();
    if (rank < 0 || rank >= config_.num_workers) {
      ++malformed_;
      refuseHello(peer, h, "worker rank " + std::to_string(rank) + " is out of range");
      return;
    }
    // A worker moving to the ipc socket presents the token its TCP connection was given: that
    // connection's rank may connect twice.
    bool moving = false;
    if (h.upgrade_token() != 0) {
      for (auto it = upgrade_token_of_peer_.begin(); it != upgrade_token_of_peer_.end(); ++it) {
        if (it->second != h.upgrade_token() || worker_of_peer_[it->first] != rank ||
            local_rank_of_peer_[it->first] != h.local_rank())
          continue;
        upgrade_token_of_peer_.erase(it);
        moving = true;
        break;
      }
      if (!moving) {
        ++malformed_;
        refuseHello(peer, h, "unknown connection token");
        return;
      }
    }
    const bool lane = h.lane_token() != 0;
    if (lane && !acceptLane(peer, h, rank, moving)) return;
    // The local ranks of one worker node share its rank (each pushes its own keys); a repeat of
    // both is a misconfigured or hostile peer.
    for (auto& [p, r] : worker_of_peer_) {
      if (!moving && !lane && r == rank && p != peer && local_rank_of_peer_[p] == h.local_rank()) {
        refuseHello(peer, h,
                    "worker rank " + std::to_string(rank) + " local rank " + std::to_string(h.local_rank()) +
                        " is already connected");
        return;
      }
    }
    worker_of_peer_[peer] = rank;
    local_rank_of_peer_[peer] = h.local_rank();
    VLOG(1) << "server " << rank_ << ": worker " << rank << " connected from " << transport_->describe(peer);
    Outgoing o;
    o.header.set_command(pb::CMD_REPLY);
    o.header.set_request_id(h.request_id());
    if (auth_.enabled()) o.header.set_auth_mac(auth_.mac(kHelloReplyContext, h.auth_nonce()));
    o.header.set_accepts_fused(true);  // server/fused_messages.h
    if (!moving && !lane && !ipc_name_.empty()) {
      const uint64_t token = newToken();
      upgrade_token_of_peer_[peer] = token;
      o.header.set_ipc_name(ipc_name_);
      o.header.set_upgrade_token(token);
    }
    // Every worker connection may open one push lane; a lane opens none.
    if (!lane && has_lane_.count(peer) == 0) {
      const uint64_t token = newToken();
      lane_token_of_peer_[peer] = token;
      o.header.set_lane_token(token);
    }
    if (auth_.enabled()) hello_answer_of_peer_[peer] = HelloAnswer{h.auth_nonce(), o.header};
    reply(peer, std::move(o));
  }

  // A HELLO that presents a lane token: the second connection of the worker connection given that
  // token (same worker rank and local rank), once per connection. Refuses it otherwise and returns false.
  bool acceptLane(PeerId peer, const pb::DataHeader& h, int rank, bool moving) {
    std::string why;
    if (moving) {
      why = "a HELLO may move a connection to ipc or open a lane, not both";
    } else {
      for (auto it = lane_token_of_peer_.begin(); it != lane_token_of_peer_.end(); ++it) {
        if (it->second != h.lane_token() || it->first == peer || worker_of_peer_[it->first] != rank ||
            local_rank_of_peer_[it->first] != h.local_rank())
          continue;
        has_lane_.insert(it->first);
        lane_token_of_peer_.erase(it);
        return true;
      }
      why = "unknown lane token: no connection of worker " + std::to_string(rank) + " local rank " +
            std::to_string(h.local_rank()) + " was given it, or it has opened its lane already";
    }
    ++malformed_;
    LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused a lane HELLO from " << transport_->describe(peer)
                             << ": " << why;
    refuseHello(peer, h, why);
    return false;
  }

  static uint64_t newToken() {
    uint64_t token = 0;
    while (token == 0) std::memcpy(&token, Authenticator::newNonce().data(), sizeof(token));
    return token;
  }

  static std::string randomHex(const std::string& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string hex;
    for (unsigned char c : bytes) {
      hex.push_back(digits[c >> 4]);
      hex.push_back(digits[c & 15]);
    }
    return hex;
  }

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
  std::unordered_map<PeerId, int> worker_of_peer_;
  std::unordered_map<PeerId, uint32_t> local_rank_of_peer_;
  std::unordered_map<PeerId, uint64_t> upgrade_token_of_peer_;  // for the move to ipc_name_
  std::unordered_map<PeerId, uint64_t> lane_token_of_peer_;     // for opening a push lane
  std::unordered_set<PeerId> has_lane_;                         // connections that opened theirs
  struct HelloAnswer {
    std::string nonce;
    pb::DataHeader reply;
  };
  std::unordered_map<PeerId, HelloAnswer> hello_answer_of_peer_;  // with a token: for a resent HELLO
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

}  // namespace

int runServer(const Config& config) {
  auto auth = Authenticator::fromConfig(config);
  if (!auth.ok()) {
    LOG(ERROR) << "server: " << auth.status().message();
    return 2;
  }
  Server server(config, *auth);
  return server.run();
}

}  // namespace zps
