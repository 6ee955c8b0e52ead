#include "worker/local/local_reducer.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda_reducer.h"
#include "kernels/reducer.h"

namespace zps {
namespace {

class ShmLocalReducer final : public LocalReducer {
 public:
  ShmLocalReducer(LocalGroup* group, std::chrono::milliseconds timeout) : group_(group), timeout_(timeout) {}
  const char* name() const override { return "shm"; }

  StatusOr<uint8_t*> staging(const LocalTensor& t) override {
    ZPS_ASSIGN_OR_RETURN(LocalGroup::Arena arena, group_->arena(t.id, t.bytes));
    return arena.result;
  }

  // Every rank stages its input in its own slot, then sums the pieces it owns across all slots.
  Status reduceScatter(const LocalTensor& t, const void* in, uint8_t* staging) override {
    ZPS_ASSIGN_OR_RETURN(LocalGroup::Arena arena, group_->arena(t.id, t.bytes));
    std::memcpy(arena.slots[group_->localRank()], in, t.bytes);
    ZPS_RETURN_IF_ERROR(group_->barrier("reduce-scatter", timeout_));
    const size_t esize = dtypeSize(t.dtype);
    for (const auto& p : *t.pieces) {
      if (p.owner != group_->localRank()) continue;
      std::memcpy(staging + p.offset, arena.slots[0] + p.offset, p.bytes);
      for (int r = 1; r < group_->localSize(); ++r)
        kernels::cpuSum(staging + p.offset, arena.slots[r] + p.offset, p.bytes / esize, t.dtype);
    }
    return Status::OK();
  }

  // Once every rank has its pieces back, everyone reads the whole sum. The barrier also keeps the
  // next operation from overwriting slots that a slower rank still reads.
  Status allGather(const LocalTensor& t, const uint8_t* staging, void* out) override {
    ZPS_RETURN_IF_ERROR(group_->barrier("all-gather", timeout_));
    if (out != nullptr) std::memcpy(out, staging, t.bytes);
    return Status::OK();
  }

 private:
  LocalGroup* const group_;
  const std::chrono::milliseconds timeout_;
};

class NcclLocalReducer final : public LocalReducer {
 public:
  explicit NcclLocalReducer(std::unique_ptr<kernels::DeviceLocalReducer> device) : device_(std::move(device)) {}
  const char* name() const override { return "nccl"; }

  StatusOr<uint8_t*> staging(const LocalTensor& t) override { return device_->staging(t.id, t.bytes); }
  Status reduceScatter(const LocalTensor& t, const void* in, uint8_t* staging) override {
    return device_->reduceScatter(in, t.bytes, t.dtype, *t.pieces, staging);
  }
  Status allGather(const LocalTensor& t, const uint8_t* staging, void* out) override {
    if (out == nullptr) return Status::OK();  // the reduce-scatter already synchronised the ranks
    return device_->allGather(staging, t.bytes, t.dtype, *t.pieces, out);
  }

 private:
  std::unique_ptr<kernels::DeviceLocalReducer> device_;
};

}  // namespace

std::unique_ptr<LocalReducer> makeShmLocalReducer(LocalGroup* group, std::chrono::milliseconds timeout) {
  return std::make_unique<ShmLocalReducer>(group, timeout);
}

StatusOr<std::unique_ptr<LocalReducer>> joinNcclLocalReducer(LocalGroup* group, int local_rank, int local_size,
                                                             std::chrono::milliseconds timeout) {
  std::string id;
  kernels::KeepWaiting keep_waiting;
  if (group != nullptr) {
    keep_waiting = [group] { return group->health(); };
    if (group->isRoot()) {
      auto made = kernels::ncclNewUniqueId();
      if (!made.ok()) {
        group->abort(made.status().message());  // the peers wait for the id: tell them why not
        return made.status();
      }
      id = *made;
      ZPS_RETURN_IF_ERROR(group->publishNcclId(id));
    } else {
      ZPS_ASSIGN_OR_RETURN(id, group->waitNcclId(timeout));
    }
  }
  const int device = std::max(0, kernels::gpuOfLocalRank(local_rank));
  ZPS_ASSIGN_OR_RETURN(
      std::unique_ptr<kernels::DeviceLocalReducer> device_reducer,
      kernels::makeNcclLocalReducer(id, local_rank, local_size, device, timeout, std::move(keep_waiting)));
  return std::unique_ptr<LocalReducer>(std::make_unique<NcclLocalReducer>(std::move(device_reducer)));
}

}  // namespace zps
