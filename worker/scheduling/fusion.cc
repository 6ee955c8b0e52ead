#include "worker/scheduling/fusion.h"

#include <cstring>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "ps/wire/codec.h"

namespace zps {
namespace {

// Requests for one server that travel together.
struct Group {
  std::vector<ReadyRequest*> members;
  std::unordered_set<uint64_t> keys;
  size_t bytes = 0;
};

}  // namespace

StatusOr<std::vector<Blob>> fuseRequests(const std::vector<ReadyRequest*>& group) {
  pb::Data fused;
  fused.set_protocol_version(wire::kProtocolVersion);
  size_t payload_bytes = 0;
  for (const ReadyRequest* r : group) {
    // Our own message, encoded a moment ago: parsed back rather than kept twice for every request.
    pb::Envelope env;
    if (r->frames.empty() || !env.ParseFromArray(r->frames[0].data(), static_cast<int>(r->frames[0].size())) ||
        !env.has_data())
      return InternalError("a request to fuse has no data message");
    if (fused.fused().entries_size() == 0) fused.set_generation(env.data().generation());
    pb::Data* entry = fused.mutable_fused()->add_entries();
    *entry = std::move(*env.mutable_data());
    entry->clear_protocol_version();  // the fused message's covers it
    if (r->frames.size() > 1) payload_bytes += r->frames[1].size();
  }
  auto payload = std::make_shared<AlignedBuffer>(payload_bytes);
  size_t offset = 0;
  for (const ReadyRequest* r : group) {
    if (r->frames.size() < 2 || r->frames[1].empty()) continue;
    std::memcpy(payload->data() + offset, r->frames[1].data(), r->frames[1].size());
    offset += r->frames[1].size();
  }
  return wire::encodeBody(std::move(fused), payload_bytes > 0 ? Blob::fromBuffer(std::move(payload)) : Blob());
}

Status sendReady(std::vector<ReadyRequest> ready, const FusionPolicy& policy, const SendFunction& send) {
  Status first_failure;
  auto note = [&](Status s) {
    if (!s.ok() && first_failure.ok()) first_failure = std::move(s);
  };
  // By server and connection (scheduled pushes take the server's push lane: ServerLinks::send), in
  // the order they opened.
  std::unordered_map<int64_t, std::vector<Group>> groups;
  std::vector<int64_t> order;  // the order (server, connection) first appeared
  for (ReadyRequest& r : ready) {
    const bool fusable = policy.bytes > 0 && r.to.fuse_bytes > 0 && r.to.fuse_bytes < policy.bytes && !r.to.via &&
                         (!policy.accepts || policy.accepts(r.to.server));
    if (!fusable) {
      note(send(r.to, std::move(r.frames)));
      continue;
    }
    const int64_t where = int64_t{r.to.server} * 2 + (r.to.scheduledPush() ? 1 : 0);
    auto [it, first] = groups.try_emplace(where);
    if (first) order.push_back(where);
    Group* home = nullptr;
    for (Group& g : it->second) {
      if (g.members.size() < wire::kMaxFusedEntries && g.bytes + r.to.fuse_bytes <= policy.bytes &&
          g.keys.count(r.to.key) == 0) {
        home = &g;
        break;
      }
    }
    if (home == nullptr) home = &it->second.emplace_back();
    home->members.push_back(&r);
    home->keys.insert(r.to.key);
    home->bytes += r.to.fuse_bytes;
  }
  for (int64_t where : order) {
    for (Group& g : groups[where]) {
      if (g.members.size() == 1) {
        note(send(g.members[0]->to, std::move(g.members[0]->frames)));
        continue;
      }
      StatusOr<std::vector<Blob>> fused = fuseRequests(g.members);
      if (!fused.ok()) {
        note(fused.status());
        continue;
      }
      // Where the members would go: the server, and its push lane when they are scheduled pushes.
      RequestSpec to = RequestSpec::to(g.members[0]->to.server);
      to.priority = g.members[0]->to.priority;
      for (const ReadyRequest* m : g.members) to.credit += m->to.credit;
      note(send(to, std::move(*fused)));
    }
  }
  return first_failure;
}

}  // namespace zps
