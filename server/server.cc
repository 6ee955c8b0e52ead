// The server role: its life (registration, engines, the end of the job) and the dispatch of every
// message to the engine that owns its key (server/server_role.h).
#include "server/server.h"

#include <glog/logging.h>

#include "ps/transport/faulty_transport.h"
#include "server/server_role.h"

namespace zps {
namespace server_role {

Server::Server(const Config& config, Authenticator auth)
    : config_(config),
      auth_(std::move(auth)),
      memory_(config.server_max_bytes,
              TableRowPolicy{config.table_memory_bytes, rowFormatOf(config.table_row_format)}) {
  TransportOptions options;
  applyTransportSecurity(config, auth_, &options, SecuredLink::kData, data_salt_);
  options.name = "server";
  options.max_frame_bytes = config.max_message_bytes;
  options.max_queued_replies = kMaxQueuedRepliesPerConnection;
  options.linger = config.shutdown_linger;
  // Workers on this host move to this socket (faster than TCP loopback); a random name, so only a
  // peer told it over its TCP connection, and sharing this network namespace, can connect. With
  // ZPS_IPC=0 none is offered and every worker stays on TCP.
  if (config.ipc) options.ipc_name = "zps-" + hexOf(Authenticator::newNonce());
  ipc_name_ = options.ipc_name;
  StatusOr<FaultInjection> faults = parseFaultInjection(config.test_faults);
  if (!faults.ok()) faults_error_ = faults.status().message();  // run() refuses to start
  transport_ = makeTransport(options, faults.ok() ? *faults : FaultInjection{});
  refused_metric_ = std::make_unique<metrics::ScopedCallback>(
      "zps_refused_connections_total", "Connections refused at the ZeroMQ handshake (missing or wrong token)", true,
      [t = transport_.get()] { return static_cast<double>(t->refusedHandshakes()); });
  dropped_replies_metric_ = std::make_unique<metrics::ScopedCallback>(
      "zps_dropped_replies_total", "Replies dropped because their peer did not read its earlier ones", true,
      [t = transport_.get()] { return static_cast<double>(t->droppedReplies()); });
  limits_.max_payload_bytes = config.max_message_bytes;
}

Status Server::makeReducers(kernels::ReducerKind kind, std::vector<std::unique_ptr<kernels::Reducer>>* reducers) {
  reducers->clear();
  for (int i = 0; i <= config_.server_engine_threads; ++i) {
    auto reducer = kernels::makeReducer(kind, i);
    if (!reducer.ok()) return reducer.status().withContext("engine thread " + std::to_string(i));
    reducers->push_back(std::move(*reducer));
  }
  return Status::OK();
}

int Server::run() {
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
  bool skip_zeros = false;
  {
    Config chosen = config_;  // the servers choose the workers' pacing with the same rule
    LOG(INFO) << "server " << rank_ << ": " << chooseScheduling(layoutOf(*book), &chosen);
    pacer_ = std::make_unique<PushPacer>(config_.num_workers, chosen.push_pacing_bytes);
    skip_zeros = chosen.skip_zeros;
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
            << (auth_.enabled() ? "; data salt " + hexOf(data_salt_) : std::string());
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
                                                transport_.get(), pacer_.get(), /*threaded=*/true, skip_zeros));
  inline_engine_ =
      std::make_unique<Engine>(config_.server_engine_threads, std::move(reducers.back()), config_.num_workers,
                               checkpoints, &memory_, transport_.get(), pacer_.get(), /*threaded=*/false, skip_zeros);

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

void Server::dispatch(TransportMessage msg) {
  pb::Data rejected;
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
  const pb::Data& d = data->data;
  const bool answer = d.has_reply() || d.has_hello_reply() || d.has_stats_reply() || d.has_error();
  if (d.generation() != generation_ && !answer) {
    refuseGeneration(msg.peer, *data);
    return;
  }
  if (d.has_hello()) {
    hello(msg.peer, d);
    return;
  }
  const Session* session = sessions_.find(msg.peer);
  if (session == nullptr) {
    ++malformed_;
    reply(msg.peer, errorReply(msg.peer, d, "send HELLO before any other message"));
    return;
  }
  switch (d.body_case()) {
    case pb::Data::kStats: {
      std::vector<SumCounts*> counts{inline_engine_->sumCounts()};
      for (auto& e : engines_) counts.push_back(e->sumCounts());
      reply(msg.peer, statsReply(msg.peer, d, counts));
      return;
    }
    case pb::Data::kFused: dispatchFused(msg.peer, session->worker, *data); return;
    case pb::Data::kDeclare:
    case pb::Data::kTensor:
    case pb::Data::kRows:
    case pb::Data::kCheckpoint: toEngine(msg.peer, session->worker, std::move(*data)); return;
    case pb::Data::kHello:  // handled above
    case pb::Data::kHelloReply:
    case pb::Data::kStatsReply:
    case pb::Data::kReply:
    case pb::Data::kError:
    case pb::Data::BODY_NOT_SET: break;
  }
  ++malformed_;  // an answer sent to the server
}

void Server::refused(PeerId peer, const pb::Data& rejected, const Status& why) {
  ++malformed_;
  LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": malformed message from " << transport_->describe(peer) << ": "
                           << why.message() << " (" << malformed_ << " so far)";
  if (rejected.protocol_version() == 1 && rejected.has_hello()) {
    (void)transport_->send(peer, wire::encodeVersion1Error(rejected.request_id(), why.message()));
  } else if (rejected.has_fused() && sessions_.contains(peer)) {
    for (Outgoing& o : refuseEntries(peer, rejected, why.message())) reply(peer, std::move(o));
  } else if (rejected.request_id() != 0 && sessions_.contains(peer)) {
    reply(peer, errorReply(peer, rejected, why.message()));
  }
  forgetStranger(peer);
}

void Server::refuseGeneration(PeerId peer, const wire::DataMessage& data) {
  const std::string why = "recovering: this server is at generation " + std::to_string(generation_) +
                          ", the request is of generation " + std::to_string(data.data.generation());
  std::vector<const wire::DataMessage*> requests{&data};
  if (data.data.has_fused()) {
    requests.clear();
    for (const auto& e : data.entries) requests.push_back(&e);
  }
  for (const wire::DataMessage* r : requests) {
    Outgoing o = errorReply(peer, r->data, why);
    o.data.mutable_error()->set_recovering(true);
    o.data.set_generation(generation_);
    reply(peer, std::move(o));
  }
}

void Server::toEngine(PeerId peer, int worker, wire::DataMessage data) {
  const uint64_t key = wire::keyOf(data.data);
  VLOG(2) << "server " << rank_ << ": " << pb::DataCommand_Name(wire::commandOf(data.data)) << " key " << key
          << " round " << wire::roundOf(data.data) << " from worker " << worker << " (" << data.payload.size() << " B)";
  if (holdsCredit(data)) pace(peer, worker, data);
  const uint32_t local_rank = sessions_.localRankOf(peer);
  if (runsInline(data)) {
    inline_engine_->process(EngineTask{peer, worker, std::move(data), false, local_rank});
    return;
  }
  // Keys of one tensor differ only in their low bits and single-partition tensors only in the high
  // bits, so mix them before picking an engine.
  uint64_t mixed = (key ^ (key >> 24)) * 0x9E3779B97F4A7C15ull;
  size_t engine = (mixed >> 32) % engines_.size();
  engines_[engine]->submit(EngineTask{peer, worker, std::move(data), false, local_rank});
}

void Server::dispatchFused(PeerId peer, int worker, wire::DataMessage& fused) {
  ++fused_messages_;
  fused_entries_ += fused.entries.size();
  std::vector<Outgoing> out;
  const uint32_t local_rank = sessions_.localRankOf(peer);
  for (wire::DataMessage& e : fused.entries) {
    VLOG(2) << "server " << rank_ << ": fused " << pb::DataCommand_Name(wire::commandOf(e.data)) << " key "
            << wire::keyOf(e.data) << " round " << wire::roundOf(e.data) << " from worker " << worker << " ("
            << e.payload.size() << " B)";
    if (!runsInline(e)) {
      out.push_back(errorReply(peer, e.data,
                               "a fused entry may hold at most " + std::to_string(kInlineBytes) +
                                   " bytes; send this key's requests alone (ZPS_FUSION_BYTES)"));
      continue;
    }
    if (holdsCredit(e)) pace(peer, worker, e);
    inline_engine_->handle(EngineTask{peer, worker, entryAsRequest(std::move(e)), false, local_rank}, &out);
  }
  // Acknowledgements of credit-holding pushes go through the pacer.
  pacer_->offerAll(&out);
  for (auto& [to, frames] : packReplies(peer, std::move(out))) (void)transport_->send(to, std::move(frames));
}

void Server::startGeneration(uint64_t generation) {
  LOG(WARNING) << "server " << rank_ << ": generation " << generation << ": dropping every key, table and worker "
               << "connection of generation " << generation_ << "; the workers start over from the latest checkpoint";
  generation_ = generation;
  sessions_.clear();
  pacer_->clear();
  for (auto& e : engines_) e->submit(EngineTask{0, -1, {}, true});
  inline_engine_->process(EngineTask{0, -1, {}, true});
}

bool Server::runsInline(const wire::DataMessage& m) {
  const pb::Data& d = m.data;
  const auto cmd = wire::commandOf(d);
  const bool sum_command = cmd == pb::CMD_PUSH || cmd == pb::CMD_PULL || cmd == pb::CMD_PUSH_PULL ||
                           (cmd == pb::CMD_DECLARE && d.declare().mode() == pb::MODE_SUM);
  const uint64_t elements = d.has_tensor() ? d.tensor().num_elements() : d.declare().num_elements();
  uint64_t bytes = 0;
  return sum_command && wire::checkedBytes(elements, dtypeSize(m.dtype), &bytes) && bytes <= kInlineBytes;
}

bool Server::holdsCredit(const wire::DataMessage& m) { return m.data.has_tensor() && m.data.tensor().holds_credit(); }

void Server::pace(PeerId peer, int worker, const wire::DataMessage& push) {
  if (!pacer_->enabled()) return;
  std::vector<Outgoing> released;
  pacer_->arrived(peer, push.data, worker, push.payload.size(), &released);
  sendAll(std::move(released));
}

void Server::reply(PeerId peer, Outgoing o) {
  (void)transport_->send(peer, wire::encodeData(std::move(o.data), std::move(o.payload)));
}

void Server::sendAll(std::vector<Outgoing> out) {
  for (Outgoing& o : out) reply(o.peer, std::move(o));
}

std::vector<Outgoing> Server::expireHeldAcknowledgements() {
  std::vector<Outgoing> out;
  pacer_->expire(PushPacer::Clock::now(), &out);
  return out;
}

}  // namespace server_role

int runServer(const Config& config) {
  auto auth = Authenticator::fromConfig(config);
  if (!auth.ok()) {
    LOG(ERROR) << "server: " << auth.status().message();
    return 2;
  }
  server_role::Server server(config, *auth);
  return server.run();
}

}  // namespace zps
