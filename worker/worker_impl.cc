#include "worker/worker_impl.h"

#include <glog/logging.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "ps/node/job_layout.h"
#include "ps/transport/faulty_transport.h"

namespace zps {

using Clock = std::chrono::steady_clock;

Worker::Impl::~Impl() {
  stop = true;
  if (resender.joinable()) resender.join();
  if (recovery_watch.joinable()) recovery_watch.join();
  // The scheduler client's thread goes first: its Shutdown and recovery callbacks reach the request
  // table's receiver, the links, destroyed before the client otherwise.
  client.reset();
  if (waits) waits->receiveWith(nullptr);
  if (transport) transport->close();
}

Status Worker::Impl::send(const RequestSpec& to, std::vector<Blob> frames) {
  return scheduler->send(to, std::move(frames));
}

Status Worker::Impl::sendAll(std::vector<ReadyRequest> ready) { return scheduler->sendAll(std::move(ready)); }

std::string Worker::Impl::describeServer(int server) const { return links->describe(server); }

void Worker::Impl::issued(uint64_t id, const OutgoingRequest& o) {
  if (o.trace)
    obs->issued(id, o.trace->command, o.request.server, o.request.key, o.trace->round, o.trace->bytes, o.trace->tensor,
                o.trace->rows);
}

void Worker::Impl::completed(uint64_t id, bool ok) {
  obs->completed(id, ok);
  scheduler->completed(id);
}

void Worker::Impl::wakeWaiters() {
  if (waits) waits->wakeReceivers();
}

std::string Worker::Impl::me() const {
  return "worker " + std::to_string(rank) + (local ? " local rank " + std::to_string(config.local_rank) : "");
}

Status Worker::Impl::start() {
  // Once per process: the scheduler link and the data connections share it (a token file is read
  // once).
  ZPS_ASSIGN_OR_RETURN(auth, Authenticator::fromConfig(config));
  scheduler = std::make_unique<PushScheduler>(
      config.credit_bytes,
      [this](const RequestSpec& to, std::vector<Blob> frames) { return links->send(to, std::move(frames)); },
      FusionPolicy{config.fusion_bytes, [this](int server) { return links->acceptsFused(server); }});
  requests = std::make_unique<RequestTable>(this, config.resend_timeout);
  waits = std::make_unique<RequestWaiter>(requests.get());
  recovery = std::make_unique<RecoveryState>(requests.get());
  ZPS_ASSIGN_OR_RETURN(pb::RegisterReply book, registerNode());
  rank = book.rank();
  // Before anything reads them: the partitions, priority and credit the layout calls for.
  const std::string scheduling = chooseScheduling(layoutOf(book), &config);
  if (config.local_rank == 0) LOG(INFO) << me() << ": " << scheduling;
  scheduler->setCredit(config.credit_bytes);
  if (config.automatic.credit && config.priority)
    scheduler->adaptCredit(std::max<size_t>(config.credit_bytes, kMaxAutomaticCreditBytes), config.num_servers);
  ZPS_RETURN_IF_ERROR(obs->start(rank));
  TransportOptions options;
  options.name = "worker-data";
  applyTransportSecurity(config, auth, &options);
  ZPS_ASSIGN_OR_RETURN(FaultInjection faults, parseFaultInjection(config.test_faults));
  faults.seed += static_cast<uint64_t>(rank) * 7919;  // each worker draws its own faults
  if (faults.any() && config.resend_timeout.count() == 0)
    LOG(WARNING) << "ZPS_TEST_FAULTS without ZPS_RESEND_TIMEOUT: dropped messages will not be resent";
  options.max_frame_bytes = config.max_message_bytes;
  options.linger = config.shutdown_linger;
  transport = makeTransport(options, faults);
  limits.max_payload_bytes = config.max_message_bytes;
  recovery->start(book.generation());
  if (local) local->setGeneration(book.generation());
  links = std::make_unique<ServerLinks>(config, auth, rank, transport.get(), requests.get());
  waits->receiveWith(links.get());
  ZPS_RETURN_IF_ERROR(links->link(book));
  tensors = std::make_unique<DenseTensors>(config, rank, requests.get());
  tables = std::make_unique<Tables>(config, requests.get(), obs.get());
  local_path = std::make_unique<LocalPath>(config, rank, local.get(), client.get(), tensors.get(), requests.get(),
                                           waits.get(), recovery.get());
  transport->onMessage([this](TransportMessage msg) { handleReply(msg); });
  // A reset connection to a server came back: the requests and replies on the wire at the reset are
  // lost, so every unanswered request to that server goes again (with or without ZPS_RESEND_TIMEOUT).
  transport->onReconnect([this](PeerId peer) {
    if (const std::optional<int> server = links->serverOf(peer)) {
      const int resent = requests->resendTo(*server);
      LOG(WARNING) << me() << ": the connection to " << links->describe(*server) << " was reset and is back; resent "
                   << resent << " unanswered requests";
    }
  });
  if (config.resend_timeout.count() > 0) {
    resender = std::thread([this] {
      const auto period =
          std::min<std::chrono::milliseconds>(std::chrono::milliseconds(200), config.resend_timeout / 2);
      while (!stop) {
        std::this_thread::sleep_for(std::max(period, std::chrono::milliseconds(1)));
        requests->resendOverdue(Clock::now());
      }
    });
  }
  if (local && config.recovery) {
    recovery_watch = std::thread([this] {
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        local_path->recoveryPending();
      }
    });
  }
  ZPS_RETURN_IF_ERROR(links->hello([this] { return recovery->recovering(); }));
  moveToIpc();
  if (config.priority) links->wantLanes();
  LOG(INFO) << "worker " << rank << " connected to " << config.num_servers << " servers";
  return Status::OK();
}

StatusOr<pb::RegisterReply> Worker::Impl::registerNode() {
  if (config.local_size > 1) {
    // Every local rank of a node must find the same group: the node's worker id when it has one
    // (zps launch sets it), else the host name (one node per host).
    std::string node_key =
        config.requested_rank >= 0 ? "rank-" + std::to_string(config.requested_rank) : "host-" + config.hostname;
    ZPS_ASSIGN_OR_RETURN(local, LocalGroup::join(config, node_key));
    if (!local->isRoot()) {
      ZPS_ASSIGN_OR_RETURN(std::string bytes, local->waitBook(config.rendezvous_timeout));
      pb::RegisterReply book;
      if (!book.ParseFromString(bytes)) return InternalError("local rank 0 published an unreadable address book");
      return book;
    }
  }
  client = std::make_unique<SchedulerClient>(config, auth, 0);
  client->onHeartbeat([this](pb::Heartbeat* hb) { obs->fillHeartbeat(hb); });
  client->onShutdown([this](const pb::Shutdown& s) {
    requests->abort(Aborted("job ended by the scheduler: " + s.reason()));
    // A normal end (exit 0) reaches the peers through finish(); only failures are relayed here.
    if (local && s.exit_code() != 0) local->abort("job ended by the scheduler: " + s.reason());
  });
  client->onRecovery([this](const pb::Recovery& r) {
    if (!recovery->notice(r.generation(), Unavailable("recovering: the scheduler lost " + r.lost()))) return;
    if (local) local->announceRecovery(r.generation(), "the scheduler lost " + r.lost());
  });
  auto book = client->start();
  if (!book.ok()) {
    if (local) local->abort(book.status().message());
    return book.status();
  }
  if (local) ZPS_RETURN_IF_ERROR(local->publishBook(book->SerializeAsString()));
  return book;
}

// Called for every reply by the transport's I/O thread, or by a caller's thread that waits for a reply
// from that server (RequestWaiter, through ServerLinks): one or two thread hand-offs less than a receiver
// thread, which matters for small messages (a wake-up on another core costs tens of microseconds).
void Worker::Impl::handleReply(const TransportMessage& msg) {
  const std::optional<int> server = links->serverOf(msg.peer);
  if (!server) return;
  auto decoded = wire::decode(msg.frames, limits);
  if (!decoded.ok()) {
    LOG_EVERY_N(WARNING, 20) << "worker " << rank << ": malformed reply from server " << *server << ": "
                             << decoded.status().message();
    return;
  }
  const auto* data = std::get_if<wire::DataMessage>(&decoded.value());
  if (data == nullptr) return;
  const std::string from = links->describe(*server);
  if (!data->data.has_fused()) {
    deliverReply(*server, *data, from);
    return;
  }
  // The answers' completions give credit back together: what they release leaves together, fused.
  PushScheduler::Deferral together(scheduler.get());
  for (const wire::DataMessage& entry : data->entries) deliverReply(*server, entry, from);
}

void Worker::Impl::deliverReply(int server, const wire::DataMessage& reply, const std::string& from) {
  const pb::Data& d = reply.data;
  if (d.has_error() && d.error().recovering()) {
    // A server ahead of us has heard of a lost node: so will we, from the scheduler (local rank 0)
    // or from this announcement (the node's other local ranks). Noticed before the request fails, so
    // a caller that sees kUnavailable finds recovering() already true; the notice fails every pending
    // request, this one included, with the same message its reply carries.
    const Status why = Unavailable(from + " is " + d.error().text());
    if (recovery->notice(d.generation(), why)) {
      if (local) local->announceRecovery(d.generation(), why.message());
      return;
    }
  }
  // Push hints first: completing the push this answers pumps the queue, hurried requests at its head.
  if (d.has_reply() && d.reply().awaited_size() > 0) scheduler->hurry(server, d.reply().awaited());
  (void)requests->deliver(server, d, reply.dtype, reply.payload, from);
}

void Worker::Impl::moveToIpc() {
  std::ifstream file("/proc/net/unix");
  std::stringstream listing;
  listing << file.rdbuf();
  links->moveToIpc(listing.str());
}

Status Worker::Impl::recover() {
  if (!local_path->recoveryPending()) return FailedPrecondition("recover() called, but no node was lost");
  // The scheduler fails the job after ZPS_RECOVERY_TIMEOUT; its Shutdown ends this wait earlier.
  const auto deadline = Clock::now() + config.recovery_timeout + config.heartbeat_timeout + std::chrono::seconds(10);
  for (;;) {
    const uint64_t mine = recovery->generation();
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                               std::chrono::milliseconds(1));
    pb::RegisterReply book;
    if (client) {
      ZPS_ASSIGN_OR_RETURN(book, client->waitBook(mine, left));
    }
    if (local) {
      // The node's local ranks move together: local rank 0 hands the new book to the others once
      // none of them is inside a local operation, and the turns, barriers and staging start afresh.
      ZPS_ASSIGN_OR_RETURN(std::string bytes, local->restart(local->isRoot() ? book.SerializeAsString() : "", left));
      if (!local->isRoot() && !book.ParseFromString(bytes))
        return InternalError("local rank 0 published an unreadable address book");
      local->setGeneration(book.generation());
      local_path->resetReducers();
    }
    recovery->moved(book.generation());
    // Tensors and tables are declared again, in the same order, and get the same keys.
    tensors->clear();
    tables->clear();
    scheduler->clear();
    ZPS_RETURN_IF_ERROR(links->link(book));
    Status hello = links->hello([this] { return recovery->recovering(); });
    if (recovery->recovering() && Clock::now() < deadline) continue;  // another node was lost meanwhile
    ZPS_RETURN_IF_ERROR(hello);
    moveToIpc();         // a replacement server on this host
    links->openLanes();  // the servers forgot the lanes with the old generation: bound again if wanted
    LOG(INFO) << me() << ": reconnected to " << config.num_servers << " servers in generation " << book.generation();
    return Status::OK();
  }
}

}  // namespace zps
