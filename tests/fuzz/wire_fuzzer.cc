// Fuzz target: the wire decoder (ps/wire/codec), the one door for peer bytes.
//
// Input: one message in splitFrames's layout (fuzz_util.h). Bit 7 of byte 0 picks tight limits
// (tiny strings, payloads, row dims) to reach every "over the limit" branch with small inputs.
//
// Beyond "no crash, no leak, no UB", it checks what the codec promises its callers: payload and
// key frames have exactly the sizes the header implies, what tight limits accept the defaults
// accept, and a decoded message re-encodes to one that decodes to the same thing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ps/wire/codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace zps::fuzz {
namespace {

wire::Limits tightLimits() {
  wire::Limits l;
  l.max_frames = 3;
  l.max_envelope_bytes = 256;
  l.max_payload_bytes = 64;
  l.max_string_bytes = 8;
  l.max_address_book = 2;
  l.max_row_dim = 4;
  l.max_fused_entries = 2;
  return l;
}

bool sameBytes(const Blob& a, const Blob& b) {
  return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

void checkDataInvariants(const wire::DataMessage& m, size_t num_frames, const wire::Limits& limits);

// A fused message: 1..max entries, none fused itself, each keeping a message's promises with its slice
// (present or not), the slices back to back inside the payload frame.
void checkFusedInvariants(const wire::DataMessage& m, const wire::Limits& limits) {
  ZPS_FUZZ_CHECK(m.data.fused().entries_size() == 0 && m.payload.data() == nullptr);
  ZPS_FUZZ_CHECK(!m.entries.empty() && m.entries.size() <= limits.max_fused_entries);
  for (const auto& e : m.entries) {
    ZPS_FUZZ_CHECK(!e.data.has_fused() && e.entries.empty());
    checkDataInvariants(e, e.payload.data() != nullptr ? 2 : 1, limits);
  }
}

// The codec's promises about a validated data message.
void checkDataInvariants(const wire::DataMessage& m, size_t num_frames, const wire::Limits& limits) {
  const pb::Data& d = m.data;
  if (d.has_fused()) {
    checkFusedInvariants(m, limits);
    return;
  }
  ZPS_FUZZ_CHECK(d.declare().name().size() <= limits.max_string_bytes);
  ZPS_FUZZ_CHECK(d.error().text().size() <= limits.max_string_bytes);
  if (d.has_rows()) {
    const pb::Rows& r = d.rows();
    ZPS_FUZZ_CHECK(m.dtype == DType::kFloat32);
    ZPS_FUZZ_CHECK(r.row_dim() >= 1 && r.row_dim() <= limits.max_row_dim);
    ZPS_FUZZ_CHECK(m.keys.size() == r.count() * sizeof(uint64_t));
    // Consumers read every key with keyAt; ASan checks that each read stays inside the frame.
    uint64_t sum = 0;
    for (uint64_t i = 0; i < r.count(); ++i) sum += m.keyAt(i);
    (void)sum;
    if (r.push()) {
      ZPS_FUZZ_CHECK(num_frames == 3);
      ZPS_FUZZ_CHECK(m.payload.size() == r.count() * r.row_dim() * sizeof(float));
    } else {
      ZPS_FUZZ_CHECK(num_frames == 2 && m.payload.data() == nullptr);
    }
    return;
  }
  // The dtype and element count of the body that has them (bodies without read as float32, none).
  const uint32_t dtype = d.has_tensor()    ? d.tensor().dtype()
                         : d.has_declare() ? d.declare().dtype()
                                           : d.reply().dtype();
  const uint64_t num_elements = d.has_tensor()    ? d.tensor().num_elements()
                                : d.has_declare() ? d.declare().num_elements()
                                                  : d.reply().num_elements();
  ZPS_FUZZ_CHECK(static_cast<uint64_t>(m.dtype) == dtype);
  ZPS_FUZZ_CHECK(m.keys.data() == nullptr);
  const pb::Tensor& t = d.tensor();  // the empty Tensor for other bodies: dense, no sparse count
  const bool push = d.has_tensor() && (t.op() == pb::OP_PUSH || t.op() == pb::OP_PUSH_PULL);
  const pb::PayloadEncoding encoding = d.has_reply() ? d.reply().encoding() : t.encoding();
  if (encoding == pb::ENCODING_NONZERO) {
    // A push or a sum without its zeros: a bitmap whose set bits, none past the elements, count the
    // float32 values after it (kernels/nonzero_encoding.h reads them without a check of its own).
    const uint64_t count = d.has_reply() ? d.reply().sparse_count() : t.sparse_count();
    const uint64_t bitmap = (num_elements + 7) / 8;
    ZPS_FUZZ_CHECK(num_frames == 2 && m.dtype == DType::kFloat32 && (push || d.has_reply()));
    ZPS_FUZZ_CHECK(count <= num_elements && m.payload.size() == bitmap + count * sizeof(float));
    uint64_t set = 0;
    for (uint64_t b = 0; b < bitmap; ++b) set += static_cast<uint64_t>(__builtin_popcount(m.payload.data()[b]));
    ZPS_FUZZ_CHECK(set == count);
    ZPS_FUZZ_CHECK(num_elements % 8 == 0 || (m.payload.data()[bitmap - 1] >> (num_elements % 8)) == 0);
    return;
  }
  ZPS_FUZZ_CHECK(!d.has_reply() || d.reply().sparse_count() == 0);
  if (t.encoding() != pb::ENCODING_DENSE) {
    // A compressed push: float32, and a payload its decoder can read without a check of its own.
    ZPS_FUZZ_CHECK(num_frames == 2 && m.dtype == DType::kFloat32);
    ZPS_FUZZ_CHECK(push);
    if (t.encoding() == pb::ENCODING_FP16) {
      ZPS_FUZZ_CHECK(m.payload.size() == num_elements * sizeof(uint16_t));
    } else {
      ZPS_FUZZ_CHECK(t.encoding() == pb::ENCODING_SPARSE);
      ZPS_FUZZ_CHECK(t.sparse_count() >= 1 && t.sparse_count() <= num_elements);
      ZPS_FUZZ_CHECK(m.payload.size() == t.sparse_count() * 8);
      uint64_t previous = 0;
      for (uint64_t i = 0; i < t.sparse_count(); ++i) {
        uint32_t index;
        std::memcpy(&index, m.payload.data() + i * 4, 4);
        ZPS_FUZZ_CHECK(index < num_elements && (i == 0 || index > previous));
        previous = index;
      }
    }
    ZPS_FUZZ_CHECK(m.payload.size() <= limits.max_payload_bytes);
    return;
  }
  if (num_frames == 2) {
    ZPS_FUZZ_CHECK(m.payload.size() == num_elements * dtypeSize(m.dtype));
    ZPS_FUZZ_CHECK(m.payload.size() <= limits.max_payload_bytes);
  } else {
    ZPS_FUZZ_CHECK(num_frames == 1);
    ZPS_FUZZ_CHECK(!push);
  }
}

// Re-encodes with the production encoders and decodes again: what we accept from a peer we must be
// able to send ourselves, unchanged.
void checkRoundTrip(const wire::Message& first, const wire::Limits& limits) {
  if (const auto* c = std::get_if<pb::Control>(&first)) {
    std::vector<Blob> frames = wire::encodeControl(*c);
    auto again = wire::decode(frames, limits);
    ZPS_FUZZ_CHECK(again.ok());
    const auto* c2 = std::get_if<pb::Control>(&*again);
    ZPS_FUZZ_CHECK(c2 != nullptr);
    ZPS_FUZZ_CHECK(c2->SerializeAsString() == c->SerializeAsString());
    return;
  }
  const auto& m = std::get<wire::DataMessage>(first);
  std::vector<Blob> frames;
  if (m.data.has_fused()) {
    // Entries and their payloads back together, as a sender fuses them.
    pb::Data d = m.data;
    std::string payloads;
    for (const auto& e : m.entries) {
      *d.mutable_fused()->add_entries() = e.data;
      payloads.append(e.payload.view());
    }
    auto again = wire::decode(wire::encodeData(d, payloads.empty() ? Blob() : Blob::fromString(payloads)), limits);
    ZPS_FUZZ_CHECK(again.ok());
    const auto& m2 = std::get<wire::DataMessage>(*again);
    ZPS_FUZZ_CHECK(m2.entries.size() == m.entries.size());
    for (size_t i = 0; i < m.entries.size(); ++i) {
      ZPS_FUZZ_CHECK(m2.entries[i].data.SerializeAsString() == m.entries[i].data.SerializeAsString());
      ZPS_FUZZ_CHECK(sameBytes(m2.entries[i].payload, m.entries[i].payload));
    }
    return;
  }
  if (m.data.has_rows()) {
    frames = wire::encodeRows(m.data, m.keys, m.data.rows().push() ? m.payload : Blob());
  } else {
    // As received: a HELLO may name any protocol version (0 included), which the server refuses.
    frames = wire::encodeBody(m.data, m.payload);
  }
  auto again = wire::decode(frames, limits);
  ZPS_FUZZ_CHECK(again.ok());
  const auto* m2 = std::get_if<wire::DataMessage>(&*again);
  ZPS_FUZZ_CHECK(m2 != nullptr);
  ZPS_FUZZ_CHECK(m2->data.SerializeAsString() == m.data.SerializeAsString());
  ZPS_FUZZ_CHECK(m2->dtype == m.dtype);
  ZPS_FUZZ_CHECK(sameBytes(m2->keys, m.keys));
  ZPS_FUZZ_CHECK(sameBytes(m2->payload, m.payload));
  ZPS_FUZZ_CHECK((m2->payload.data() == nullptr) == (m.payload.data() == nullptr));
}

}  // namespace
}  // namespace zps::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zps;
  fuzz::quietLogging();
  if (size < 1) return 0;
  const bool tight = (data[0] & 0x80) != 0;
  const std::vector<Blob> frames = fuzz::splitFrames(data, size);

  const wire::Limits limits = tight ? fuzz::tightLimits() : wire::Limits();
  auto decoded = wire::decode(frames, limits);
  if (!decoded.ok()) {
    ZPS_FUZZ_CHECK(decoded.status().code() == StatusCode::kProtocol);
    return 0;
  }
  ZPS_FUZZ_CHECK(frames.size() >= 1 && frames.size() <= limits.max_frames);
  if (const auto* m = std::get_if<wire::DataMessage>(&*decoded)) {
    fuzz::checkDataInvariants(*m, frames.size(), limits);
  } else {
    ZPS_FUZZ_CHECK(frames.size() == 1);
  }
  if (tight) ZPS_FUZZ_CHECK(wire::decode(frames, wire::Limits()).ok());
  fuzz::checkRoundTrip(*decoded, limits);
  return 0;
}
