#include "worker/local/local_group.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "ps/common/settings.h"
#include "worker/local/byte_lock.h"
#include "worker/local/local_group_control.h"

namespace zps {

using local_control::copyText;
using local_control::kBookBytes;
using local_control::kMagic;
using local_control::kNcclIdBytes;
using local_control::kPage;
using local_control::kTextBytes;
using local_control::shared;

namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting rank looks for dead peers: a few syscalls, cheap against the sleeps.
constexpr auto kHealthInterval = std::chrono::milliseconds(20);

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

StatusOr<std::unique_ptr<LocalGroup>> LocalGroup::join(const Config& config, const std::string& node_key) {
  if (config.local_size < 1 || config.local_size > kMaxLocalSize) {
    return InvalidArgument("ZPS_LOCAL_SIZE must be 1 to " + std::to_string(kMaxLocalSize));
  }
  // The folder name must be the same for every local rank of the node and differ between jobs
  // and nodes sharing a machine; a hash keeps odd characters of host names out of the path.
  const std::string id = config.root_uri + ":" + std::to_string(config.root_port) + "/" + node_key;
  const uint64_t hash = std::hash<std::string>{}(id);
  char name[96];
  std::snprintf(name, sizeof(name), "/zps-local-%u-%016llx", static_cast<unsigned>(getuid()),
                static_cast<unsigned long long>(hash));
  std::unique_ptr<LocalGroup> group(new LocalGroup(config.local_rank, config.local_size));
  // Test hooks: settings like any other, read from this process's environment.
  ZPS_RETURN_IF_ERROR(readInto(&group->crash_rank_, processEnv(), settings::kTestLocalCrash));
  ZPS_ASSIGN_OR_RETURN(long long slow_exit_ms, readInteger(processEnv(), settings::kTestLocalSlowExit));
  group->slow_exit_ = std::chrono::milliseconds(slow_exit_ms);
  ZPS_RETURN_IF_ERROR(group->attach(config, config.shm_dir + name));
  return group;
}

LocalGroup::~LocalGroup() {
  for (auto& [ptr, bytes] : mappings_) munmap(ptr, bytes);
  if (control_ != nullptr) munmap(control_, control_bytes_);
  if (data_fd_ >= 0) close(data_fd_);
  if (control_fd_ >= 0) close(control_fd_);
  if (!folder_removed_ && isRoot()) removeFolder();
}

void LocalGroup::removeFolder() {
  if (folder_.empty()) return;
  for (const char* file : {"/ctl", "/ctl.tmp", "/data"}) unlink((folder_ + file).c_str());
  rmdir(folder_.c_str());
  folder_removed_ = true;
}

Status LocalGroup::attach(const Config& config, const std::string& folder) {
  folder_ = folder;
  control_bytes_ = roundUp(sizeof(Control), kPage);
  const auto deadline = Clock::now() + config.rendezvous_timeout;
  const std::string ctl = folder + "/ctl";
  const std::string data = folder + "/data";
  if (isRoot()) {
    if (mkdir(folder.c_str(), 0700) != 0) {
      if (errno != EEXIST) return InvalidArgument(errnoText("cannot create " + folder + " (ZPS_SHM_DIR)"));
      struct stat st;
      if (lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
        return FailedPrecondition(folder + " exists but is not a folder of this user; remove it");
      }
      // A folder left by a crash during an earlier attach: reuse it unless its root still lives.
      int old = open(ctl.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
      if (old >= 0) {
        const bool live = byteLocked(old, 0);
        close(old);
        if (live) {
          return FailedPrecondition("another local rank 0 of this node is running (" + folder +
                                    "); give each process its own ZPS_LOCAL_RANK");
        }
      }
      for (const char* file : {"/ctl", "/ctl.tmp", "/data"}) unlink((folder + file).c_str());
    }
    if (chmod(folder.c_str(), 0700) != 0) return InternalError(errnoText("chmod " + folder));
    const std::string tmp = folder + "/ctl.tmp";
    control_fd_ = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (control_fd_ < 0) return InternalError(errnoText("cannot create " + tmp));
    data_fd_ = open(data.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (data_fd_ < 0) return InternalError(errnoText("cannot create " + data));
    if (fchmod(control_fd_, 0600) != 0 || fchmod(data_fd_, 0600) != 0 ||
        ftruncate(control_fd_, static_cast<off_t>(control_bytes_)) != 0) {
      return InternalError(errnoText("cannot size " + tmp));
    }
    void* p = mmap(nullptr, control_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, control_fd_, 0);
    if (p == MAP_FAILED) return InternalError(errnoText("cannot map " + tmp));
    control_ = static_cast<Control*>(p);
    if (!lockByte(control_fd_, 0)) return InternalError(errnoText("cannot lock " + tmp));
    control_->size = static_cast<uint32_t>(size_);
    control_->pids[0] = static_cast<int32_t>(getpid());
    shared(control_->attached).store(1);
    shared(control_->magic).store(kMagic);
    // Peers look for "ctl" only, so they never see a half-initialised segment.
    if (rename(tmp.c_str(), ctl.c_str()) != 0) return InternalError(errnoText("cannot publish " + ctl));
    const Status all =
        waitFor([&] { return shared(control_->attached).load() == static_cast<uint32_t>(size_); },
                "waiting for the " + std::to_string(size_) + " local ranks of this node to attach to " + folder,
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()), Wait::kTimed);
    // Every rank holds descriptors now (or we give up): no name needs to survive.
    removeFolder();
    if (!all.ok()) {
      return all.withContext(std::to_string(shared(control_->attached).load()) + " of " + std::to_string(size_) +
                             " attached");
    }
    LOG(INFO) << "local rank 0: " << size_ << " local ranks attached; shared memory unlinked";
    return Status::OK();
  }

  // A non-root rank: wait for a live root's control segment.
  for (;;) {
    if (Clock::now() > deadline) {
      return DeadlineExceeded("local rank " + std::to_string(rank_) + ": local rank 0 of this node did not create " +
                              ctl + " within the rendezvous timeout; is it running with the same DMLC_WORKER_ID?");
    }
    const int fd = open(ctl.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
      close(fd);
      return FailedPrecondition(ctl + " is not a private file of this user; refusing to use it");
    }
    if (static_cast<size_t>(st.st_size) < control_bytes_ || !byteLocked(fd, 0)) {
      close(fd);  // stale, from a dead root: the new root will replace it
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    control_fd_ = fd;
    break;
  }
  data_fd_ = open(data.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (data_fd_ < 0) return InternalError(errnoText("cannot open " + data));
  void* p = mmap(nullptr, control_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, control_fd_, 0);
  if (p == MAP_FAILED) return InternalError(errnoText("cannot map " + ctl));
  control_ = static_cast<Control*>(p);
  if (shared(control_->magic).load() != kMagic) return InternalError(ctl + " is not a zps control segment");
  if (control_->size != static_cast<uint32_t>(size_)) {
    return InvalidArgument("ZPS_LOCAL_SIZE=" + std::to_string(size_) + " but local rank 0 of this node has " +
                           std::to_string(control_->size) + "; give every process of a node the same local size");
  }
  if (!lockByte(control_fd_, rank_)) {
    return InvalidArgument("local rank " + std::to_string(rank_) + " of this node is already taken by pid " +
                           std::to_string(control_->pids[rank_]) + "; give each process its own ZPS_LOCAL_RANK");
  }
  control_->pids[rank_] = static_cast<int32_t>(getpid());
  shared(control_->attached).fetch_add(1);
  return Status::OK();
}

std::string LocalGroup::deadPeer() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const int32_t pid = shared(control_->pids[r]).load();
    if (pid == 0) continue;  // not attached yet: the attach deadline covers it
    // The lock first, then the flag: a rank sets its flag before its lock goes, so a free lock with
    // no flag behind it is a death, never a rank that finished and left after the job's end.
    if (!byteLocked(control_fd_, r) && shared(control_->left[r]).load(std::memory_order_acquire) == 0) {
      return "local rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") of this node died";
    }
  }
  return "";
}

Status LocalGroup::health() {
  if (shared(control_->aborted).load() == 2) {
    return Aborted(std::string("local group aborted: ") + control_->abort_reason);
  }
  std::string dead = deadPeer();
  if (!dead.empty()) {
    // It may have died while the folder still had names in it.
    if (!folder_removed_) removeFolder();
    return Aborted(dead);
  }
  return Status::OK();
}

void LocalGroup::abort(const std::string& reason) {
  uint32_t expected = 0;
  if (!shared(control_->aborted).compare_exchange_strong(expected, 1)) return;
  copyText(control_->abort_reason, reason);
  shared(control_->aborted).store(2);
}

void LocalGroup::announceRecovery(uint64_t generation, const std::string& why) {
  auto announced = shared(control_->recovery_generation);
  uint64_t current = announced.load(std::memory_order_acquire);
  if (generation <= current) return;
  // Two ranks announcing at once may mix their texts; the generation itself stays exact.
  copyText(control_->recovery_reason, why);
  while (generation > current && !announced.compare_exchange_weak(current, generation, std::memory_order_acq_rel)) {
  }
}

uint64_t LocalGroup::announcedGeneration(std::string* why) {
  const uint64_t generation = shared(control_->recovery_generation).load(std::memory_order_acquire);
  if (why != nullptr) {
    char text[kTextBytes];
    std::memcpy(text, control_->recovery_reason, kTextBytes);
    text[kTextBytes - 1] = '\0';
    *why = text;
  }
  return generation;
}

StatusOr<std::string> LocalGroup::restart(const std::string& root_book, std::chrono::milliseconds timeout) {
  // Held throughout: no thread of this process starts a local operation of the old epoch meanwhile.
  std::lock_guard<std::mutex> lock(turn_mu_);
  std::lock_guard<std::mutex> barrier_lock(worker_barrier_mu_);
  const uint32_t next = epoch_ + 1;
  std::string book = root_book;
  const Mailbox box{&control_->book_ready, &control_->book_bytes, control_->book, kBookBytes};
  if (isRoot()) {
    auto missing = [&] {
      std::string who;
      for (int r = 1; r < size_; ++r) {
        if (shared(control_->restart_arrived[r]).load(std::memory_order_acquire) >= next) continue;
        who += (who.empty() ? "" : ", ") + std::to_string(r);
      }
      return who;
    };
    Status arrived = waitFor([&] { return missing().empty(); },
                             "local rank 0 waiting for the other local ranks to stop their local operations "
                             "and move to the new generation",
                             timeout, Wait::kTimed);
    if (!arrived.ok()) return arrived.withContext("local ranks still missing: " + missing());
    // Nobody is inside a local operation now: the old epoch's turns, barrier arrivals and arenas go.
    shared(control_->barrier_arrivals).store(0);
    shared(control_->worker_barrier_arrivals).store(0);
    shared(control_->turn).store(0);
    shared(control_->turn_op).store(0);
    for (int r = 0; r < size_; ++r) shared(control_->turns_taken[r]).store(0);
    struct stat st;
    if (fstat(data_fd_, &st) != 0) return InternalError(errnoText("cannot size the local staging memory"));
    control_->data_offset = static_cast<uint64_t>(st.st_size);
    epoch_ = next;
    ZPS_RETURN_IF_ERROR(post(box, book, "address book"));  // releases the stores above
  } else {
    shared(control_->restart_arrived[rank_]).store(next, std::memory_order_release);
    epoch_ = next;
    ZPS_ASSIGN_OR_RETURN(book, collect(box,
                                       "local rank " + std::to_string(rank_) +
                                           " waiting for local rank 0's address book of the new generation",
                                       timeout, Wait::kTimed));
  }
  next_turn_ = 1;
  barrier_generation_ = 0;
  worker_barrier_generation_ = 0;
  arenas_.clear();  // the mappings stay until the end; new arenas start after every old one
  data_mapped_ = static_cast<size_t>(control_->data_offset);
  return book;
}

Status LocalGroup::waitFor(const std::function<bool()>& done, const std::string& what,
                           std::chrono::milliseconds timeout, Wait kind) {
  const auto start = Clock::now();
  auto next_health = start;
  for (int spins = 0;; ++spins) {
    if (done()) return Status::OK();
    const auto now = Clock::now();
    if (now >= next_health) {
      // A peer may have met the condition and left between done() and health(): what was awaited
      // happened, so it counts, whoever left afterwards.
      if (Status alive = health(); !alive.ok()) return done() ? Status::OK() : alive.withContext(what);
      if (kind == Wait::kLocalOp) {
        std::string why;
        const uint64_t announced = announcedGeneration(&why);
        if (announced > generation_.load()) {
          return Unavailable("recovering (generation " + std::to_string(announced) + "): " + why).withContext(what);
        }
      }
      next_health = now + kHealthInterval;
    }
    if (kind != Wait::kWhileRootLives && now - start > timeout) {
      return DeadlineExceeded(what + ": not done after " + secondsText(timeout) + " s");
    }
    // Spin briefly (collectives of small tensors finish in microseconds), then sleep.
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(spins < 20000 ? 20 : 500));
  }
}

void LocalGroup::maybeCrashForTest() {
  if (crash_rank_ == rank_) {
    LOG(ERROR) << "local rank " << rank_ << ": ZPS_TEST_LOCAL_CRASH: killing myself";
    raise(SIGKILL);
  }
}

Status LocalGroup::arriveAndWait(uint64_t& arrivals, uint64_t generation, const std::string& what,
                                 std::chrono::milliseconds timeout) {
  shared(arrivals).fetch_add(1, std::memory_order_acq_rel);
  const uint64_t target = generation * static_cast<uint64_t>(size_);
  return waitFor([&] { return shared(arrivals).load(std::memory_order_acquire) >= target; },
                 "local barrier (" + what + ")", timeout, Wait::kLocalOp);
}

Status LocalGroup::barrier(const std::string& what, std::chrono::milliseconds timeout) {
  maybeCrashForTest();
  return arriveAndWait(control_->barrier_arrivals, ++barrier_generation_, what, timeout);
}

Status LocalGroup::workerBarrier(std::chrono::milliseconds timeout, const std::function<Status()>& between) {
  std::lock_guard<std::mutex> lock(worker_barrier_mu_);
  // Two arrivals per barrier, with `between` in the middle: nobody leaves before the root's part
  // is done, and nobody arrives at the next barrier before everyone left this one.
  ZPS_RETURN_IF_ERROR(
      arriveAndWait(control_->worker_barrier_arrivals, ++worker_barrier_generation_, "worker barrier", timeout));
  ZPS_RETURN_IF_ERROR(between());
  return arriveAndWait(control_->worker_barrier_arrivals, ++worker_barrier_generation_, "worker barrier release",
                       timeout);
}

Status LocalGroup::inTurn(uint64_t op, const std::string& what, std::chrono::milliseconds timeout,
                          const std::function<Status()>& body) {
  std::unique_lock<std::mutex> lock(turn_mu_, std::defer_lock);
  if (isRoot()) {
    lock.lock();
    const uint64_t n = next_turn_;
    // The announcement of turn n - 1 is overwritten below: every peer must have read it.
    ZPS_RETURN_IF_ERROR(waitFor(
        [&] {
          for (int r = 1; r < size_; ++r)
            if (shared(control_->turns_taken[r]).load(std::memory_order_acquire) + 1 < n) return false;
          return true;
        },
        "waiting for the other local ranks to start the node's local operation " + std::to_string(n - 1) + " before " +
            what,
        timeout, Wait::kLocalOp));
    copyText(control_->turn_what, what);
    shared(control_->turn_op).store(op, std::memory_order_relaxed);
    shared(control_->turn).store(n, std::memory_order_release);
  } else {
    // Wait, without the lock, until local rank 0 announces our operation as this rank's next one;
    // the lock is held from the check that finds it. Other threads of this process take the turns
    // announced for them meanwhile, which counts as progress and restarts the deadline.
    for (;;) {
      uint64_t waiting_at = 0;
      {
        std::lock_guard<std::mutex> peek(turn_mu_);
        waiting_at = next_turn_;
      }
      const Status waited = waitFor(
          [&] {
            lock.lock();
            if (shared(control_->turn).load(std::memory_order_acquire) == next_turn_ &&
                shared(control_->turn_op).load(std::memory_order_relaxed) == op) {
              return true;
            }
            lock.unlock();
            return false;
          },
          "local rank " + std::to_string(rank_) + " waiting for its turn to run " + what, timeout, Wait::kLocalOp);
      if (waited.ok()) break;
      if (waited.code() != StatusCode::kDeadlineExceeded) return waited;
      std::lock_guard<std::mutex> peek(turn_mu_);
      if (next_turn_ != waiting_at) continue;
      const uint64_t announced = shared(control_->turn).load(std::memory_order_acquire);
      if (announced != next_turn_)
        return waited.withContext("local rank 0 has not started the node's local operation " +
                                  std::to_string(next_turn_));
      char root_what[kTextBytes];
      std::memcpy(root_what, control_->turn_what, kTextBytes);
      root_what[kTextBytes - 1] = '\0';
      return FailedPrecondition("local rank 0 runs " + std::string(root_what) + " as the node's local operation " +
                                std::to_string(next_turn_) + ", but no thread of local rank " + std::to_string(rank_) +
                                " issued it within " + secondsText(timeout) + " s (this one waits to run " + what +
                                "): every local rank must issue the same push/pull/pushPull calls");
    }
    shared(control_->turns_taken[rank_]).store(next_turn_, std::memory_order_release);
  }
  ++next_turn_;
  return body();
}

Status LocalGroup::post(Mailbox box, const std::string& bytes, const char* what) {
  if (bytes.size() > box.capacity) return InternalError(std::string(what) + " too large for the control segment");
  std::memcpy(box.data, bytes.data(), bytes.size());
  *box.bytes = static_cast<uint32_t>(bytes.size());
  shared(*box.ready).store(epoch_, std::memory_order_release);
  return Status::OK();
}

StatusOr<std::string> LocalGroup::collect(Mailbox box, const std::string& what, std::chrono::milliseconds timeout,
                                          Wait kind) {
  ZPS_RETURN_IF_ERROR(
      waitFor([&] { return shared(*box.ready).load(std::memory_order_acquire) == epoch_; }, what, timeout, kind));
  return std::string(box.data, *box.bytes);
}

Status LocalGroup::publishBook(const std::string& book) {
  return post(Mailbox{&control_->book_ready, &control_->book_bytes, control_->book, kBookBytes}, book, "address book");
}

StatusOr<std::string> LocalGroup::waitBook(std::chrono::milliseconds timeout) {
  return collect(Mailbox{&control_->book_ready, &control_->book_bytes, control_->book, kBookBytes},
                 "waiting for local rank 0 to register this node with the scheduler", timeout, Wait::kTimed);
}

Status LocalGroup::publishNcclId(const std::string& id) {
  return post(Mailbox{&control_->nccl_id_ready, &control_->nccl_id_bytes, control_->nccl_id, kNcclIdBytes}, id,
              "NCCL unique id");
}

StatusOr<std::string> LocalGroup::waitNcclId(std::chrono::milliseconds timeout) {
  return collect(Mailbox{&control_->nccl_id_ready, &control_->nccl_id_bytes, control_->nccl_id, kNcclIdBytes},
                 "waiting for local rank 0 to create the node's NCCL communicator id", timeout, Wait::kLocalOp);
}

StatusOr<LocalGroup::Arena> LocalGroup::arena(int tensor_id, size_t bytes) {
  if (tensor_id < 0) return InvalidArgument("bad tensor id");
  if (static_cast<size_t>(tensor_id) < arenas_.size() && arenas_[tensor_id].bytes == bytes) {
    return arenas_[tensor_id];
  }
  // Slots start on 64-byte boundaries so the sums vectorise; the arena on a page boundary so that
  // every rank can map it at the same file offset.
  const size_t slot = roundUp(bytes, 64);
  const size_t length = roundUp(slot * (size_ + 1), kPage);
  const size_t offset = data_mapped_;
  if (isRoot() && ftruncate(data_fd_, static_cast<off_t>(offset + length)) != 0) {
    const std::string error = errnoText("cannot grow the local staging memory by " + std::to_string(length) +
                                        " bytes (ZPS_SHM_DIR too small?)");
    abort(error);
    return InternalError(error);
  }
  // The root must have grown the file before anyone touches the new range (SIGBUS otherwise).
  ZPS_RETURN_IF_ERROR(barrier("staging a tensor", std::chrono::minutes(10)));
  ZPS_RETURN_IF_ERROR(health());
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd_, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return InternalError(errnoText("cannot map local staging memory"));
  mappings_.emplace_back(p, length);
  data_mapped_ += length;
  Arena a;
  a.bytes = bytes;
  for (int r = 0; r <= size_; ++r) a.slots.push_back(static_cast<uint8_t*>(p) + slot * r);
  a.result = a.slots.back();
  a.slots.pop_back();
  if (arenas_.size() <= static_cast<size_t>(tensor_id)) arenas_.resize(tensor_id + 1);
  arenas_[tensor_id] = a;
  return a;
}

}  // namespace zps
