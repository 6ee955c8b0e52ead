#include "server/fused_messages.h"

#include <cstring>
#include <memory>

namespace zps {

wire::DataMessage entryAsRequest(wire::DataMessage entry) {
  if (!entry.payload.empty()) entry.payload = Blob::copyOf(entry.payload.data(), entry.payload.size());
  return entry;
}

namespace {

// One Fused reply: the answers as entries and their payloads copied back to back.
std::vector<Blob> fuse(std::vector<Outgoing>& answers, size_t payload_bytes) {
  pb::Data fused;
  pb::Fused* entries = fused.mutable_fused();
  auto buffer = std::make_shared<AlignedBuffer>(payload_bytes);
  size_t offset = 0;
  for (Outgoing& o : answers) {
    *entries->add_entries() = std::move(o.data);
    if (o.payload.empty()) continue;
    std::memcpy(buffer->data() + offset, o.payload.data(), o.payload.size());
    offset += o.payload.size();
  }
  return wire::encodeData(std::move(fused), payload_bytes > 0 ? Blob::fromBuffer(std::move(buffer)) : Blob());
}

}  // namespace

std::vector<std::pair<PeerId, std::vector<Blob>>> packReplies(PeerId sender, std::vector<Outgoing> out) {
  std::vector<std::pair<PeerId, std::vector<Blob>>> messages;
  std::vector<Outgoing> batch;
  size_t batch_bytes = 0;
  auto flush = [&] {
    if (batch.size() == 1) {
      messages.emplace_back(sender, wire::encodeData(std::move(batch[0].data), std::move(batch[0].payload)));
    } else if (batch.size() > 1) {
      messages.emplace_back(sender, fuse(batch, batch_bytes));
    }
    batch.clear();
    batch_bytes = 0;
  };
  for (Outgoing& o : out) {
    if (o.peer != sender) {
      messages.emplace_back(o.peer, wire::encodeData(std::move(o.data), std::move(o.payload)));
      continue;
    }
    if (!batch.empty() &&
        (batch.size() == wire::kMaxFusedEntries || batch_bytes + o.payload.size() > kMaxFusedReplyBytes))
      flush();
    batch_bytes += o.payload.size();
    batch.push_back(std::move(o));
  }
  flush();
  return messages;
}

std::vector<Outgoing> refuseEntries(PeerId peer, const pb::Data& rejected, const std::string& why) {
  std::vector<Outgoing> out;
  if (rejected.fused().entries_size() > static_cast<int>(wire::kMaxFusedEntries)) return out;
  for (const pb::Data& e : rejected.fused().entries()) {
    if (e.request_id() == 0) continue;
    out.push_back(errorReply(peer, e, "refused fused message: " + why));
  }
  return out;
}

}  // namespace zps
