// SchedulerClient: a server's or worker's link to the scheduler. It registers, waits for the address book,
// sends heartbeats, runs barriers, reports the end of a worker's program and receives the scheduler's
// Shutdown. It owns its own transport and thread, so control traffic never queues behind tensor traffic
// and heartbeats flow while the role is busy.
//
// A reset connection: ZeroMQ reconnects, and the client registers again as the holder of its rank
// (rejoin), then sends again what the reset may have lost (its open barriers, its "finished"). A
// scheduler that went silent: without ZPS_RECOVERY the job ends as it always did (heartbeat timeout);
// with it the client keeps re-resolving DMLC_PS_ROOT_URI and registering again, so that a restarted
// scheduler (same name, possibly a new address) rebuilds the job from its nodes, for up to
// ZPS_RECOVERY_TIMEOUT.
//
// Lifetime: created and started by the role's main thread; lives until the process exits. Public methods
// may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "ps/transport/transport.h"

namespace zps {

class SchedulerClient {
 public:
  // `listen_port` is the port this node accepts data connections on (0 for workers). `auth` is the role's
  // own Authenticator (built once per process, so a token file is read once).
  // A server passes its listener's data salt (Register.data_salt); workers pass none.
  SchedulerClient(const Config& config, Authenticator auth, int listen_port, std::string data_salt = "");
  ~SchedulerClient();

  // Resolves the scheduler, registers and waits for the address book. Errors:
  //  kInvalidArgument   the scheduler host does not resolve (user error, exit 2);
  //  kFailedPrecondition the scheduler refused this node (the message says why);
  //  kAborted           the scheduler shut the job down during rendezvous (message = its report);
  //  kDeadlineExceeded  no address book in time.
  StatusOr<pb::RegisterReply> start();

  // Waits until every member of `group` reached this barrier. A barrier belongs to the generation the
  // role works in; kUnavailable (recovering) when a newer one has been announced, before or during the
  // wait (ZPS_RECOVERY): the role recovers (waitBook) and enters the barrier again, counted afresh.
  Status barrier(pb::BarrierGroup group, std::chrono::milliseconds timeout);

  // ZPS_RECOVERY. The generation of the address book in use (0 until a node is lost).
  uint64_t generation() const;
  // Waits for the address book of a generation newer than `generation`; the role works in that
  // generation from then on (its barriers count afresh). kAborted when the job ends meanwhile,
  // kDeadlineExceeded after `timeout`.
  StatusOr<pb::RegisterReply> waitBook(uint64_t generation, std::chrono::milliseconds timeout);
  // Called on the client's thread when the scheduler announces that a node was lost. Set before start().
  void onRecovery(std::function<void(const pb::Recovery&)> callback) { on_recovery_ = std::move(callback); }

  // Tells the scheduler this worker's program ended and waits for the Shutdown that ends the job.
  // Returns the exit code the scheduler asks for.
  StatusOr<pb::Shutdown> finish(bool ok, const std::string& message, std::chrono::milliseconds timeout);

  // Blocks until the job ends: the scheduler's Shutdown, or a synthesized one (exit 1) when the scheduler
  // goes silent for the heartbeat timeout.
  pb::Shutdown waitShutdown();
  std::optional<pb::Shutdown> shutdown() const;
  // Called once, on the client's thread, when the job is shut down. Set before start().
  void onShutdown(std::function<void(const pb::Shutdown&)> callback) { on_shutdown_ = std::move(callback); }

  std::string schedulerAddress() const { return scheduler_address_; }
  // Adds the node's observability figures to every heartbeat (called on the client's thread). Set
  // before start().
  void onHeartbeat(std::function<void(pb::Heartbeat*)> fill) { fill_heartbeat_ = std::move(fill); }

 private:
  void loop();
  void handle(const pb::Control& control);
  void setShutdown(pb::Shutdown s);
  // A recovery the scheduler announced (or that its newer address book implies); once per generation.
  void noteRecovery(const pb::Recovery& r);
  Status sendControl(const pb::Control& c);
  // A fresh Register (new nonce and MAC); `rejoin`: as the holder of this node's rank.
  pb::Control registration(bool rejoin);
  // Registers again as the holder of this node's rank (called on the client's thread).
  void rejoin(const std::string& why);
  // The scheduler answered a rejoin: sends again what the reset may have lost.
  void resendAfterRejoin();
  // ZPS_RECOVERY and a silent scheduler: re-resolves its name, moves to a new address, registers again.
  // Returns false when it stayed away too long (the job ends).
  bool seekScheduler(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point last);

  const Config config_;
  const Authenticator auth_;
  const int listen_port_;
  const std::string data_salt_;
  std::unique_ptr<Transport> transport_;
  std::atomic<PeerId> scheduler_{0};  // changes (on the client's thread) when the scheduler's address changes
  std::string scheduler_address_;
  std::string scheduler_ip_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reconnected_{false};  // set by the transport's I/O thread
  // The client's thread only: a rejoin waits for the scheduler's answer; when the scheduler went silent.
  bool rejoining_ = false;
  bool seeking_ = false;
  std::chrono::steady_clock::time_point next_seek_;
  std::chrono::steady_clock::time_point next_rejoin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<pb::RegisterReply> reply_;
  std::vector<std::string> nonces_;       // of the registrations sent before the first book (its MAC names one)
  std::optional<pb::Finished> finished_;  // sent by finish(); sent again after a rejoin
  std::optional<pb::Shutdown> shutdown_;
  // Barriers belong to the generation the role works in: the book's at start(), then the one each
  // waitBook() moved it to (the role recovered). Counted afresh in each.
  uint64_t working_generation_ = 0;
  // The newest generation announced (a recovery), raised only after on_recovery_ ran: a barrier that
  // fails because of it finds the role already told (Worker::recovering() true).
  uint64_t announced_generation_ = 0;
  uint64_t barrier_sent_[4] = {0, 0, 0, 0};
  uint64_t barrier_released_[4] = {0, 0, 0, 0};
  std::chrono::steady_clock::time_point last_heard_;
  std::function<void(const pb::Shutdown&)> on_shutdown_;
  std::function<void(const pb::Recovery&)> on_recovery_;
  std::optional<pb::Recovery> recovery_;  // the latest announced
  std::function<void(pb::Heartbeat*)> fill_heartbeat_;
};

}  // namespace zps
