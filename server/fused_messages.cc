#include "server/fused_messages.h"

#include <cstring>
#include <memory>

namespace zps {

wire::DataMessage entryAsRequest(wire::DataMessage entry) {
  if (!entry.payload.empty()) entry.payload = Blob::copyOf(entry.payload.data(), entry.payload.size());
  return entry;
}

namespace {

// One CMD_FUSED reply: the answers' headers as entries and their payloads copied back to back.
std::vector<Blob> fuse(std::vector<Outgoing>& answers, size_t payload_bytes) {
  pb::DataHeader h;
  h.set_command(pb::CMD_FUSED);
  auto buffer = std::make_shared<AlignedBuffer>(payload_bytes);
  size_t offset = 0;
  for (Outgoing& o : answers) {
    *h.add_entries() = std::move(o.header);
    if (o.payload.empty()) continue;
    std::memcpy(buffer->data() + offset, o.payload.data(), o.payload.size());
    offset += o.payload.size();
  }
  return wire::encodeData(h, payload_bytes > 0 ? Blob::fromBuffer(std::move(buffer)) : Blob());
}

}  // namespace

std::vector<std::pair<PeerId, std::vector<Blob>>> packReplies(PeerId sender, std::vector<Outgoing> out) {
  std::vector<std::pair<PeerId, std::vector<Blob>>> messages;
  std::vector<Outgoing> batch;
  size_t batch_bytes = 0;
  auto flush = [&] {
    if (batch.size() == 1) {
      messages.emplace_back(sender, wire::encodeData(batch[0].header, std::move(batch[0].payload)));
    } else if (batch.size() > 1) {
      messages.emplace_back(sender, fuse(batch, batch_bytes));
    }
    batch.clear();
    batch_bytes = 0;
  };
  for (Outgoing& o : out) {
    if (o.peer != sender) {
      messages.emplace_back(o.peer, wire::encodeData(o.header, std::move(o.payload)));
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

std::vector<Outgoing> refuseEntries(PeerId peer, const pb::DataHeader& rejected, const std::string& why) {
  std::vector<Outgoing> out;
  if (rejected.entries_size() > static_cast<int>(wire::kMaxFusedEntries)) return out;
  for (const pb::DataHeader& e : rejected.entries()) {
    if (e.request_id() == 0) continue;
    pb::DataHeader h;
    h.set_request_id(e.request_id());
    h.set_key(e.key());
    h.set_round(e.round());
    out.push_back(errorReply(peer, h, "refused fused message: " + why));
  }
  return out;
}

}  // namespace zps
