// ServerLinks: the worker's connections to the servers. Connects to each server of an address book,
// binds each connection to this worker with a HELLO (with ZPS_AUTH_TOKEN, a MAC both ways), moves
// connections to servers on this host to their ipc socket, and reconnects to a replacement server
// after a recovery. Maps a transport peer back to its server rank for incoming replies.
//
// Push lanes (ZPS_PUSH_LANE=1, the default, once the job schedules pushes: ZPS_PRIORITY=1 or a tensor
// declared with a priority): a second connection to each server, bound to the first with the token of
// its HELLO reply, carries the scheduled pushes (requests holding push
// credit, worker/scheduling/push_scheduler.h); everything else stays on the first. A server answers on the
// connection a request came in on, so the acknowledgements that return push credit travel alone on
// the lane's way back instead of behind the sums queued on the first connection's. The lane follows
// the first connection to the ipc socket; a lane that cannot open leaves its pushes on the first.
//
// Owned by the Worker for its whole life; the transport outlives it. Thread-safe: callers' threads
// link and send, the transport's I/O thread maps peers and records HELLO replies. Its lock is a
// leaf: it never calls the RequestTable while holding it.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "ps/transport/transport.h"
#include "worker/request_table.h"

namespace zps {

class ServerLinks final : public ReplyReceiver {
 public:
  ServerLinks(const Config& config, const Authenticator& auth, int rank, Transport* transport, RequestTable* requests);

  // Connects to every server of the address book whose address is new (all of them at the start; a
  // replacement's after a recovery).
  Status link(const pb::RegisterReply& book);
  // HELLO to every server. After a lost node a server may not have heard of the new generation yet:
  // it answers "recovering" until it has, so the HELLOs are repeated until the connect deadline,
  // unless `stop_retrying` says another node was lost.
  Status hello(const std::function<bool()>& stop_retrying);
  // Servers on this host move to their ipc socket: about 1.3-2x the throughput of TCP loopback for
  // large messages (tools/bench/loopback.cc). `unix_sockets` is /proc/net/unix, which lists this
  // network namespace's sockets; a server's socket is reachable only when it shows there. When the
  // move fails the TCP connection stays. ZPS_IPC=0 keeps every link on TCP. Logs which transport
  // each link uses.
  void moveToIpc(const std::string& unix_sockets);
  // The job schedules pushes (ZPS_PRIORITY=1 at the start, or the first tensor declared with a
  // priority): from now on the lanes are wanted, and opened now (after hello() and moveToIpc()).
  void wantLanes();
  // With ZPS_PUSH_LANE, once lanes are wanted: opens the push lane of every server whose lane is not
  // open (again after a recovery: a server that started a new generation forgot the lane, which is
  // then bound again over the same connection). A lane that fails to open is logged and its
  // server's pushes stay on the first connection.
  void openLanes();
  // Whether `server` said in its latest HELLO reply that it applies fused messages (an older server
  // does not: requests to it then go one per message).
  bool acceptsFused(int server) const;
  // How many servers' push lanes are open.
  int openLaneCount() const;
  // "0 ipc://@zps-1f2e..., 1 tcp://10.0.0.2:9001": each server's link, in rank order.
  std::string transports() const;

  Status send(const RequestSpec& to, std::vector<Blob> frames);
  // The calling thread receives on `server`'s first connection itself until done() or the deadline
  // (see Transport::receiveOn); false when it could not, or when it waits for scheduled `pushes` while
  // the server's push lane is open: their answers come on the lane, which the I/O thread reads, and a
  // caller inside receiveOn would not hear of them. Everything else is answered on the first connection.
  bool receiveFrom(int server, bool pushes, std::chrono::steady_clock::time_point deadline,
                   const std::function<bool()>& done) override;
  // Threads inside receiveFrom check their done() again.
  void wakeReceivers() override { transport_->wakeReceivers(); }
  // See Transport::beginWaitOnIoThread.
  void waitOnIoThread(bool begin) override {
    begin ? transport_->beginWaitOnIoThread() : transport_->endWaitOnIoThread();
  }
  // The server rank of a transport peer; nullopt for a peer that is no (longer a) server link.
  std::optional<int> serverOf(PeerId peer) const;
  // "server 1 (127.0.0.1:9001)"
  std::string describe(int server) const;

 private:
  struct Link {
    PeerId peer = 0;
    std::string address;
    // From the server's HELLO reply: its ipc socket and this connection's token for moving there.
    std::string ipc_name;
    uint64_t upgrade_token = 0;
    bool on_ipc = false;  // peer is the ipc connection
    PeerId tcp = 0;       // on ipc: the TCP connection it moved from (replies may still come there)
    std::string ip;       // resolved, for the lane's TCP connection
    int port = 0;
    std::string password;  // the server's PLAIN password ("": the transport's own)
    // The push lane: the token from the latest HELLO reply on `peer` (0 once used or when none came),
    // the lane's connection (0 until connected), and whether the server accepted it in the current
    // generation (scheduled pushes use it only then).
    uint64_t lane_token = 0;
    PeerId lane = 0;
    bool lane_open = false;
    bool accepts_fused = false;  // from the latest HELLO reply on `peer`
  };

  void moveToIpcIfAllowed(const std::string& unix_sockets);
  Status helloOnce(std::chrono::steady_clock::time_point deadline);
  // A HELLO to `server` (via `peer`, or its link's), the reply checked for its MAC and ipc offer;
  // with `lane_token`, the HELLO that binds the push lane `peer`.
  OutgoingRequest helloTo(int server, uint64_t upgrade_token, std::optional<PeerId> peer = std::nullopt,
                          uint64_t lane_token = 0);
  // The lane's connection to `server`: the one it has, or a new one beside `link`'s.
  StatusOr<PeerId> lanePeer(int server, const Link& link);

  const Config& config_;
  const Authenticator& auth_;
  const int rank_;
  Transport* const transport_;
  RequestTable* const requests_;

  mutable std::mutex mu_;
  std::vector<Link> links_;
  std::unordered_map<PeerId, int> server_of_peer_;
  bool lanes_wanted_ = false;
};

}  // namespace zps
