// Worker implementation. Threads:
//  - the caller's threads issue push/pull/pushPull and wait;
//  - the data transport's I/O thread moves bytes, and also decodes replies, copies pulled bytes into
//    the caller's buffers and completes operations (handleReply);
//  - with ZPS_RESEND_TIMEOUT, a thread that resends overdue requests;
//  - with ZPS_RECOVERY and several local ranks, a thread that watches the node's control segment for
//    a new generation announced by another local rank (recoveryWatchLoop);
//  - the SchedulerClient's thread (heartbeats, barriers, shutdown).
#include "zps/worker.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "kernels/local_collectives.h"
#include "kernels/optimizer.h"
#include "kernels/reducer.h"
#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "worker/worker_observer.h"
#include "ps/node/resolve.h"
#include "ps/node/scheduler_client.h"
#include "ps/wire/codec.h"
#include "worker/compression.h"
#include "worker/local/local_group.h"
#include "worker/local/local_reducer.h"
#include "worker/placement.h"
#include "worker/received_rounds.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

// Wraps a caller's buffer as a Blob without copying. The empty owner keeps nothing alive: the caller
// promises the buffer outlives the operation, and a server only replies after it has received every byte.
Blob borrow(const void* data, size_t bytes) {
  return Blob(std::shared_ptr<const void>(std::shared_ptr<const void>(), data), data, bytes);
}

}  // namespace

struct Worker::Impl {
  struct Tensor {
    std::string name;
    size_t bytes;
    DType dtype;
    std::vector<PartitionInfo> parts;  // the partitions this process pushes and pulls
    // Every piece of the node with the local rank that owns it (local reduction's slice plan).
    std::vector<kernels::LocalPiece> node_pieces;
    uint64_t push_round = 0;
    uint64_t pull_round = 0;
    std::shared_ptr<TensorCompression> compression;  // null: dense pushes
  };
  struct Op {
    std::string what;  // "push-pull of 'grad' round 3"
    int remaining = 0;
    Status status;
    std::vector<uint64_t> requests;
    // A push, pull or push-pull of a tensor's round (tensor -1: anything else), for received_through.
    TensorId tensor = -1;
    uint64_t round = 0;
    bool push_side = false, pull_side = false;
  };
  struct Pending {
    std::shared_ptr<Op> op;
    int server;
    uint64_t key;
    uint8_t* out = nullptr;  // pull destination
    size_t bytes = 0;
    DType dtype;
    // pullRows: the reply's i-th row goes to row positions[i] of `out` (rows of row_dim floats).
    std::shared_ptr<std::vector<uint32_t>> positions;
    uint32_t row_dim = 0;
    // Kept for resends (ZPS_RESEND_TIMEOUT): the frames share their bytes, so this costs no copy.
    std::vector<Blob> frames;
    Clock::time_point sent;
    int resends = 0;
    std::string hello_nonce;  // HELLO with ZPS_AUTH_TOKEN: the server must answer with a MAC over it
    std::shared_ptr<pb::DataHeader> reply_header;  // STATS: where the reply's header goes

    // A request to `server` about `key`; callers that receive data also set out/bytes (or positions).
    static Pending to(int server, uint64_t key, DType dtype) {
      Pending p;
      p.server = server;
      p.key = key;
      p.dtype = dtype;
      return p;
    }
  };
  struct Table {
    std::string name;
    uint64_t key;
    TableOptions options;
    uint64_t push_round = 0;
  };
  struct ServerLink {
    PeerId peer;
    std::string address;
    // From the server's HELLO reply: its ipc socket and this connection's token for moving there.
    std::string ipc_name;
    uint64_t upgrade_token = 0;
    bool on_ipc = false;  // peer is the ipc connection
  };

  Config config;
  Authenticator auth = Authenticator::withToken("");
  std::unique_ptr<WorkerObserver> obs;  // before client: the client's thread fills heartbeats from it
  std::unique_ptr<SchedulerClient> client;
  std::unique_ptr<Transport> transport;
  wire::Limits limits;
  int rank = -1;
  std::vector<ServerLink> servers;
  std::unordered_map<PeerId, int> server_of_peer;

  std::mutex tensors_mu;
  std::vector<Tensor> tensors;
  std::vector<Table> tables;
  std::unique_ptr<Placement> placement;

  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  uint64_t next_request = 1;
  Handle next_handle = 1;
  std::unordered_map<uint64_t, Pending> pending;
  std::unordered_map<Handle, std::shared_ptr<Op>> ops;
  std::unordered_map<TensorId, ReceivedRounds> received;  // per tensor: sent as received_through
  std::optional<Status> aborted;
  // ZPS_RECOVERY: the generation of the address book in use, and why requests now fail (a node was
  // lost) until recover() has moved to the next generation.
  uint64_t generation = 0;
  uint64_t announced_generation = 0;  // the newest generation the scheduler or a server told us of
  std::optional<Status> recovering;

  std::atomic<bool> stop{false};
  std::thread resender;  // only with ZPS_RESEND_TIMEOUT
  std::thread recovery_watch;  // only with ZPS_RECOVERY and several local ranks
  uint64_t resent = 0;  // guarded by mu

  // Local reduction (ZPS_LOCAL_SIZE > 1); null otherwise. Non-root local ranks have no client.
  std::unique_ptr<LocalGroup> local;
  // The on-node halves of local reduction: shared memory (host tensors, local size > 1) and NCCL
  // (GPU tensors; created at the first one, collectively). Created and used by one thread at a
  // time: inside LocalGroup::inTurn with several local ranks, under device_mu with one.
  std::unique_ptr<LocalReducer> shm_reducer;
  std::unique_ptr<LocalReducer> device_reducer;
  std::mutex device_mu;  // one local rank: GPU tensors share device_reducer's stream and buffers
  TrafficCounters traffic;  // guarded by tensors_mu
  StatusOr<pb::RegisterReply> registerNode();
  std::vector<PartitionInfo> placeForNode(int id, size_t bytes, size_t esize,
                                          std::vector<kernels::LocalPiece>* node_pieces);
  StatusOr<LocalReducer*> localReducerFor(const void* in, const void* out);
  StatusOr<Handle> route(TensorId id, pb::DataCommand command, const void* in, void* out);
  StatusOr<Handle> reduceLocally(TensorId id, pb::DataCommand command, size_t bytes, DType dtype,
                                 const void* in, void* out);
  Handle completedHandle(Status status);
  Status localBarrier();
  Status localBarrierInTurn();
  int localFinish(const Status& result);

  ~Impl() {
    stop = true;
    if (resender.joinable()) resender.join();
    if (recovery_watch.joinable()) recovery_watch.join();
    if (transport) transport->close();
  }

  Status start() {
    // Once per process: the scheduler link and the data connections share it (a token file is read once).
    ZPS_ASSIGN_OR_RETURN(auth, Authenticator::fromConfig(config));
    ZPS_ASSIGN_OR_RETURN(pb::RegisterReply book, registerNode());
    rank = book.rank();
    ZPS_RETURN_IF_ERROR(obs->start(rank));
    servers.resize(config.num_servers);
    TransportOptions options;
    options.name = "worker-data";
    applyCurve(config, auth, &options);
    if (!config.test_faults.empty()) {
      ZPS_ASSIGN_OR_RETURN(options.faults, parseFaultInjection(config.test_faults));
      options.faults.seed += static_cast<uint64_t>(rank) * 7919;
      if (config.resend_timeout.count() == 0)
        LOG(WARNING) << "ZPS_TEST_FAULTS without ZPS_RESEND_TIMEOUT: dropped messages will not be resent";
    }
    options.max_frame_bytes = config.max_message_bytes;
    options.linger = config.shutdown_linger;
    transport = makeZmqTransport(options);
    limits.max_payload_bytes = config.max_message_bytes;
    generation = book.generation();
    if (local) local->setGeneration(generation);
    ZPS_RETURN_IF_ERROR(linkServers(book));
    placement = std::make_unique<Placement>(config.num_servers);
    transport->onMessage([this](TransportMessage msg) { handleReply(msg); });
    if (config.resend_timeout.count() > 0) resender = std::thread([this] { resendLoop(); });
    if (local && config.recovery) recovery_watch = std::thread([this] { recoveryWatchLoop(); });
    ZPS_RETURN_IF_ERROR(helloServers());
    moveToIpc();
    LOG(INFO) << "worker " << rank << " connected to " << config.num_servers << " servers";
    return Status::OK();
  }

  // Connects to every server of the address book whose address is new (all of them at the start; a
  // replacement's after a recovery).
  Status linkServers(const pb::RegisterReply& book) {
    for (const auto& n : book.nodes()) {
      if (n.role() != pb::SERVER) continue;
      if (n.rank() >= config.num_servers) return ProtocolError("address book has server rank out of range");
      std::string address = n.host() + ":" + std::to_string(n.port());
      if (servers[n.rank()].address == address) continue;
      ZPS_ASSIGN_OR_RETURN(std::string ip, resolveWithRetry(n.host(), config.connect_timeout,
                                                            "server " + std::to_string(n.rank()) + " host"));
      ZPS_ASSIGN_OR_RETURN(PeerId peer, transport->connect(ip, static_cast<int>(n.port())));
      std::lock_guard<std::mutex> lock(mu);
      server_of_peer.erase(servers[n.rank()].peer);  // replies from a lost server's old address are ignored
      servers[n.rank()] = ServerLink{};
      servers[n.rank()].peer = peer;
      servers[n.rank()].address = address;
      server_of_peer[peer] = n.rank();
    }
    return Status::OK();
  }

  // HELLO binds each connection to our rank on the server and proves the server is reachable. After a
  // lost node (ZPS_RECOVERY), a server may not have heard of the new generation yet: it answers
  // "recovering" until it has, so the HELLOs are repeated until the deadline.
  Status helloServers() {
    const auto deadline = Clock::now() + config.connect_timeout;
    for (;;) {
      Status hello = helloOnce(deadline);
      bool newer;
      {
        std::lock_guard<std::mutex> lock(mu);
        newer = recovering.has_value();  // another node was lost: recover() starts over
      }
      if (hello.code() != StatusCode::kUnavailable || newer || Clock::now() >= deadline) return hello;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // The fields of a HELLO whose request beginRequest entered. Called with mu held.
  void fillHello(pb::DataHeader* h) {
    h->set_magic(wire::kMagic);
    h->set_protocol_version(wire::kProtocolVersion);
    h->set_worker_rank(rank);
    h->set_local_rank(static_cast<uint32_t>(config.local_rank));
    if (auth.enabled()) {
      h->set_auth_nonce(Authenticator::newNonce());
      h->set_auth_time_ms(Authenticator::nowMs());
      h->set_auth_mac(auth.mac(kHelloContext, helloMacInput(*h)));
      pending[h->request_id()].hello_nonce = h->auth_nonce();
    }
  }

  // Servers on this host move to their ipc socket: about 1.3-2x the throughput of TCP loopback for
  // large messages (tools/bench/loopback.cc). A server's socket is only reachable when it shows in
  // /proc/net/unix, which lists this network namespace's sockets; otherwise, or when the move fails,
  // the TCP connection stays.
  void moveToIpc() {
    // Injected faults could drop the one HELLO that moves a connection (it has no resend); they exist
    // to test resends over the ordinary path anyway.
    if (!config.test_faults.empty()) return;
    std::ifstream file("/proc/net/unix");
    std::stringstream listing;
    listing << file.rdbuf();
    const std::string sockets = listing.str();
    auto op = std::make_shared<Op>();
    op->what = "moving to the servers' ipc sockets";
    std::vector<std::pair<int, PeerId>> moving;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int s = 0; s < config.num_servers; ++s) {
        const ServerLink& link = servers[s];
        if (link.on_ipc || link.ipc_name.empty() || link.upgrade_token == 0 ||
            sockets.find("@" + link.ipc_name) == std::string::npos)
          continue;
        auto peer = transport->connectIpc(link.ipc_name);
        if (!peer.ok()) continue;
        server_of_peer[*peer] = s;
        pb::DataHeader h = beginRequest(op, Pending::to(s, 0, DType::kUInt8), pb::CMD_HELLO);
        fillHello(&h);
        h.set_upgrade_token(link.upgrade_token);
        pending[h.request_id()].sent = Clock::now();
        if (transport->send(*peer, wire::encodeData(h)).ok()) moving.emplace_back(s, *peer);
      }
    }
    if (moving.empty()) return;
    Status moved = waitOp(op, std::min<std::chrono::milliseconds>(config.connect_timeout, std::chrono::seconds(5)));
    std::lock_guard<std::mutex> lock(mu);
    if (!moved.ok()) {
      LOG(WARNING) << "worker " << rank << ": staying on TCP: " << moved.message();
      return;
    }
    for (auto [s, peer] : moving) {
      servers[s].peer = peer;  // replies to requests already sent still come over TCP: both stay mapped
      servers[s].on_ipc = true;
    }
    LOG(INFO) << "worker " << rank << ": " << moving.size() << " of " << config.num_servers
              << " servers are on this host; using their ipc:// sockets";
  }

  Status helloOnce(Clock::time_point deadline) {
    auto op = std::make_shared<Op>();
    op->what = "connecting to the servers";
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int s = 0; s < config.num_servers; ++s) {
        pb::DataHeader h = beginRequest(op, Pending::to(s, 0, DType::kUInt8), pb::CMD_HELLO);
        fillHello(&h);
        ZPS_RETURN_IF_ERROR(sendRequest(h.request_id(), wire::encodeData(h)));
      }
    }
    return waitOp(op, std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                               std::chrono::milliseconds(1)));
  }

  // Sends one request per partition; `in` and `out` may be null. Returns the new handle.
  StatusOr<Handle> issue(TensorId id, pb::DataCommand command, const void* in, void* out) {
    std::vector<PartitionInfo> parts;
    uint64_t round;
    DType dtype;
    std::string name;
    std::shared_ptr<TensorCompression> compression;
    {
      std::lock_guard<std::mutex> lock(tensors_mu);
      if (id < 0 || id >= static_cast<int>(tensors.size()))
        return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
      Tensor& t = tensors[id];
      if (command == pb::CMD_PUSH) round = ++t.push_round;
      else if (command == pb::CMD_PULL) round = ++t.pull_round;
      else {
        if (t.push_round != t.pull_round)
          return FailedPrecondition("pushPull of '" + t.name + "' after unmatched push or pull calls");
        round = ++t.push_round;
        ++t.pull_round;
      }
      parts = t.parts;
      dtype = t.dtype;
      name = t.name;
      compression = t.compression;
    }
    if (in == nullptr && command != pb::CMD_PULL) return InvalidArgument("push of '" + name + "' with a null buffer");
    if (out == nullptr && command != pb::CMD_PUSH) return InvalidArgument("pull of '" + name + "' into a null buffer");
    // Compress before taking mu, which the receiver thread needs.
    std::vector<EncodedPush> pushes(parts.size());
    for (size_t i = 0; in != nullptr && compression == nullptr && i < parts.size(); ++i)
      pushes[i].payload = borrow(static_cast<const uint8_t*>(in) + parts[i].offset, parts[i].bytes);
    if (in != nullptr && compression != nullptr) pushes = compression->encode(in);
    {
      std::lock_guard<std::mutex> lock(tensors_mu);
      for (const auto& e : pushes) traffic.network_bytes_pushed += e.payload.size();
    }
    auto op = std::make_shared<Op>();
    const char* verb = command == pb::CMD_PUSH ? "push" : command == pb::CMD_PULL ? "pull" : "push-pull";
    op->what = std::string(verb) + " of '" + name + "' round " + std::to_string(round);
    op->tensor = id;
    op->round = round;
    op->push_side = command != pb::CMD_PULL;
    op->pull_side = command != pb::CMD_PUSH;
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return *aborted;
    if (recovering) return *recovering;
    // Lets the servers free the results of rounds this worker is done with (see received_rounds.h).
    const uint64_t received_through = received[id].through();
    for (size_t i = 0; i < parts.size(); ++i) {
      const PartitionInfo& p = parts[i];
      size_t elems = p.bytes / dtypeSize(dtype);
      Pending pend = Pending::to(p.server, p.key, dtype);
      pend.out = out ? static_cast<uint8_t*>(out) + p.offset : nullptr;
      pend.bytes = p.bytes;
      pb::DataHeader h = beginRequest(op, pend, command);
      uint64_t rid = h.request_id();
      h.set_round(round);
      h.set_received_through(received_through);
      h.set_dtype(static_cast<uint32_t>(dtype));
      h.set_num_elements(elems);
      pushes[i].describe(&h);
      const size_t sent = in != nullptr ? pushes[i].payload.size() : p.bytes;
      VLOG(2) << "worker " << rank << ": " << pb::DataCommand_Name(command) << " key " << p.key << " round " << round
              << " (" << sent << " B) to server " << p.server;
      ZPS_RETURN_IF_ERROR(sendRequest(rid, wire::encodeData(h, std::move(pushes[i].payload))));
      obs->issued(rid, command, p.server, p.key, round, sent, name);
    }
    Handle handle = next_handle++;
    ops[handle] = op;
    return handle;
  }

  // Enters a request of `op` in `pending` and returns its header with the command, request id and key
  // filled in. Called with mu held; sendRequest sends it.
  pb::DataHeader beginRequest(const std::shared_ptr<Op>& op, Pending p, pb::DataCommand command) {
    uint64_t rid = next_request++;
    p.op = op;
    pb::DataHeader h;
    h.set_command(command);
    h.set_request_id(rid);
    h.set_key(p.key);
    h.set_generation(generation);
    pending[rid] = std::move(p);
    op->requests.push_back(rid);
    ++op->remaining;
    return h;
  }

  // Sends a request already entered in `pending` (called with mu held) and remembers it for resends.
  Status sendRequest(uint64_t rid, std::vector<Blob> frames) {
    if (recovering) {  // the servers would refuse it: fail its operation now (declarations, HELLO)
      complete(rid, *recovering);
      return Status::OK();
    }
    Pending& p = pending.at(rid);
    p.sent = Clock::now();
    if (config.resend_timeout.count() > 0) p.frames = frames;
    return transport->send(servers[p.server].peer, std::move(frames));
  }

  // Resends requests whose reply is overdue. The servers count each worker once per key and round, so
  // a resent push is acknowledged again but never summed twice.
  void resendOverdue() {
    auto now = Clock::now();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [rid, p] : pending) {
      if (p.frames.empty() || now - p.sent < config.resend_timeout) continue;
      p.sent = now;
      ++p.resends;
      ++resent;
      VLOG(1) << "worker " << rank << ": resending request " << rid << " (key " << p.key << ") to server " << p.server;
      (void)transport->send(servers[p.server].peer, p.frames);
    }
  }

  StatusOr<TensorId> declareTensor(const std::string& name, size_t bytes, DType dtype, bool async,
                                   const DeclareOptions& options);

  Status waitOp(const std::shared_ptr<Op>& op, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    bool done = cv.wait_for(lock, timeout, [&] { return op->remaining == 0 || aborted.has_value(); });
    if (op->remaining == 0) return op->status;
    if (done) return aborted->withContext(op->what);
    std::string missing;
    int shown = 0;
    for (uint64_t rid : op->requests) {
      auto it = pending.find(rid);
      if (it == pending.end()) continue;
      if (shown++ == 4) {
        missing += ", ...";
        break;
      }
      if (!missing.empty()) missing += ", ";
      missing += "key " + std::to_string(it->second.key) + " from server " + std::to_string(it->second.server) +
                 " (" + servers[it->second.server].address + ")";
    }
    return DeadlineExceeded(op->what + ": " + std::to_string(op->remaining) + " replies missing after " +
                            secondsText(timeout) + " s: " + missing);
  }

  void complete(uint64_t rid, const Status& status) {
    // Called with mu held.
    auto it = pending.find(rid);
    if (it == pending.end()) return;
    obs->completed(rid, status.ok());
    auto op = it->second.op;
    if (!status.ok() && op->status.ok()) op->status = status.withContext(op->what);
    --op->remaining;
    pending.erase(it);
    if (op->remaining == 0 && op->tensor >= 0) received[op->tensor].done(op->round, op->push_side, op->pull_side);
    if (op->remaining == 0) cv.notify_all();
  }

  // A node was lost (ZPS_RECOVERY): every pending request fails with `why` (kUnavailable), and so does
  // every new one until recover() has moved to the new generation. Called with mu held.
  void startRecovering(uint64_t new_generation, const Status& why) {
    announced_generation = std::max(announced_generation, new_generation);
    if (recovering) return;
    recovering = why;
    std::vector<uint64_t> rids;
    for (const auto& [rid, p] : pending) rids.push_back(rid);
    for (uint64_t rid : rids) complete(rid, why);
    cv.notify_all();
  }

  Status recover();

  // Several local ranks: a generation another local rank announced in the control segment makes this
  // process recover too (it may have no request in flight that a server could refuse). Called with mu
  // held; true while recovering.
  bool noticeLocalRecovery() {
    if (local) {
      std::string why;
      const uint64_t announced = local->announcedGeneration(&why);
      if (announced > generation) startRecovering(announced, Unavailable("recovering: " + why));
    }
    return recovering.has_value();
  }
  // Why a new local operation must not start: the job is recovering.
  std::optional<Status> recoveryPending() {
    std::lock_guard<std::mutex> lock(mu);
    if (noticeLocalRecovery()) return *recovering;
    return std::nullopt;
  }
  bool recoveringNow() { return recoveryPending().has_value(); }
  // A failed local operation ends the node's group, unless it failed because the job is recovering:
  // then every local rank goes on to recover() instead.
  void abortLocalUnlessRecovering(const Status& s) {
    if (local && !recoveringNow()) local->abort(s.message());
  }
  // At the goodbye, every process (each local rank has its own requests): what a lossy network cost.
  void logResends() {
    std::lock_guard<std::mutex> lock(mu);
    if (resent == 0) return;
    LOG(INFO) << "worker " << rank << (local ? " local rank " + std::to_string(config.local_rank) : "") << ": resent "
              << resent << " requests";
  }
  void recoveryWatchLoop() {
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      recoveringNow();
    }
  }

  // Only with ZPS_RESEND_TIMEOUT: replies are handled on the transport's I/O thread (handleReply).
  void resendLoop() {
    const auto period = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(200), config.resend_timeout / 2);
    while (!stop) {
      std::this_thread::sleep_for(std::max(period, std::chrono::milliseconds(1)));
      resendOverdue();
    }
  }

  // Called by the transport's I/O thread for every reply: one thread hand-off less than a receiver
  // thread, which matters for small messages (a wake-up on another core costs tens of microseconds).
  void handleReply(const TransportMessage& msg) {
    auto decoded = wire::decode(msg.frames, limits);
    std::lock_guard<std::mutex> lock(mu);  // also guards server_of_peer, which recover() rewrites
    auto server_it = server_of_peer.find(msg.peer);
    if (server_it == server_of_peer.end()) return;
    int server = server_it->second;
    if (!decoded.ok()) {
      LOG_EVERY_N(WARNING, 20) << "worker " << rank << ": malformed reply from server " << server << ": "
                               << decoded.status().message();
      return;
    }
    auto* data = std::get_if<wire::DataMessage>(&decoded.value());
    if (data == nullptr) return;
    const auto& h = data->header;
    auto it = pending.find(h.request_id());
    if (it == pending.end() || it->second.server != server) {
      LOG_EVERY_N(WARNING, 20) << "worker " << rank << ": reply for unknown request " << h.request_id()
                               << " from server " << server;
      return;
    }
    std::string from = "server " + std::to_string(server) + " (" + servers[server].address + ")";
    if (h.command() == pb::CMD_ERROR && h.recovering()) {
      Status s = Unavailable(from + " is " + h.error());
      // A server ahead of us has heard of a lost node: so will we, from the scheduler (local rank 0) or
      // from this announcement (the node's other local ranks).
      if (h.generation() > generation) {
        startRecovering(h.generation(), s);
        if (local) local->announceRecovery(h.generation(), s.message());
      }
      complete(h.request_id(), s);
      return;
    }
    if (h.command() == pb::CMD_ERROR) {
      complete(h.request_id(), InternalError(from + " answered: " + h.error()));
      return;
    }
    if (h.command() != pb::CMD_REPLY) {
      complete(h.request_id(), ProtocolError(from + " sent " + pb::DataCommand_Name(h.command())));
      return;
    }
    Pending& p = it->second;
    if (!p.hello_nonce.empty() && !auth.verify(kHelloReplyContext, p.hello_nonce, h.auth_mac())) {
      complete(h.request_id(), FailedPrecondition(from + " could not prove it knows ZPS_AUTH_TOKEN"));
      return;
    }
    if (p.reply_header != nullptr) *p.reply_header = h;
    if (!h.ipc_name().empty() && h.upgrade_token() != 0) {  // a HELLO reply (connectIpc checks the name)
      servers[server].ipc_name = h.ipc_name();
      servers[server].upgrade_token = h.upgrade_token();
    }
    if (p.positions) {
      size_t row_bytes = size_t{p.row_dim} * sizeof(float);
      if (data->payload.size() != p.positions->size() * row_bytes) {
        complete(h.request_id(), ProtocolError(from + " returned " + std::to_string(data->payload.size()) +
                                                   " bytes for " + std::to_string(p.positions->size()) + " rows"));
        return;
      }
      for (size_t i = 0; i < p.positions->size(); ++i)
        std::memcpy(p.out + (*p.positions)[i] * row_bytes, data->payload.data() + i * row_bytes, row_bytes);
    } else if (p.out != nullptr) {
      if (data->payload.size() != p.bytes || data->dtype != p.dtype) {
        complete(h.request_id(), ProtocolError(from + " returned " + std::to_string(data->payload.size()) +
                                                   " bytes of " + std::string(dtypeName(data->dtype)) + ", expected " +
                                                   std::to_string(p.bytes) + " of " +
                                                   std::string(dtypeName(p.dtype))));
        return;
      }
      std::memcpy(p.out, data->payload.data(), p.bytes);
    }
    complete(h.request_id(), Status::OK());
  }
};

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
  impl->obs = std::make_unique<WorkerObserver>(config);
  ZPS_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

int Worker::rank() const { return impl_->rank; }
int Worker::localRank() const { return impl_->config.local_rank; }
int Worker::localSize() const { return impl_->config.local_size; }
TrafficCounters Worker::traffic() const {
  std::lock_guard<std::mutex> lock(impl_->tensors_mu);
  return impl_->traffic;
}
int Worker::numWorkers() const { return impl_->config.num_workers; }
int Worker::numServers() const { return impl_->config.num_servers; }
size_t Worker::partitionBytes() const { return impl_->config.partition_bytes; }

StatusOr<TensorId> Worker::declare(const std::string& name, size_t bytes, DType dtype) {
  return impl_->declareTensor(name, bytes, dtype, false, DeclareOptions());
}

StatusOr<TensorId> Worker::declare(const std::string& name, size_t bytes, DType dtype, const DeclareOptions& options) {
  return impl_->declareTensor(name, bytes, dtype, false, options);
}

StatusOr<TensorId> Worker::declareAsync(const std::string& name, size_t bytes, DType dtype) {
  return impl_->declareTensor(name, bytes, dtype, true, DeclareOptions());
}

Compressor Worker::compressorOf(TensorId tensor) const {
  std::lock_guard<std::mutex> lock(impl_->tensors_mu);
  if (tensor < 0 || tensor >= static_cast<int>(impl_->tensors.size())) return Compressor::kNone;
  const auto& c = impl_->tensors[tensor].compression;
  return c ? c->kind() : Compressor::kNone;
}

StatusOr<TensorId> Worker::Impl::declareTensor(const std::string& name, size_t bytes, DType dtype, bool async,
                                               const DeclareOptions& options) {
  size_t esize = dtypeSize(dtype);
  if (esize == 0) return InvalidArgument("unknown dtype");
  if (bytes == 0 || bytes % esize != 0)
    return InvalidArgument("tensor '" + name + "' has " + std::to_string(bytes) + " bytes, not a positive multiple of " +
                           std::to_string(esize) + " (" + std::string(dtypeName(dtype)) + ")");
  if (name.size() > 1024) return InvalidArgument("tensor name longer than 1024 bytes");
  TensorId id;
  Tensor t;
  {
    std::lock_guard<std::mutex> lock(tensors_mu);
    id = static_cast<TensorId>(tensors.size());
    if (id >= (1 << 30)) return InvalidArgument("too many tensors");
    t.name = name;
    t.bytes = bytes;
    t.dtype = dtype;
    t.parts = placeForNode(id, bytes, esize, &t.node_pieces);
    if (t.parts.size() >= (size_t{1} << kKeyPartitionBits))
      return InvalidArgument("tensor '" + name + "' needs too many partitions; raise ZPS_PARTITION_BYTES");
    // randomk draws differ per worker and partition, and repeat from run to run.
    const uint64_t seed = (static_cast<uint64_t>(rank) << 16 | static_cast<uint64_t>(config.local_rank)) * 0x9E3779B97F4A7C15ull;
    ZPS_ASSIGN_OR_RETURN(t.compression,
                         TensorCompression::choose(config, options, async, name, bytes, dtype, t.parts, seed));
    tensors.push_back(t);
  }
  auto op = std::make_shared<Op>();
  op->what = "declaring '" + name + "'";
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& p : t.parts) {
      pb::DataHeader h = beginRequest(op, Pending::to(p.server, p.key, dtype), pb::CMD_DECLARE);
      uint64_t rid = h.request_id();
      h.set_dtype(static_cast<uint32_t>(dtype));
      h.set_num_elements(p.bytes / esize);
      h.set_mode(pb::MODE_SUM);
      h.set_async(async);
      h.set_name(name);
      ZPS_RETURN_IF_ERROR(sendRequest(rid, wire::encodeData(h)));
    }
  }
  ZPS_RETURN_IF_ERROR(waitOp(op, config.request_timeout));
  return id;
}

StatusOr<Handle> Worker::push(TensorId t, const void* data) { return impl_->route(t, pb::CMD_PUSH, data, nullptr); }
StatusOr<Handle> Worker::pull(TensorId t, void* out) { return impl_->route(t, pb::CMD_PULL, nullptr, out); }
StatusOr<Handle> Worker::pushPull(TensorId t, const void* data, void* out) {
  return impl_->route(t, pb::CMD_PUSH_PULL, data, out);
}

Status Worker::wait(Handle handle, std::chrono::milliseconds timeout) {
  std::shared_ptr<Impl::Op> op;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->ops.find(handle);
    if (it == impl_->ops.end()) return InvalidArgument("unknown or already waited handle " + std::to_string(handle));
    op = it->second;
    impl_->ops.erase(it);
  }
  return impl_->waitOp(op, timeout);
}

Status Worker::wait(Handle handle) { return wait(handle, impl_->config.request_timeout); }

StatusOr<bool> Worker::poll(Handle handle) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->ops.find(handle);
  if (it == impl_->ops.end()) return InvalidArgument("unknown or already waited handle " + std::to_string(handle));
  return it->second->remaining == 0 || impl_->aborted.has_value();
}

Status Worker::barrier() {
  if (impl_->local) return impl_->localBarrier();
  return impl_->client->barrier(pb::GROUP_WORKERS, impl_->config.rendezvous_timeout);
}

int Worker::finish(const Status& result) {
  impl_->logResends();
  if (impl_->local) return impl_->localFinish(result);
  auto shutdown = impl_->client->finish(result.ok(), result.message(), impl_->config.rendezvous_timeout);
  if (!shutdown.ok()) {
    LOG(ERROR) << "worker " << impl_->rank << ": " << shutdown.status().message();
    return 1;
  }
  if (shutdown->exit_code() != 0) LOG(ERROR) << "worker " << impl_->rank << ": " << shutdown->reason();
  else LOG(INFO) << "worker " << impl_->rank << ": " << shutdown->reason();
  if (!result.ok()) return 1;
  return shutdown->exit_code();
}

int Worker::serverOfRow(uint64_t key) const {
  // Row keys are often small consecutive ids or hashes; mix them so rows spread evenly over servers.
  uint64_t x = key * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<int>(x % static_cast<uint64_t>(impl_->config.num_servers));
}

StatusOr<TableId> Worker::declareTable(const std::string& name, const TableOptions& options) {
  // Tables bypass the node's local reduction: every local rank pulls and pushes its own rows (sparse
  // rows of different batches have little to sum on the node), and the DECLARE tells the servers how
  // many local ranks each node has, so that a round waits for one push per (node, local rank).
  ZPS_ASSIGN_OR_RETURN(kernels::OptimizerKind kind, kernels::optimizerFromName(options.optimizer));
  if (options.dim == 0 || options.dim > 65536) return InvalidArgument("table '" + name + "': dim must be 1..65536");
  if (!(options.lr > 0)) return InvalidArgument("table '" + name + "': lr must be > 0");
  TableId id;
  Impl::Table t;
  {
    std::lock_guard<std::mutex> lock(impl_->tensors_mu);
    // Tables and tensors share the key space: a table takes the key of a tensor id nobody else uses.
    id = static_cast<TableId>(impl_->tables.size());
    int tensor_slot = static_cast<int>(impl_->tensors.size()) + (1 << 29) + id;
    t.name = name;
    t.key = static_cast<uint64_t>(tensor_slot) << kKeyPartitionBits;
    t.options = options;
    if (t.options.async < 0) t.options.async = impl_->config.enable_async ? 1 : 0;
    t.push_round = options.restore_step;
    impl_->tables.push_back(t);
  }
  auto op = std::make_shared<Impl::Op>();
  op->what = "declaring table '" + name + "'";
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (int s = 0; s < numServers(); ++s) {
      pb::DataHeader h =
          impl_->beginRequest(op, Impl::Pending::to(s, t.key, DType::kFloat32), pb::CMD_DECLARE);
      uint64_t rid = h.request_id();
      h.set_dtype(static_cast<uint32_t>(DType::kFloat32));
      h.set_mode(pb::MODE_PARAM);
      h.set_name(name);
      h.set_row_dim(options.dim);
      h.set_async(t.options.async == 1);
      h.set_restore_step(options.restore_step);
      h.set_local_size(static_cast<uint32_t>(impl_->config.local_size));
      auto* o = h.mutable_optimizer();
      o->set_kind(static_cast<uint32_t>(kind));
      o->set_lr(options.lr);
      o->set_momentum(options.momentum);
      o->set_beta1(options.beta1);
      o->set_beta2(options.beta2);
      o->set_eps(options.eps);
      o->set_initial_accumulator(options.initial_accumulator);
      o->set_init_scale(options.init_scale);
      o->set_init_seed(options.seed);
      ZPS_RETURN_IF_ERROR(impl_->sendRequest(rid, wire::encodeData(h)));
    }
  }
  ZPS_RETURN_IF_ERROR(impl_->waitOp(op, impl_->config.request_timeout));
  return id;
}

namespace {

// Row commands carry their keys as a frame of uint64.
Blob keyFrame(const std::vector<uint64_t>& keys) {
  return Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t));
}

}  // namespace

StatusOr<Handle> Worker::pullRows(TableId table, const uint64_t* keys, size_t n, float* out) {
  Impl::Table t;
  uint64_t round;
  {
    std::lock_guard<std::mutex> lock(impl_->tensors_mu);
    if (table < 0 || table >= static_cast<int>(impl_->tables.size())) return InvalidArgument("unknown table id");
    // Sync tables: wait until every worker's pushes up to this worker's latest round are applied.
    round = impl_->tables[table].push_round + 1;
    t = impl_->tables[table];
  }
  int servers = numServers();
  std::vector<std::vector<uint64_t>> by_server(servers);
  std::vector<std::shared_ptr<std::vector<uint32_t>>> positions(servers);
  for (int s = 0; s < servers; ++s) positions[s] = std::make_shared<std::vector<uint32_t>>();
  for (size_t i = 0; i < n; ++i) {
    int s = serverOfRow(keys[i]);
    by_server[s].push_back(keys[i]);
    positions[s]->push_back(static_cast<uint32_t>(i));
  }
  auto op = std::make_shared<Impl::Op>();
  op->what = "pulling " + std::to_string(n) + " rows of '" + t.name + "' round " + std::to_string(round);
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->aborted) return *impl_->aborted;
  if (impl_->recovering) return *impl_->recovering;
  for (int s = 0; s < servers; ++s) {
    if (by_server[s].empty()) continue;
    Impl::Pending pend = Impl::Pending::to(s, t.key, DType::kFloat32);
    pend.out = reinterpret_cast<uint8_t*>(out);
    pend.positions = positions[s];
    pend.row_dim = t.options.dim;
    pb::DataHeader h = impl_->beginRequest(op, pend, pb::CMD_PULL_ROWS);
    uint64_t rid = h.request_id();
    h.set_round(round);
    h.set_dtype(static_cast<uint32_t>(DType::kFloat32));
    h.set_num_elements(by_server[s].size());
    h.set_row_dim(t.options.dim);
    ZPS_RETURN_IF_ERROR(impl_->sendRequest(rid, wire::encodeRows(h, keyFrame(by_server[s]))));
    const size_t rows = by_server[s].size();
    impl_->obs->issued(rid, pb::CMD_PULL_ROWS, s, t.key, round, rows * t.options.dim * sizeof(float), t.name, rows);
  }
  Handle handle = impl_->next_handle++;
  impl_->ops[handle] = op;
  if (op->remaining == 0) impl_->cv.notify_all();
  return handle;
}

StatusOr<Handle> Worker::pushRows(TableId table, const uint64_t* keys, size_t n, const float* grads) {
  Impl::Table t;
  uint64_t round;
  {
    std::lock_guard<std::mutex> lock(impl_->tensors_mu);
    if (table < 0 || table >= static_cast<int>(impl_->tables.size())) return InvalidArgument("unknown table id");
    round = ++impl_->tables[table].push_round;
    t = impl_->tables[table];
  }
  int servers = numServers();
  uint32_t dim = t.options.dim;
  std::vector<std::vector<uint64_t>> by_server(servers);
  std::vector<std::vector<float>> rows(servers);
  for (size_t i = 0; i < n; ++i) {
    int s = serverOfRow(keys[i]);
    by_server[s].push_back(keys[i]);
    rows[s].insert(rows[s].end(), grads + i * dim, grads + (i + 1) * dim);
  }
  auto op = std::make_shared<Impl::Op>();
  op->what = "pushing " + std::to_string(n) + " rows of '" + t.name + "' round " + std::to_string(round);
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->aborted) return *impl_->aborted;
  if (impl_->recovering) return *impl_->recovering;
  // Every server gets a push every round, empty or not: in sync mode each server counts its rounds.
  for (int s = 0; s < servers; ++s) {
    pb::DataHeader h =
        impl_->beginRequest(op, Impl::Pending::to(s, t.key, DType::kFloat32), pb::CMD_PUSH_ROWS);
    uint64_t rid = h.request_id();
    h.set_round(round);
    h.set_dtype(static_cast<uint32_t>(DType::kFloat32));
    h.set_num_elements(by_server[s].size());
    h.set_row_dim(dim);
    const size_t bytes = rows[s].size() * sizeof(float);
    Blob payload = Blob::copyOf(rows[s].data(), bytes);
    ZPS_RETURN_IF_ERROR(impl_->sendRequest(rid, wire::encodeRows(h, keyFrame(by_server[s]), std::move(payload))));
    impl_->obs->issued(rid, pb::CMD_PUSH_ROWS, s, t.key, round, bytes, t.name, by_server[s].size());
  }
  Handle handle = impl_->next_handle++;
  impl_->ops[handle] = op;
  return handle;
}

Status Worker::checkpointTables(uint64_t step) {
  std::vector<Impl::Table> tables;
  {
    std::lock_guard<std::mutex> lock(impl_->tensors_mu);
    tables = impl_->tables;
  }
  auto op = std::make_shared<Impl::Op>();
  op->what = "checkpointing tables at step " + std::to_string(step);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& t : tables) {
      for (int s = 0; s < numServers(); ++s) {
        pb::DataHeader h =
            impl_->beginRequest(op, Impl::Pending::to(s, t.key, DType::kFloat32), pb::CMD_CHECKPOINT);
        uint64_t rid = h.request_id();
        h.set_round(step);
        ZPS_RETURN_IF_ERROR(impl_->sendRequest(rid, wire::encodeData(h)));
      }
    }
  }
  ZPS_RETURN_IF_ERROR(impl_->waitOp(op, impl_->config.request_timeout));
  impl_->obs->checkpointed();
  return Status::OK();
}

void Worker::reportTrainingProgress(uint64_t step, double loss, double samples_per_sec, uint64_t epoch,
                                    uint64_t epochs) {
  impl_->obs->progress(step, loss, samples_per_sec, epoch, epochs);
}

StatusOr<std::vector<ServerStats>> Worker::serverStats() {
  // Shared with the pending requests, so that a reply arriving after a timeout still has a place to go.
  std::vector<std::shared_ptr<pb::DataHeader>> replies(numServers());
  auto op = std::make_shared<Impl::Op>();
  op->what = "asking the servers for their stats";
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (int s = 0; s < numServers(); ++s) {
      Impl::Pending pend = Impl::Pending::to(s, 0, DType::kUInt8);
      replies[s] = std::make_shared<pb::DataHeader>();
      pend.reply_header = replies[s];
      pb::DataHeader h = impl_->beginRequest(op, std::move(pend), pb::CMD_STATS);
      ZPS_RETURN_IF_ERROR(impl_->sendRequest(h.request_id(), wire::encodeData(h)));
    }
  }
  ZPS_RETURN_IF_ERROR(impl_->waitOp(op, impl_->config.request_timeout));
  std::vector<ServerStats> stats;
  for (const auto& h : replies) {
    stats.push_back(ServerStats{h->stats_cpu_ns(), h->stats_peak_rss_bytes(), h->stats_pushed_bytes(),
                                h->stats_summed_bytes(), h->stats_sum_ns()});
  }
  return stats;
}

std::vector<PartitionInfo> Worker::partitions(TensorId t) const {
  std::lock_guard<std::mutex> lock(impl_->tensors_mu);
  if (t < 0 || t >= static_cast<int>(impl_->tensors.size())) return {};
  return impl_->tensors[t].parts;
}

// ---- Recovery (ZPS_RECOVERY) ----

bool Worker::recovering() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->recovering.has_value();
}

Status Worker::recover() { return impl_->recover(); }

Status Worker::Impl::recover() {
  if (!recoveringNow()) return FailedPrecondition("recover() called, but no node was lost");
  // The scheduler fails the job after ZPS_RECOVERY_TIMEOUT; its Shutdown ends this wait earlier.
  const auto deadline = Clock::now() + config.recovery_timeout + config.heartbeat_timeout + std::chrono::seconds(10);
  for (;;) {
    uint64_t mine;
    {
      std::lock_guard<std::mutex> lock(mu);
      mine = generation;
    }
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                               std::chrono::milliseconds(1));
    pb::RegisterReply book;
    if (client) {
      ZPS_ASSIGN_OR_RETURN(book, client->waitBook(mine, left));
    }
    if (local) {
      // The node's local ranks move together: local rank 0 hands the new book to the others once none
      // of them is inside a local operation, and the turns, barriers and staging start afresh.
      ZPS_ASSIGN_OR_RETURN(std::string bytes, local->restart(local->isRoot() ? book.SerializeAsString() : "", left));
      if (!local->isRoot() && !book.ParseFromString(bytes))
        return InternalError("local rank 0 published an unreadable address book");
      local->setGeneration(book.generation());
      shm_reducer.reset();
      device_reducer.reset();  // a collective cut short may have left the NCCL communicator unusable
    }
    // Links change under mu, which handleReply holds while it reads them, so replies keep flowing.
    {
      std::lock_guard<std::mutex> lock(mu);
      generation = book.generation();
      if (announced_generation <= generation) recovering.reset();
      received.clear();  // the tensors are declared again below and count their rounds from 1
    }
    {
      // Tensors and tables are declared again, in the same order, and get the same keys.
      std::lock_guard<std::mutex> lock(tensors_mu);
      tensors.clear();
      tables.clear();
      placement = std::make_unique<Placement>(config.num_servers);
    }
    ZPS_RETURN_IF_ERROR(linkServers(book));
    Status hello = helloServers();
    bool again;
    {
      std::lock_guard<std::mutex> lock(mu);
      again = recovering.has_value();  // another node was lost meanwhile
    }
    if (again && Clock::now() < deadline) continue;
    ZPS_RETURN_IF_ERROR(hello);
    moveToIpc();  // a replacement server on this host
    LOG(INFO) << "worker " << rank << (local ? " local rank " + std::to_string(config.local_rank) : "")
              << ": reconnected to " << config.num_servers << " servers in generation " << book.generation();
    return Status::OK();
  }
}

// ---- Local reduction (worker/local/local_group.h) ----

StatusOr<pb::RegisterReply> Worker::Impl::registerNode() {
  if (config.local_size > 1) {
    // Every local rank of a node must find the same group: the node's worker id when it has one
    // (zps launch sets it), else the host name (one node per host).
    std::string node_key = config.requested_rank >= 0 ? "rank-" + std::to_string(config.requested_rank)
                                                       : "host-" + config.hostname;
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
    std::lock_guard<std::mutex> lock(mu);
    if (!aborted) aborted = Aborted("job ended by the scheduler: " + s.reason());
    // A normal end (exit 0) reaches the peers through finish(); only failures are relayed here.
    if (local && s.exit_code() != 0) local->abort("job ended by the scheduler: " + s.reason());
    cv.notify_all();
  });
  client->onRecovery([this](const pb::Recovery& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (r.generation() <= generation) return;
    startRecovering(r.generation(), Unavailable("recovering: the scheduler lost " + r.lost()));
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

std::vector<PartitionInfo> Worker::Impl::placeForNode(int id, size_t bytes, size_t esize,
                                                      std::vector<kernels::LocalPiece>* node_pieces) {
  // Pieces of 1/N partition: piece i belongs to local rank i % N, which pushes and pulls it. Every
  // local rank places every piece, so the server loads stay identical on all ranks and nodes. With
  // N = 1 the pieces are the partitions, all owned by this process.
  const size_t n = static_cast<size_t>(config.local_size);
  const size_t piece = std::max(esize, config.partition_bytes / n);
  std::vector<PartitionInfo> all = placement->place(id, bytes, esize, piece);
  std::vector<PartitionInfo> mine;
  for (size_t i = 0; i < all.size(); ++i) {
    const int owner = static_cast<int>(i % n);
    node_pieces->push_back(kernels::LocalPiece{all[i].offset, all[i].bytes, owner});
    if (owner == config.local_rank) mine.push_back(all[i]);
  }
  return mine;
}

StatusOr<LocalReducer*> Worker::Impl::localReducerFor(const void* in, const void* out) {
  const bool on_device = kernels::isDevicePointer(in) || kernels::isDevicePointer(out);
  if (on_device && config.local_reduce == "shm")
    return InvalidArgument("ZPS_LOCAL_REDUCE=shm takes host tensors only, and this one is in GPU memory; "
                           "use auto or nccl");
  if (!on_device && !(local && config.local_reduce == "nccl")) {
    if (!local) return nullptr;  // one process per node, host memory: straight to the servers
    if (!shm_reducer) shm_reducer = makeShmLocalReducer(local.get(), config.request_timeout);
    return shm_reducer.get();
  }
  if (!device_reducer) {
    ZPS_ASSIGN_OR_RETURN(device_reducer, joinNcclLocalReducer(local.get(), config.local_rank, config.local_size,
                                                              config.rendezvous_timeout));
    LOG(INFO) << "worker local rank " << config.local_rank << ": local reduction of GPU tensors with "
              << (config.local_size > 1 ? "NCCL" : "pinned staging (one local rank: no NCCL)");
  }
  return device_reducer.get();
}

Handle Worker::Impl::completedHandle(Status status) {
  auto op = std::make_shared<Op>();
  op->status = std::move(status);
  std::lock_guard<std::mutex> lock(mu);
  Handle handle = next_handle++;
  ops[handle] = op;
  return handle;
}

StatusOr<Handle> Worker::Impl::route(TensorId id, pb::DataCommand command, const void* in, void* out) {
  size_t bytes = 0, network = 0;
  DType dtype = DType::kUInt8;
  {
    std::lock_guard<std::mutex> lock(tensors_mu);
    if (id < 0 || id >= static_cast<int>(tensors.size()))
      return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
    bytes = tensors[id].bytes;
    dtype = tensors[id].dtype;
    for (const auto& p : tensors[id].parts) network += p.bytes;
    // issue() counts the network bytes of pushes: compression makes them smaller than the partitions.
    if (command != pb::CMD_PULL) traffic.tensor_bytes_pushed += bytes;
    if (command != pb::CMD_PUSH) {
      traffic.tensor_bytes_pulled += bytes;
      traffic.network_bytes_pulled += network;
    }
  }
  // A local step is needed with several processes per node, or for a tensor in GPU memory (the
  // servers take host bytes).
  if (!local && !kernels::isDevicePointer(in) && !kernels::isDevicePointer(out)) return issue(id, command, in, out);
  if (!local) {
    std::lock_guard<std::mutex> lock(device_mu);
    return reduceLocally(id, command, bytes, dtype, in, out);
  }
  // Several local ranks: their shared-memory barriers and NCCL collectives must run in one order on
  // every rank, whatever user threads issue them (an interleaving would sum the wrong slots or
  // hang NCCL), so each operation waits for its turn in the order local rank 0 runs them.
  if (auto pending = recoveryPending()) return *pending;  // no turn of the old generation starts
  StatusOr<Handle> handle = InternalError("local operation did not run");
  const uint64_t op = static_cast<uint64_t>(id) << 8 | static_cast<uint64_t>(command);
  Status turn = local->inTurn(op, pb::DataCommand_Name(command) + " of tensor " + std::to_string(id),
                              config.request_timeout, [&] {
                                handle = reduceLocally(id, command, bytes, dtype, in, out);
                                return Status::OK();
                              });
  if (!turn.ok()) {
    abortLocalUnlessRecovering(turn);
    return turn;
  }
  return handle;
}

StatusOr<Handle> Worker::Impl::reduceLocally(TensorId id, pb::DataCommand command, size_t bytes, DType dtype,
                                             const void* in, void* out) {
  auto chosen = localReducerFor(in, out);
  if (!chosen.ok()) {
    abortLocalUnlessRecovering(chosen.status());
    return chosen.status();
  }
  LocalReducer* reducer = *chosen;
  if (reducer == nullptr) return issue(id, command, in, out);
  const char* bad_buffer = in == nullptr && command != pb::CMD_PULL    ? "push with a null buffer"
                           : out == nullptr && command != pb::CMD_PUSH ? "pull into a null buffer"
                                                                       : nullptr;
  if (bad_buffer != nullptr) {
    // The other local ranks are already in this collective and would wait for this one until their
    // deadline: end the group so that they fail now, naming the cause. It is the caller's mistake,
    // which a recovery would not mend, so the group ends even while the job recovers.
    const Status refused = InvalidArgument(std::string(bad_buffer) + " (" + pb::DataCommand_Name(command) +
                                           " of tensor " + std::to_string(id) + ")");
    if (local) local->abort("local rank " + std::to_string(config.local_rank) + ": " + refused.message());
    return refused;
  }

  // The collective runs to completion here; the handle carries its outcome. Every local rank runs
  // the same operations in the same order (route's turns), so the barriers line up.
  const bool pushing = command != pb::CMD_PULL;
  const bool pulling = command != pb::CMD_PUSH;
  auto fail = [this](Status s) {
    abortLocalUnlessRecovering(s);
    return completedHandle(std::move(s));
  };
  std::vector<kernels::LocalPiece> pieces;  // a copy: a concurrent declare may move the tensors
  {
    std::lock_guard<std::mutex> lock(tensors_mu);
    pieces = tensors[id].node_pieces;
  }
  const LocalTensor view{id, bytes, dtype, &pieces};
  auto staging = reducer->staging(view);
  if (!staging.ok()) return fail(staging.status());
  if (pushing) {
    Status s = reducer->reduceScatter(view, in, *staging);
    if (!s.ok()) return fail(s);
  }
  auto handle = issue(id, command, pushing ? *staging : nullptr, pulling ? *staging : nullptr);
  if (!handle.ok()) return fail(handle.status());
  std::shared_ptr<Op> op;
  {
    std::lock_guard<std::mutex> lock(mu);
    op = ops[*handle];
    ops.erase(*handle);
  }
  // Wait in short slices so that a dead peer or an aborted group ends the wait early.
  const auto deadline = Clock::now() + config.request_timeout;
  Status waited;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    waited = waitOp(op, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(200)));
    if (waited.code() != StatusCode::kDeadlineExceeded || Clock::now() >= deadline || !local) break;
    Status health = local->health();
    if (!health.ok()) {
      waited = health;
      break;
    }
  }
  if (!waited.ok()) return fail(waited);
  Status s = reducer->allGather(view, *staging, pulling ? out : nullptr);
  if (!s.ok()) return fail(s);
  return completedHandle(Status::OK());
}

Status Worker::Impl::localBarrier() {
  // A local operation like a push-pull: in its turn, so that its barriers line up with the same
  // barrier's on the other local ranks, not with a collective another thread runs meanwhile.
  constexpr uint64_t kBarrierOp = ~uint64_t{0};
  if (auto pending = recoveryPending()) return *pending;
  Status turn = local->inTurn(kBarrierOp, "barrier", config.rendezvous_timeout, [&] { return localBarrierInTurn(); });
  if (!turn.ok()) abortLocalUnlessRecovering(turn);
  return turn;
}

Status Worker::Impl::localBarrierInTurn() {
  ZPS_RETURN_IF_ERROR(local->barrier("worker barrier", config.rendezvous_timeout));
  if (local->isRoot()) {
    Status s = client->barrier(pb::GROUP_WORKERS, config.rendezvous_timeout);
    // Unavailable: the scheduler announced a recovery, which the other local ranks hear of through
    // the control segment (the client may still be about to tell this process).
    if (!s.ok() && s.code() != StatusCode::kUnavailable) abortLocalUnlessRecovering(s);
    if (!s.ok()) return s;
  }
  return local->barrier("worker barrier release", config.rendezvous_timeout);
}

int Worker::Impl::localFinish(const Status& result) {
  TrafficCounters mine;
  {
    std::lock_guard<std::mutex> lock(tensors_mu);
    mine = traffic;
  }
  const std::string me = "worker " + std::to_string(rank) + " local rank " + std::to_string(config.local_rank);
  if (!local->isRoot()) {
    std::string reason;
    const int code = local->waitExit(result, mine, &reason);
    if (code != 0) LOG(ERROR) << me << ": " << reason;
    else LOG(INFO) << me << ": " << reason;
    return result.ok() ? code : 1;
  }
  if (config.recovery && local->peerDied()) {
    // The node is lost, as a pod would be: leaving without a verdict (the client says goodbye) lets the
    // scheduler hold this rank for a replacement node instead of failing the job.
    LOG(ERROR) << me << ": " << result.message() << "; leaving the job so that a replacement node takes rank "
               << rank << " (ZPS_RECOVERY)";
    return 1;
  }
  TrafficCounters node;
  Status gathered = local->gatherResults(result, mine, config.rendezvous_timeout, &node);
  Status verdict = !result.ok() ? result : gathered;
  if (verdict.ok()) {
    // The property local reduction exists for: a node sends each tensor byte once.
    LOG(INFO) << "worker " << rank << ": node traffic over " << config.local_size << " local ranks: tensor bytes "
              << mine.tensor_bytes_pushed << " pushed / " << mine.tensor_bytes_pulled
              << " pulled per rank; network bytes " << node.network_bytes_pushed << " pushed / "
              << node.network_bytes_pulled << " pulled by the node";
  }
  if (!verdict.ok()) LOG(ERROR) << me << ": " << verdict.message();
  auto shutdown = client->finish(verdict.ok(), verdict.message(), config.rendezvous_timeout);
  if (!shutdown.ok()) {
    local->publishExit(1, shutdown.status().message());
    LOG(ERROR) << me << ": " << shutdown.status().message();
    return 1;
  }
  local->publishExit(verdict.ok() ? shutdown->exit_code() : 1, shutdown->reason());
  if (shutdown->exit_code() != 0) LOG(ERROR) << me << ": " << shutdown->reason();
  else LOG(INFO) << me << ": " << shutdown->reason();
  return verdict.ok() ? shutdown->exit_code() : 1;
}

}  // namespace zps
