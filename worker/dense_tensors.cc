#include "worker/dense_tensors.h"

#include <glog/logging.h>

#include <algorithm>

#include "kernels/nonzero_encoding.h"
#include "ps/wire/codec.h"

namespace zps {
namespace {

// Wraps a caller's buffer as a Blob without copying. The empty owner keeps nothing alive: the
// caller promises the buffer outlives the operation, and a server only replies after it has
// received every byte.
Blob borrow(const void* data, size_t bytes) {
  return Blob(std::shared_ptr<const void>(std::shared_ptr<const void>(), data), data, bytes);
}

// A float32 partition's push: nonzero-encoded (a copy that leaves out the +0.0 elements) where that
// saves enough, else the caller's buffer itself.
EncodedPush withoutZeros(const uint8_t* part, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  const size_t count = kernels::countNonzero(part, n);
  if (!kernels::nonzeroWorthIt(n, count)) return EncodedPush{borrow(part, bytes)};
  auto encoded = std::make_shared<AlignedBuffer>(kernels::nonzeroEncodedBytes(n, count));
  kernels::encodeNonzero(part, n, encoded->data());
  return EncodedPush{Blob::fromBuffer(std::move(encoded)), pb::ENCODING_NONZERO, count};
}

const char* verbOf(pb::DataCommand command) {
  return command == pb::CMD_PUSH ? "push" : command == pb::CMD_PULL ? "pull" : "push-pull";
}

}  // namespace

DenseTensors::DenseTensors(const Config& config, int rank, RequestTable* requests)
    : config_(config), rank_(rank), requests_(requests), placement_(std::make_unique<Placement>(config.num_servers)) {}

StatusOr<TensorId> DenseTensors::declare(const std::string& name, size_t bytes, DType dtype, bool async,
                                         const DeclareOptions& options) {
  size_t esize = dtypeSize(dtype);
  if (esize == 0) return InvalidArgument("unknown dtype");
  if (bytes == 0 || bytes % esize != 0)
    return InvalidArgument("tensor '" + name + "' has " + std::to_string(bytes) +
                           " bytes, not a positive multiple of " + std::to_string(esize) + " (" +
                           std::string(dtypeName(dtype)) + ")");
  if (name.size() > 1024) return InvalidArgument("tensor name longer than 1024 bytes");
  TensorId id;
  std::vector<PartitionInfo> parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = static_cast<TensorId>(tensors_.size());
    if (id >= (1 << 30)) return InvalidArgument("too many tensors");
    Tensor t;
    t.name = name;
    t.bytes = bytes;
    t.dtype = dtype;
    if (options.key_space == 0) {
      t.node_index = id - set_tensors_;
      t.parts = placeForNode(placement_.get(), static_cast<uint64_t>(t.node_index), bytes, esize, &t.node_pieces);
    } else {
      // Above every key of all workers' tensors (< 2^30) and tables (< 2^30 + 2^29): 2^31 | space << 20 | n.
      // Contributors count processes: with local ranks each member process pushes on its own.
      const int processes = config_.num_workers * config_.local_size;
      if (options.key_space >= kMaxKeySpaces || async || options.contributors <= 0 || options.contributors > processes)
        return InvalidArgument("tensor '" + name + "': key space " + std::to_string(options.key_space) + " with " +
                               std::to_string(options.contributors) + " contributors (spaces 1.." +
                               std::to_string(kMaxKeySpaces - 1) + ", 1.." + std::to_string(processes) +
                               " contributors, sync tensors only)");
      KeySpace& space =
          key_spaces_.try_emplace(options.key_space, KeySpace{0, Placement(config_.num_servers)}).first->second;
      if (space.tensors >= (uint64_t{1} << 20)) return InvalidArgument("too many tensors in one process set");
      const uint64_t key_id = uint64_t{1} << 31 | uint64_t{options.key_space} << 20 | space.tensors++;
      // Not reduced on the node (the set's members there are not every local rank): this process
      // pushes and pulls every partition itself.
      t.parts = space.placement.place(key_id, bytes, esize, config_.partition_bytes);
      for (const auto& p : t.parts) t.node_pieces.push_back(kernels::LocalPiece{p.offset, p.bytes, config_.local_rank});
      t.own_pushes = true;
    }
    if (t.parts.size() >= (size_t{1} << kKeyPartitionBits))
      return InvalidArgument("tensor '" + name + "' needs too many partitions; raise ZPS_PARTITION_BYTES");
    // randomk draws differ per worker and partition, and repeat from run to run.
    const uint64_t seed =
        (static_cast<uint64_t>(rank_) << 16 | static_cast<uint64_t>(config_.local_rank)) * 0x9E3779B97F4A7C15ull;
    ZPS_ASSIGN_OR_RETURN(t.compression,
                         TensorCompression::choose(config_, options, async, name, bytes, dtype, t.parts, seed));
    if (async) t.async = std::make_shared<AsyncSequence>();
    parts = t.parts;
    if (!async && !options.unscheduled)
      t.priority = options.priority ? options.priority : config_.priority ? std::optional<int64_t>(id) : std::nullopt;
    // Counted only once declared: the keys of every worker's tensors are their ids less these.
    if (options.key_space != 0) ++set_tensors_;
    tensors_.push_back(std::move(t));
  }
  FanOut fan("declaring '" + name + "'");
  for (const auto& p : parts) {
    pb::Data d = requests_->newRequest();
    pb::Declare* declare = d.mutable_declare();
    declare->set_key(p.key);
    declare->set_mode(pb::MODE_SUM);
    declare->set_dtype(static_cast<uint32_t>(dtype));
    declare->set_num_elements(p.bytes / esize);
    declare->set_async(async);
    declare->set_name(name);
    if (options.key_space != 0) {
      declare->set_contributors(static_cast<uint32_t>(options.contributors));
      // The servers then count this tensor's pushes per process, not per node.
      declare->set_local_size(static_cast<uint32_t>(config_.local_size));
    }
    fan.requests.emplace_back(d, RequestSpec::to(p.server, p.key, dtype), wire::encodeBody(d));
  }
  ZPS_RETURN_IF_ERROR(requests_->run(std::move(fan), config_.request_timeout));
  return id;
}

std::vector<PartitionInfo> DenseTensors::placeForNode(Placement* placement, uint64_t key_id, size_t bytes, size_t esize,
                                                      std::vector<kernels::LocalPiece>* node_pieces) {
  // Pieces of 1/N partition: piece i belongs to local rank i % N, which pushes and pulls it. Every
  // local rank places every piece, so the server loads stay identical on all ranks and nodes. With
  // N = 1 the pieces are the partitions, all owned by this process.
  const size_t n = static_cast<size_t>(config_.local_size);
  const size_t piece = std::max(esize, config_.partition_bytes / n);
  std::vector<PartitionInfo> all = placement->place(key_id, bytes, esize, piece);
  std::vector<PartitionInfo> mine;
  for (size_t i = 0; i < all.size(); ++i) {
    const int owner = static_cast<int>(i % n);
    node_pieces->push_back(kernels::LocalPiece{all[i].offset, all[i].bytes, owner});
    if (owner == config_.local_rank) mine.push_back(all[i]);
  }
  return mine;
}

StatusOr<Handle> DenseTensors::issue(TensorId id, pb::DataCommand command, const void* in, void* out) {
  ZPS_ASSIGN_OR_RETURN(AsyncPush numbered, numberAsyncPush(id, command));
  StatusOr<Handle> handle = issueNumbered(id, command, in, out, numbered);
  if (!handle.ok() && numbered.sequence) numbered.sequence->end(numbered.seq);
  return handle;
}

StatusOr<DenseTensors::AsyncPush> DenseTensors::numberAsyncPush(TensorId id, pb::DataCommand command) {
  if (command == pb::CMD_PULL) return AsyncPush{};
  AsyncPush numbered;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id < 0 || id >= static_cast<int>(tensors_.size())) return AsyncPush{};  // issue says so
    numbered.sequence = tensors_[id].async;
    name = tensors_[id].name;
  }
  if (!numbered.sequence) return AsyncPush{};
  // Outside the lock: it may wait for an old push's answer, which the I/O thread records under it.
  ZPS_ASSIGN_OR_RETURN(numbered.seq, numbered.sequence->begin(config_.request_timeout,
                                                              std::string(verbOf(command)) + " of '" + name + "'"));
  return numbered;
}

StatusOr<Handle> DenseTensors::issueNumbered(TensorId id, pb::DataCommand command, const void* in, void* out,
                                             const AsyncPush& numbered) {
  std::vector<PartitionInfo> parts;
  uint64_t round, received_through, epoch;
  DType dtype;
  std::string name;
  std::shared_ptr<TensorCompression> compression;
  std::optional<int64_t> priority;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id < 0 || id >= static_cast<int>(tensors_.size()))
      return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
    Tensor& t = tensors_[id];
    if (in == nullptr && command != pb::CMD_PULL) return InvalidArgument("push of '" + t.name + "' with a null buffer");
    if (out == nullptr && command != pb::CMD_PUSH)
      return InvalidArgument("pull of '" + t.name + "' into a null buffer");
    if (command != pb::CMD_PULL && !t.push_refused.empty()) return FailedPrecondition(t.push_refused);
    if (command == pb::CMD_PUSH) {
      round = ++t.push_round;
    } else if (command == pb::CMD_PULL) {
      round = ++t.pull_round;
    } else {
      if (t.push_round != t.pull_round)
        return FailedPrecondition("pushPull of '" + t.name + "' after unmatched push or pull calls");
      round = ++t.push_round;
      ++t.pull_round;
    }
    // Lets the servers free the results of rounds this worker is done with (see received_rounds.h).
    received_through = t.received.through();
    parts = t.parts;
    dtype = t.dtype;
    name = t.name;
    compression = t.compression;
    priority = t.priority;
    epoch = epoch_;
  }
  // Compress outside any lock: the receiver thread needs the request table's.
  std::vector<EncodedPush> pushes(parts.size());
  for (size_t i = 0; in != nullptr && compression == nullptr && i < parts.size(); ++i) {
    const uint8_t* part = static_cast<const uint8_t*>(in) + parts[i].offset;
    pushes[i] = config_.skip_zeros && dtype == DType::kFloat32 ? withoutZeros(part, parts[i].bytes)
                                                               : EncodedPush{borrow(part, parts[i].bytes)};
  }
  if (in != nullptr && compression != nullptr) pushes = compression->encode(in);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : pushes) traffic_.network_bytes_pushed += e.payload.size();
  }
  FanOut fan(std::string(verbOf(command)) + " of '" + name + "' round " + std::to_string(round));
  const bool push_side = command != pb::CMD_PULL, pull_side = command != pb::CMD_PUSH;
  fan.op->on_done = [this, id, epoch, round, push_side, pull_side, numbered] {
    if (numbered.sequence) numbered.sequence->end(numbered.seq);
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch == epoch_) tensors_[id].received.done(round, push_side, pull_side);
  };
  fan.op->on_cancelled = [this, id, epoch, command, round, numbered](const Status& failed) {
    if (numbered.sequence) numbered.sequence->end(numbered.seq);
    return cancelled(id, epoch, command, round, failed);
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    void* part_out = out ? static_cast<uint8_t*>(out) + parts[i].offset : nullptr;
    if (priority && command == pb::CMD_PUSH_PULL) {
      scheduledPushPull(&fan, *priority, parts[i], std::move(pushes[i]), part_out, name, dtype, round,
                        received_through);
      continue;
    }
    const bool scheduled_push = priority && command == pb::CMD_PUSH;
    fan.requests.push_back(request(command, parts[i], std::move(pushes[i]), part_out, name, dtype, round,
                                   received_through, numbered.seq, scheduled_push));
    if (scheduled_push) {
      fan.requests.back().request.priority = priority;
      fan.requests.back().request.credit = fan.requests.back().trace->bytes;
    }
  }
  StatusOr<Handle> handle = requests_->issue(std::move(fan));
  if (!handle.ok()) (void)cancelled(id, epoch, command, round, handle.status());
  return handle;
}

OutgoingRequest DenseTensors::request(pb::DataCommand command, const PartitionInfo& p, EncodedPush push, void* out,
                                      const std::string& name, DType dtype, uint64_t round, uint64_t received_through,
                                      uint64_t push_seq, bool scheduled_push) {
  OutgoingRequest o;
  o.request = RequestSpec::to(p.server, p.key, dtype);
  o.request.out = static_cast<uint8_t*>(out);
  o.request.bytes = p.bytes;
  o.request.fuse_bytes = p.bytes;  // small ones travel fused where several are ready together (fusion.h)
  o.request.round = round;
  pb::Data d = requests_->newRequest();
  o.id = d.request_id();
  o.request.id = o.id;
  pb::Tensor* t = d.mutable_tensor();
  t->set_op(wire::tensorOp(command));
  t->set_key(p.key);
  t->set_round(round);
  t->set_dtype(static_cast<uint32_t>(dtype));
  t->set_num_elements(p.bytes / dtypeSize(dtype));
  t->set_received_through(received_through);
  t->set_push_seq(push_seq);
  t->set_wants_awaited(scheduled_push && config_.push_hints);
  t->set_holds_credit(scheduled_push);  // its acknowledgement returns credit: the server may pace it
  push.describe(t);
  const size_t sent = command != pb::CMD_PULL ? push.payload.size() : p.bytes;
  VLOG(2) << "worker " << rank_ << ": " << pb::DataCommand_Name(command) << " key " << p.key << " round " << round
          << " (" << sent << " B) to server " << p.server;
  o.frames = wire::encodeBody(std::move(d), std::move(push.payload));
  o.trace = RequestTrace{command, round, sent, name, 0};
  return o;
}

void DenseTensors::scheduledPushPull(FanOut* fan, int64_t priority, const PartitionInfo& p, EncodedPush push, void* out,
                                     const std::string& name, DType dtype, uint64_t round, uint64_t received_through) {
  OutgoingRequest pushed =
      request(pb::CMD_PUSH, p, std::move(push), nullptr, name, dtype, round, received_through, 0, true);
  pushed.request.priority = priority;
  pushed.request.credit = pushed.trace->bytes;
  OutgoingRequest pulled = request(pb::CMD_PULL, p, EncodedPush(), out, name, dtype, round, received_through);
  pulled.request.priority = priority;
  // The pull follows its push at once, by the same priority, and holds no credit: it waits at the
  // server for the other workers' pushes of its round (worker/scheduling/push_scheduler.h).
  fan->requests.push_back(std::move(pushed));
  fan->requests.push_back(std::move(pulled));
}

Status DenseTensors::cancelled(TensorId id, uint64_t epoch, pb::DataCommand command, uint64_t round,
                               const Status& failed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != epoch_) return failed;  // recover() forgot the tensor
  Tensor& t = tensors_[id];
  std::string note = "; the operation was cancelled: nothing more is written into its buffer";
  if (command != pb::CMD_PULL) {
    // The transport sends pushes from the caller's buffer without a copy, and may still be reading
    // it (a stopped or slow server leaves bytes queued): the servers may sum whatever it holds by
    // then, so this round's sum cannot be trusted, and a repeat of the round would be ignored as a
    // duplicate of what arrived. The tensor is refused from now on instead of retried.
    const std::string refused = "'" + t.name + "' cannot be pushed again in this job";
    t.push_refused = std::string(verbOf(command)) + " of '" + t.name + "' round " + std::to_string(round) +
                     " was cancelled after its wait failed, and the servers may have summed part of it: " + refused;
    note += "; " + refused + " (the servers may have summed part of round " + std::to_string(round) +
            ", and its buffer may still be read until the connection sends or drops it)";
  } else if (t.pull_round == round) {  // the tensor's latest pull: give its round back
    --t.pull_round;
    note += ", and the next " + std::string(verbOf(command)) + " of '" + t.name + "' retries round " +
            std::to_string(round);
  } else {
    note += "; round " + std::to_string(round) + " is not retried: later rounds were issued";
  }
  return Status(failed.code(), failed.message() + note);
}

StatusOr<DenseTensors::Shape> DenseTensors::account(TensorId id, pb::DataCommand command) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= static_cast<int>(tensors_.size()))
    return InvalidArgument("tensor id " + std::to_string(id) + " was not declared");
  const Tensor& t = tensors_[id];
  size_t network = 0;
  for (const auto& p : t.parts) network += p.bytes;
  // issue() counts the network bytes of pushes: compression makes them smaller than the partitions.
  if (command != pb::CMD_PULL) traffic_.tensor_bytes_pushed += t.bytes;
  if (command != pb::CMD_PUSH) {
    traffic_.tensor_bytes_pulled += t.bytes;
    traffic_.network_bytes_pulled += network;
  }
  return Shape{t.bytes, t.dtype, t.own_pushes, t.node_index};
}

std::vector<kernels::LocalPiece> DenseTensors::nodePieces(TensorId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= static_cast<int>(tensors_.size())) return {};
  return tensors_[id].node_pieces;
}

std::vector<PartitionInfo> DenseTensors::partitions(TensorId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= static_cast<int>(tensors_.size())) return {};
  return tensors_[id].parts;
}

Compressor DenseTensors::compressorOf(TensorId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= static_cast<int>(tensors_.size())) return Compressor::kNone;
  const auto& c = tensors_[id].compression;
  return c ? c->kind() : Compressor::kNone;
}

std::optional<int64_t> DenseTensors::priorityOf(TensorId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || id >= static_cast<int>(tensors_.size())) return std::nullopt;
  return tensors_[id].priority;
}

TrafficCounters DenseTensors::traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return traffic_;
}

int DenseTensors::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(tensors_.size()) - set_tensors_;
}

void DenseTensors::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  tensors_.clear();
  placement_ = std::make_unique<Placement>(config_.num_servers);
  key_spaces_.clear();
  set_tensors_ = 0;
  ++epoch_;
}

}  // namespace zps
