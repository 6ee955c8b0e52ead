// Fixed-seed fuzz loops for the wire codec (ps/wire/codec.cc): random byte strings and randomly
// mutated valid messages fed to decode(), which must return a kProtocol error or a message that keeps
// the codec's promises, never crash.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/codec_samples.h"

namespace zps::wire {
namespace {

using namespace codec_testing;

// Checks one fuzzed decode: a kProtocol error with a message, or a message that obeys the codec's
// promises. Counts the outcome.
void checkFuzzed(const std::vector<Blob>& frames, const Limits& limits, int* ok, int* protocol) {
  auto decoded = decode(frames, limits);
  if (!decoded.ok()) {
    ++*protocol;
    CHECK(decoded.status().code() == StatusCode::kProtocol);
    CHECK_FALSE(decoded.status().message().empty());
    return;
  }
  ++*ok;
  if (auto* data = std::get_if<DataMessage>(&*decoded)) {
    const pb::Data& d = data->data;
    const pb::DataCommand command = commandOf(d);
    CHECK(pb::DataCommand_IsValid(command));
    CHECK(command != pb::CMD_UNSPECIFIED);
    // The body's dtype and element count (a rows message: its row count; none for other bodies).
    const uint32_t dtype = d.has_tensor()    ? d.tensor().dtype()
                           : d.has_declare() ? d.declare().dtype()
                                             : d.reply().dtype();
    const uint64_t num_elements = d.has_tensor()    ? d.tensor().num_elements()
                                  : d.has_declare() ? d.declare().num_elements()
                                  : d.has_rows()    ? d.rows().count()
                                                    : d.reply().num_elements();
    CHECK(dtype < static_cast<uint32_t>(kNumDTypes));
    uint64_t bytes = 0;
    REQUIRE(checkedBytes(num_elements, dtypeSize(data->dtype), &bytes));
    CHECK(bytes <= limits.max_payload_bytes);
    if (frames.size() == 2) {
      CHECK(data->payload.size() == bytes);
    } else {
      CHECK(data->payload.empty());
      CHECK_FALSE(hasPayload(command));
    }
  } else {
    CHECK(frames.size() == 1);
    CHECK(std::get<pb::Control>(*decoded).body_case() != pb::Control::BODY_NOT_SET);
  }
}

TEST_CASE("codec: text fields that are not UTF-8 still decode (they are bytes)", "[codec]") {
  // Peer text is opaque bytes capped in length: a cut character or a non-UTF-8 host name must not
  // turn a message (for example an error reply) into an undecodable one.
  auto c = sampleRegister();
  c.mutable_register_()->set_hostname("host\xff\xfe");
  auto decoded = decode(encodeControl(c), Limits());
  REQUIRE(decoded.ok());
  CHECK(std::get<pb::Control>(*decoded).register_().hostname() == "host\xff\xfe");
  auto d = sampleData(pb::CMD_DECLARE, DType::kFloat32, 4);
  d.mutable_declare()->set_name(std::string("grad\xc3", 5));  // a character cut in half
  auto data = decode(encodeData(d), Limits());
  REQUIRE(data.ok());
  CHECK(std::get<DataMessage>(*data).data.declare().name() == std::string("grad\xc3", 5));
}

TEST_CASE("codec: random byte strings never crash decode", "[codec]") {
  QuietProtobuf quiet;
  std::mt19937_64 rng(0x5A505331);
  std::uniform_int_distribution<int> len_dist(0, 96);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> frames_dist(1, 3);
  Limits limits;
  limits.max_payload_bytes = 1 << 16;
  int ok = 0;
  int protocol = 0;
  auto randomBytes = [&] {
    std::string s(static_cast<size_t>(len_dist(rng)), '\0');
    for (auto& ch : s) ch = static_cast<char>(byte_dist(rng));
    return s;
  };
  for (int i = 0; i < 4000; ++i) {
    std::vector<Blob> frames;
    int n = frames_dist(rng);
    for (int f = 0; f < n; ++f) frames.push_back(Blob::fromString(randomBytes()));
    // Every fourth message starts with a valid envelope tag so the fuzzer gets past the first byte.
    if (i % 4 == 0) {
      std::string head(frames[0].view());
      head.insert(0, std::string(1, (i % 8 == 0) ? '\x0a' : '\x1a'));
      head.insert(1, std::string(1, static_cast<char>(head.size() - 1)));
      frames[0] = Blob::fromString(head);
    }
    checkFuzzed(frames, limits, &ok, &protocol);
  }
  CHECK(ok + protocol == 4000);
  CHECK(protocol > 0);
}

TEST_CASE("codec: valid messages with random byte mutations never crash decode", "[codec]") {
  QuietProtobuf quiet;
  std::vector<std::vector<Blob>> corpus;
  for (const auto& [name, control] : allControlBodies()) corpus.push_back(encodeControl(control));
  for (pb::DataCommand cmd : kAllCommands) {
    pb::Data d = sampleData(cmd, DType::kInt32, 3);
    corpus.push_back(hasPayload(cmd) ? encodeData(d, payloadOf(12)) : encodeData(d));
  }
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> edits_dist(1, 3);
  std::uniform_int_distribution<int> kind_dist(0, 9);
  Limits limits;
  int ok = 0;
  int protocol = 0;
  const int kIterations = 4000;
  for (int i = 0; i < kIterations; ++i) {
    std::vector<Blob> frames = corpus[static_cast<size_t>(i) % corpus.size()];
    std::string head(frames[0].view());
    int edits = edits_dist(rng);
    for (int e = 0; e < edits && !head.empty(); ++e) {
      size_t pos = std::uniform_int_distribution<size_t>(0, head.size() - 1)(rng);
      int kind = kind_dist(rng);
      if (kind < 6) {  // overwrite a byte
        head[pos] = static_cast<char>(byte_dist(rng));
      } else if (kind < 8) {  // flip a bit
        head[pos] = static_cast<char>(head[pos] ^ (1 << (kind_dist(rng) % 8)));
      } else if (kind == 8) {  // truncate
        head.resize(pos);
      } else {  // insert a byte
        head.insert(pos, 1, static_cast<char>(byte_dist(rng)));
      }
    }
    frames[0] = Blob::fromString(head);
    // Now and then a payload frame where none may be, or none where one must be.
    if (i % 10 == 0) frames.push_back(payloadOf(12));
    if (i % 10 == 5 && frames.size() == 2) frames.pop_back();
    checkFuzzed(frames, limits, &ok, &protocol);
  }
  CHECK(ok + protocol == kIterations);
  // Both outcomes occur, so the loop exercises the validation after a successful parse.
  CHECK(ok > 100);
  CHECK(protocol > 100);
}

}  // namespace
}  // namespace zps::wire
