// LocalGroup: the processes of one worker node (one per GPU, ZPS_LOCAL_SIZE of them) and the shared
// memory they reduce through. It is the CPU twin of the NCCL local reduction: per tensor, every
// local rank copies its input into its own slot, each rank sums the pieces it owns across all slots
// (reduce-scatter), push-pulls only those pieces with the servers, and everyone copies the summed
// tensor back out (all-gather). So a node sends each tensor byte once, whatever its local size.
//
// Who registers with the scheduler: only local rank 0 (the local root). DMLC_NUM_WORKER counts
// nodes, the servers count one push per node and key, and the scheduler's barriers and job end are
// per node, so a node must look like one worker to them. The other local ranks get the node's rank
// and the servers' addresses from the root through the control segment, and connect to the servers
// themselves with that rank (HELLO carries their local rank), because each pushes its own pieces.
// The root speaks for the node: it relays the scheduler's end of the job to its peers and reports
// the node's combined result. A dead local rank is noticed by its peers (the lock it holds on its
// byte of the control segment is released by the kernel when it dies) and fails the node. At the
// job's end a rank marks itself as leaving (leave()) before its lock goes, so a peer still checking
// on it takes that for a departure, not a death.
//
// Shared memory: the root creates a private folder (mode 0700) under ZPS_SHM_DIR named after the
// job and node, and in it a control file and a data file (mode 0600). Every rank maps both, and as
// soon as all have, the root unlinks them and removes the folder: from then on no name exists, and
// the kernel frees the memory with the last mapping, however the processes end. Tensor staging
// grows the (nameless) data file through the descriptors the ranks keep. A peer that notices a
// death during the short attach window removes the folder itself.
//
// Ordering: the worker runs every local operation (a push/pull/pushPull through the local reducer)
// inside inTurn(), which gives all local ranks one order whatever threads issue them: local rank 0
// runs its operations in the order its threads arrive and announces each one in the control
// segment; the peers run theirs in that announced order. barrier() and arena() are called only
// inside a turn; abort() and health() from any thread. The job's worker barrier (workerBarrier) is
// no turn: a turn runs its push-pull to the end, so a barrier in the turn order would wait for a
// push-pull that another node issues only after the barrier (a script that starts an async
// allreduce and then calls barrier() on one worker, and the other way round on another), and
// that push-pull for the barrier: both would wait out their deadlines. As without local ranks,
// the barrier and the push-pulls of other threads do not wait for each other.
//
// Recovery (ZPS_RECOVERY): a lost node moves the job to a new generation. Whichever local rank hears
// of it first (local rank 0 from the scheduler, the others from a server's "recovering" reply)
// announces it in the control segment, and every local wait of an older generation (a barrier, a
// turn, the NCCL id) then fails as Unavailable instead of waiting for a peer that stopped to recover.
// Each rank's Worker::recover() then calls restart(): local rank 0 waits until no peer is inside a
// local operation any more, resets the turn order, the barrier count and the staging arenas, and
// hands its peers the new address book. The group is never aborted by a recovery.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/common/config.h"
#include "zps/status.h"
#include "zps/worker.h"

namespace zps {

// Bytes one process moved (summed per node by the root at the end of the job).
using LocalTraffic = TrafficCounters;

class LocalGroup {
 public:
  // Joins (root: creates) the group of this node. Blocks until every local rank has attached, or
  // fails after config.rendezvous_timeout naming the missing ranks. `node_key` names the node
  // uniquely within the job (DMLC_WORKER_ID or the host name).
  static StatusOr<std::unique_ptr<LocalGroup>> join(const Config& config, const std::string& node_key);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int localRank() const { return rank_; }
  int localSize() const { return size_; }
  bool isRoot() const { return rank_ == 0; }

  // Runs `body` as this node's next local operation, identified by `op` (equal on every local rank
  // for the same operation) and described by `what` for error messages. Serialises the local
  // operations of this process, and orders them as local rank 0 runs them. A peer thread whose
  // operation local rank 0 does not announce within `timeout` (with no other progress meanwhile)
  // fails naming both operations: the local ranks issued different calls.
  Status inTurn(uint64_t op, const std::string& what, std::chrono::milliseconds timeout,
                const std::function<Status()>& body);

  // Waits until every local rank reached this barrier. Fails when a local rank dies, the group is
  // aborted, or `timeout` passes; the message names who is missing.
  Status barrier(const std::string& what, std::chrono::milliseconds timeout);
  // The same for the job's worker barrier (Worker::barrier), on arrivals of its own: it runs outside
  // the turns, beside a collective another thread of the process is in, whose barriers it must not
  // take. `between` runs once every local rank arrived and before any leaves (the root's barrier
  // with the other nodes). One worker barrier of this process at a time.
  Status workerBarrier(std::chrono::milliseconds timeout, const std::function<Status()>& between);

  // The root hands the scheduler's address book (serialized) to its peers; they wait for it.
  // Both mailboxes (book, NCCL id) are posted once per epoch: at the start and after each restart().
  Status publishBook(const std::string& book);
  StatusOr<std::string> waitBook(std::chrono::milliseconds timeout);
  // The same for the NCCL unique id of the node's communicator (worker/local/local_reducer.h).
  Status publishNcclId(const std::string& id);
  StatusOr<std::string> waitNcclId(std::chrono::milliseconds timeout);

  // Staging for one tensor of `bytes` bytes: slot(r) is local rank r's input, result() the sum.
  // Collective: every rank calls it for the same tensors in the same order. Cached per tensor id.
  struct Arena {
    std::vector<uint8_t*> slots;
    uint8_t* result = nullptr;
    size_t bytes = 0;
  };
  StatusOr<Arena> arena(int tensor_id, size_t bytes);

  // ZPS_RECOVERY. The generation of the address book this rank uses (the start's, then restart's).
  void setGeneration(uint64_t generation) { generation_.store(generation); }
  // Tells every local rank that the job moved to `generation` (ignored unless newer). Thread-safe.
  void announceRecovery(uint64_t generation, const std::string& why);
  // The newest generation announced (0 if none) and, through `why`, what was lost.
  uint64_t announcedGeneration(std::string* why);
  // Collective over the local ranks, each from Worker::recover() with no local operation in flight:
  // local rank 0 passes the new address book (serialized), the others get it back. Fails when a
  // local rank dies or `timeout` passes, naming the local ranks that did not come.
  StatusOr<std::string> restart(const std::string& root_book, std::chrono::milliseconds timeout);
  // Whether some other local rank of this node has died (its liveness lock is free).
  bool peerDied() { return !deadPeer().empty(); }

  // Ends the group for everyone with `reason` (first caller wins). Thread-safe.
  void abort(const std::string& reason);
  // The first abort reason, or a dead peer's description; OK while the group is healthy.
  Status health();

  // Job end. Each rank reports its result and traffic. The root waits for every rank's report and
  // returns the node's verdict (a failed wait, or the first local rank's failure) and traffic;
  // after telling the scheduler, it publishes the job's exit code and reason with publishExit().
  // Non-roots wait for that, and leave() the group once they have it.
  Status gatherResults(const Status& mine, const LocalTraffic& traffic, std::chrono::milliseconds timeout,
                       LocalTraffic* node_total);
  void publishExit(int exit_code, const std::string& reason);
  int waitExit(const Status& mine, const LocalTraffic& traffic, std::string* reason);
  // This rank has its exit code and goes: its peers take its end for a departure, not a death.
  // Called last, by the rank's finish (the root after publishExit).
  void leave();

  // Test hook (ZPS_TEST_LOCAL_CRASH=<local rank>): that rank SIGKILLs itself at its first
  // collective, so tests can check that no segment survives and that its peers fail clearly.
  void maybeCrashForTest();

 private:
  struct Control;
  struct Mailbox;
  // kTimed: until `timeout`; kLocalOp: the same, and a newer generation announced ends it
  // (Unavailable); kWhileRootLives: without a deadline while local rank 0 lives.
  enum class Wait { kTimed, kLocalOp, kWhileRootLives };
  Status post(Mailbox box, const std::string& bytes, const char* what);
  StatusOr<std::string> collect(Mailbox box, const std::string& what, std::chrono::milliseconds timeout, Wait kind);
  LocalGroup(int rank, int size) : rank_(rank), size_(size) {}
  Status attach(const Config& config, const std::string& folder);
  // Empty when every peer holds its liveness lock; otherwise names the first dead one.
  std::string deadPeer();
  Status waitFor(const std::function<bool()>& done, const std::string& what, std::chrono::milliseconds timeout,
                 Wait kind);
  // One barrier over `arrivals`: the `generation`-th time every local rank arrived.
  Status arriveAndWait(uint64_t& arrivals, uint64_t generation, const std::string& what,
                       std::chrono::milliseconds timeout);
  void removeFolder();
  // This rank's end (its status and traffic) in its report slot, for gatherResults and waitExit.
  void report(const Status& mine, const LocalTraffic& traffic);

  const int rank_;
  const int size_;
  std::string folder_;
  bool folder_removed_ = false;
  int control_fd_ = -1;
  int data_fd_ = -1;
  Control* control_ = nullptr;
  size_t control_bytes_ = 0;
  uint64_t barrier_generation_ = 0;
  // Held during workerBarrier (and restart); guards worker_barrier_generation_.
  std::mutex worker_barrier_mu_;
  uint64_t worker_barrier_generation_ = 0;
  uint32_t epoch_ = 1;  // restarts so far + 1: tags the mailboxes' posts and the restart arrivals
  std::atomic<uint64_t> generation_{0};
  std::mutex turn_mu_;      // held while a thread of this process runs its local operation
  uint64_t next_turn_ = 1;  // the number of this process's next local operation (guarded by turn_mu_)
  size_t data_mapped_ = 0;  // bytes of the data file mapped so far, in arenas
  std::vector<std::pair<void*, size_t>> mappings_;
  std::vector<Arena> arenas_;  // by tensor id
  int crash_rank_ = -1;
  bool crashed_checked_ = false;
  std::chrono::milliseconds slow_exit_{0};  // ZPS_TEST_LOCAL_SLOW_EXIT (waitExit)
};

}  // namespace zps
