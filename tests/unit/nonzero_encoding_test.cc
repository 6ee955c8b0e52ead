// The nonzero encoding (kernels/nonzero_encoding.h): round trips and sums bit for bit against the dense
// payload, the codec's checks of a peer's encoded pushes and replies, and the sum store answering
// encoded with ZPS_SKIP_ZEROS.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/nonzero_encoding.h"
#include "kernels/reducer.h"
#include "ps/wire/codec.h"
#include "server/sum_store.h"
#include "tests/unit/encoded_message.h"

namespace zps {
namespace {

std::vector<uint32_t> bitsOf(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// n floats, about zero_share of them +0.0, with -0.0, NaN, infinity and a denormal among the rest.
std::vector<float> mostlyZeros(size_t n, double zero_share, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<float> value(0, 1);
  const float specials[] = {-0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min()};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double draw = u(gen);
    v[i] = draw < zero_share ? 0.0f : draw < zero_share + 0.01 ? specials[i % 4] : value(gen);
  }
  return v;
}

std::string encoded(const std::vector<float>& v) {
  const size_t count = kernels::countNonzero(v.data(), v.size());
  std::string out(kernels::nonzeroEncodedBytes(v.size(), count), '\0');
  kernels::encodeNonzero(v.data(), v.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

TEST_CASE("nonzero encoding: round trips bit for bit, any length", "[nonzero]") {
  for (size_t n : {1, 7, 8, 9, 64, 1000, 16385}) {
    for (double share : {0.0, 0.5, 0.97, 1.0}) {
      const std::vector<float> v = mostlyZeros(n, share, static_cast<uint32_t>(n));
      size_t expect = 0;
      for (uint32_t b : bitsOf(v)) expect += b != 0;
      CHECK(kernels::countNonzero(v.data(), n) == expect);
      const std::string e = encoded(v);
      CHECK(e.size() == (n + 7) / 8 + 4 * expect);
      std::vector<float> back(n, 123.0f);  // stale contents must not survive
      kernels::addNonzero(back.data(), n, reinterpret_cast<const uint8_t*>(e.data()), /*first=*/true);
      CHECK(bitsOf(back) == bitsOf(v));
    }
  }
}

TEST_CASE("nonzero encoding: works at any alignment", "[nonzero]") {
  const std::vector<float> v = mostlyZeros(100, 0.5, 3);
  std::string unaligned(1 + v.size() * 4, '\0');
  std::memcpy(unaligned.data() + 1, v.data(), v.size() * 4);
  const size_t count = kernels::countNonzero(unaligned.data() + 1, v.size());
  std::string e(1 + kernels::nonzeroEncodedBytes(v.size(), count), '\0');
  kernels::encodeNonzero(unaligned.data() + 1, v.size(), reinterpret_cast<uint8_t*>(e.data() + 1));
  CHECK(e.substr(1) == encoded(v));
  std::string out(1 + v.size() * 4, '\0');
  kernels::addNonzero(out.data() + 1, v.size(), reinterpret_cast<const uint8_t*>(e.data() + 1), true);
  CHECK(std::memcmp(out.data() + 1, v.data(), v.size() * 4) == 0);
}

TEST_CASE("nonzero encoding: adding it is adding the dense payload, bit for bit", "[nonzero]") {
  auto reducer = kernels::makeCpuReducer();
  const size_t n = 5000;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    std::vector<float> sum = mostlyZeros(n, 0.6, seed), other = mostlyZeros(n, 0.6, seed + 100);
    sum[0] = -0.0f;  // -0.0 + a left-out +0.0 is +0.0 in the dense sum
    other[0] = 0.0f;
    std::vector<float> dense = sum;
    REQUIRE(reducer
                ->sum(reinterpret_cast<uint8_t*>(dense.data()), reinterpret_cast<const uint8_t*>(other.data()), n,
                      DType::kFloat32)
                .ok());
    const std::string e = encoded(other);
    kernels::addNonzero(sum.data(), n, reinterpret_cast<const uint8_t*>(e.data()), /*first=*/false);
    CHECK(bitsOf(sum) == bitsOf(dense));
    CHECK(std::bit_cast<uint32_t>(sum[0]) == 0);
  }
}

TEST_CASE("nonzero encoding: used where it saves an eighth of the bytes", "[nonzero]") {
  CHECK(kernels::nonzeroWorthIt(1000, 0));
  CHECK(kernels::nonzeroWorthIt(1000, 840));  // 125 + 3360 bytes of 4000
  CHECK_FALSE(kernels::nonzeroWorthIt(1000, 850));
  CHECK_FALSE(kernels::nonzeroWorthIt(1000, 1000));
}

// ---- the codec ----

std::vector<Blob> nonzeroMessage(pb::DataCommand command, uint64_t n, uint64_t count, const std::string& payload,
                                 DType dtype = DType::kFloat32, pb::PayloadEncoding encoding = pb::ENCODING_NONZERO) {
  return testing::encodedMessage(command, encoding, n, count, payload, dtype);
}

using testing::expectRefused;

TEST_CASE("codec: nonzero-encoded pushes and replies decode", "[nonzero][codec]") {
  const std::vector<float> v = {0, 1.5f, 0, 0, -0.0f, 0, 0, 0, 0, 2.5f};  // 3 travel
  const std::string e = encoded(v);
  REQUIRE(e.size() == 2 + 12);
  for (pb::DataCommand c : {pb::CMD_PUSH, pb::CMD_PUSH_PULL, pb::CMD_REPLY}) {
    auto m = wire::decode(nonzeroMessage(c, 10, 3, e), wire::Limits());
    REQUIRE(m.ok());
    CHECK(std::get<wire::DataMessage>(*m).payload.size() == 14);
  }
  // Every element +0.0: the bitmap alone.
  CHECK(wire::decode(nonzeroMessage(pb::CMD_REPLY, 10, 0, std::string(2, '\0')), wire::Limits()).ok());
}

TEST_CASE("codec: hostile nonzero payloads are kProtocol errors", "[nonzero][codec]") {
  const std::string three = std::string("\x02\x02", 2) + std::string(12, '\0');  // bits 1 and 9: 2 set
  expectRefused(nonzeroMessage(pb::CMD_PUSH, 10, 3, three), "nonzero bitmap sets 2 bits but sparse_count is 3");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 10, 3, three), "nonzero bitmap sets 2 bits but sparse_count is 3");
  // Bit 10 of 10 elements names an element that does not exist.
  expectRefused(nonzeroMessage(pb::CMD_PUSH, 10, 1, std::string("\x00\x04", 2) + std::string(4, '\0')),
                "bits past its 10 elements");
  expectRefused(nonzeroMessage(pb::CMD_PUSH, 10, 11, std::string(46, '\0')), "sparse_count 11 of a nonzero payload");
  expectRefused(nonzeroMessage(pb::CMD_PUSH, 10, 1, std::string(2, '\x01')), "payload is 2 bytes");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 10, 1, std::string(3, '\x00')), "payload is 3 bytes");
  expectRefused(nonzeroMessage(pb::CMD_PUSH, 10, 0, std::string(2, '\0'), DType::kFloat64), "float32");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 10, 0, std::string(2, '\0'), DType::kInt32), "float32");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 4, 0, std::string(8, '\0'), DType::kFloat32, pb::ENCODING_FP16),
                "a reply's payload encoding must be dense or nonzero");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 2, 1, std::string(8, '\0'), DType::kFloat32, pb::ENCODING_DENSE),
                "sparse_count is set on a dense reply");
  expectRefused(nonzeroMessage(pb::CMD_REPLY, 10, 0, ""), "a nonzero-encoded reply is missing its payload");
  expectRefused(nonzeroMessage(pb::CMD_PULL, 10, 0, ""), "cannot carry an encoded payload");
}

// ---- the sum store ----

wire::DataMessage decoded(const std::vector<Blob>& frames) {
  auto m = wire::decode(frames, wire::Limits());
  REQUIRE(m.ok());
  return std::get<wire::DataMessage>(*m);
}

wire::DataMessage declareOf(uint64_t n) {
  wire::DataMessage declare;
  declare.data.mutable_declare()->set_key(1);
  declare.data.mutable_declare()->set_num_elements(n);
  declare.data.mutable_declare()->set_name("grad");
  return declare;
}

std::string bytesOf(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// The float32 elements a sum reply carries, decoded as the worker does.
std::vector<float> replied(const Outgoing& o, size_t n) {
  std::vector<float> out(n);
  if (o.data.reply().encoding() == pb::ENCODING_NONZERO) {
    kernels::addNonzero(out.data(), n, o.payload.data(), true);
  } else {
    REQUIRE(o.payload.size() == n * 4);
    std::memcpy(out.data(), o.payload.data(), n * 4);
  }
  return out;
}

TEST_CASE("sum store: nonzero and dense pushes sum to the dense bits, and skip_zeros answers encoded", "[nonzero]") {
  auto reducer = kernels::makeCpuReducer();
  const size_t n = 4096;
  const std::vector<float> w0 = mostlyZeros(n, 0.7, 11), w1 = mostlyZeros(n, 0.7, 12), w2 = mostlyZeros(n, 0.7, 13);
  std::vector<float> want = w0;
  for (const auto* w : {&w1, &w2})
    for (size_t i = 0; i < n; ++i) want[i] = want[i] + (*w)[i];
  for (bool skip : {false, true}) {
    for (int encoded_ranks = 0; encoded_ranks < 8; ++encoded_ranks) {  // which workers push encoded
      SumStore store(3, reducer.get(), nullptr, nullptr, skip);
      std::vector<Outgoing> out;
      store.handle(1, 0, declareOf(n), &out);
      const std::vector<float>* pushes[] = {&w0, &w1, &w2};
      // Worker 1 first: the round waits for rank 0 and adds in rank order.
      for (int r : {1, 0, 2}) {
        const bool enc = (encoded_ranks >> r) & 1;
        const std::string payload = enc ? encoded(*pushes[r]) : bytesOf(*pushes[r]);
        const uint64_t count = enc ? kernels::countNonzero(pushes[r]->data(), n) : 0;
        store.handle(10 + r, r,
                     decoded(nonzeroMessage(pb::CMD_PUSH_PULL, n, count, payload, DType::kFloat32,
                                            enc ? pb::ENCODING_NONZERO : pb::ENCODING_DENSE)),
                     &out);
      }
      int replies = 0;
      for (const Outgoing& o : out) {
        if (!o.data.has_reply() || o.data.reply().num_elements() != n) continue;
        ++replies;
        // A round of dense pushes only (each had too few zeros) is answered dense without a look.
        const bool encoded_reply = skip && encoded_ranks != 0;
        CHECK(o.data.reply().encoding() == (encoded_reply ? pb::ENCODING_NONZERO : pb::ENCODING_DENSE));
        if (encoded_reply) CHECK(o.payload.size() < n * 4 * 7 / 8);
        CHECK(bitsOf(replied(o, n)) == bitsOf(want));
      }
      CHECK(replies == 3);
      // A late pull of the kept round gets the same answer.
      pb::Data pull;
      pull.set_request_id(99);
      pull.mutable_tensor()->set_op(pb::OP_PULL);
      pull.mutable_tensor()->set_key(1);
      pull.mutable_tensor()->set_round(1);
      pull.mutable_tensor()->set_dtype(static_cast<uint32_t>(DType::kFloat32));
      pull.mutable_tensor()->set_num_elements(n);
      out.clear();
      store.handle(12, 2, decoded(wire::encodeData(pull)), &out);
      REQUIRE(out.size() == 1);
      CHECK(bitsOf(replied(out[0], n)) == bitsOf(want));
    }
  }
}

}  // namespace
}  // namespace zps
