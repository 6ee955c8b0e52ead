// Worker::Impl: the worker's parts, created and wired together by start(), behind the public facade
// (worker.cc):
//   RequestTable (request_table.h)    requests in flight, fan-out-and-wait, replies, cancellation
//   ServerLinks (server_links.h)      connections to the servers, HELLO, ipc
//   DenseTensors (dense_tensors.h)    declared tensors, rounds, push/pull requests
//   PushScheduler (push_scheduler.h)  priority order and credits of scheduled requests
//   Tables (tables.h)                 embedding tables (param mode)
//   RecoveryState (recovery_state.h)  generations, and whether the job recovers (ZPS_RECOVERY)
//   LocalPath (local_path.h)          local reduction, the node's barrier and end of the job
// Threads:
//  - the caller's threads issue push/pull/pushPull and wait;
//  - the data transport's I/O thread moves bytes, and also decodes replies, copies pulled bytes
//    into the caller's buffers and completes operations (handleReply); a caller waiting for the
//    replies of one server does that itself (RequestWaiter, through the ServerLinks);
//  - with ZPS_RESEND_TIMEOUT, a thread that resends overdue requests;
//  - with ZPS_RECOVERY and several local ranks, a thread that watches the node's control segment
//  for
//    a new generation announced by another local rank;
//  - the SchedulerClient's thread (heartbeats, barriers, shutdown).
// Owned by the Worker, one per process.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "ps/node/scheduler_client.h"
#include "ps/wire/codec.h"
#include "worker/dense_tensors.h"
#include "worker/local/local_group.h"
#include "worker/local_path.h"
#include "worker/recovery_state.h"
#include "worker/request_table.h"
#include "worker/request_waiter.h"
#include "worker/scheduling/push_scheduler.h"
#include "worker/server_links.h"
#include "worker/tables.h"
#include "worker/worker_observer.h"
#include "zps/worker.h"

namespace zps {

// The request table's route (request_route.h): its requests go to the PushScheduler, and the
// observer hears of each.
struct Worker::Impl final : RequestRoute {
  // Declared in the order they are needed: the scheduler client's thread uses the request table,
  // the recovery state and the local group until the client is destroyed.
  Config config;
  Authenticator auth = Authenticator::withToken("");
  std::unique_ptr<WorkerObserver> obs;  // the client's thread fills heartbeats from it
  // Priority scheduling's queues, in front of the links (where the request table's route sends).
  std::unique_ptr<PushScheduler> scheduler;
  std::unique_ptr<RequestTable> requests;
  // The data path's waits (Worker::wait, the local path), which receive through the links.
  std::unique_ptr<RequestWaiter> waits;
  std::unique_ptr<RecoveryState> recovery;
  // Local reduction (ZPS_LOCAL_SIZE > 1); null otherwise. Non-root local ranks have no client.
  std::unique_ptr<LocalGroup> local;
  std::unique_ptr<SchedulerClient> client;
  std::unique_ptr<Transport> transport;
  // Also the waits' ReplyReceiver while it exists.
  std::unique_ptr<ServerLinks> links;
  std::unique_ptr<DenseTensors> tensors;
  std::unique_ptr<Tables> tables;
  std::unique_ptr<LocalPath> local_path;
  wire::Limits limits;
  int rank = -1;

  std::atomic<bool> stop{false};
  std::thread resender;        // only with ZPS_RESEND_TIMEOUT
  std::thread recovery_watch;  // only with ZPS_RECOVERY and several local ranks

  ~Impl() override;
  // RequestRoute
  Status send(const RequestSpec& to, std::vector<Blob> frames) override;
  Status sendAll(std::vector<ReadyRequest> requests) override;
  std::string describeServer(int server) const override;
  void issued(uint64_t id, const OutgoingRequest& request) override;
  void completed(uint64_t id, bool ok) override;
  void wakeWaiters() override;
  // Registers with the scheduler, connects to every server and starts the threads.
  Status start();
  Status recover();
  // "worker 3" or "worker 3 local rank 1", for messages.
  std::string me() const;

 private:
  StatusOr<pb::RegisterReply> registerNode();
  void handleReply(const TransportMessage& msg);
  // One reply (or one entry of a fused reply) to the request table, and a server's "recovering" noted.
  void deliverReply(int server, const wire::DataMessage& reply, const std::string& from);
  void moveToIpc();
};

}  // namespace zps
