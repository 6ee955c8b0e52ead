// Tests for gradient compression (docs/compression.md): the compressors themselves
// (kernels/compressor.cc), error feedback, the codec's checks of compressed pushes, the server's
// float32 sums of them (SumStore), and the ZPS_COMPRESSOR / ZPS_COMPRESS_RATIO / ZPS_MIN_COMPRESS_BYTES
// settings.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/compressor.h"
#include "kernels/reducer.h"
#include "ps/common/config.h"
#include "ps/wire/codec.h"
#include "server/sum_store.h"
#include "tests/unit/encoded_message.h"
#include "tests/unit/env_lookup.h"

namespace zps {
namespace {

using kernels::GradientCompressor;

// Decodes a payload the way the server does, into a fresh dense vector.
std::vector<float> decoded(const GradientCompressor& c, const std::vector<uint8_t>& payload, size_t sent, size_t n) {
  std::vector<float> out(n, -1.0f);
  if (c.kind() == Compressor::kFp16)
    kernels::addFp16(out.data(), payload.data(), n, /*first=*/true);
  else
    kernels::addSparse(out.data(), n, payload.data(), sent, /*first=*/true);
  return out;
}

struct Round {
  std::vector<float> dense;  // what the server sees
  size_t sent = 0;
  size_t bytes = 0;
  std::vector<uint32_t> indices;
};

Round compressOnce(GradientCompressor& c, const std::vector<float>& grad) {
  std::vector<uint8_t> payload(c.maxPayloadBytes());
  Round r;
  r.bytes = c.compress(grad.data(), payload.data(), &r.sent);
  r.dense = decoded(c, payload, r.sent, grad.size());
  r.indices.resize(r.sent);
  if (r.sent > 0) std::memcpy(r.indices.data(), payload.data(), r.sent * sizeof(uint32_t));
  return r;
}

TEST_CASE("compressor: sparseCount is ceil(ratio x n), at least 1, at most n", "[compressor]") {
  CHECK(kernels::sparseCount(0.01, 1000) == 10);
  CHECK(kernels::sparseCount(0.01, 1001) == 11);
  CHECK(kernels::sparseCount(0.001, 10) == 1);
  CHECK(kernels::sparseCount(1.0, 10) == 10);
  CHECK(kernels::sparseCount(0.5, 1) == 1);
}

TEST_CASE("compressor: fp16 halves the bytes and is exact on values half represents", "[compressor]") {
  std::vector<float> grad = {0.0f, -0.0f, 1.0f, -2.5f, 1024.0f, 0.125f, 65504.0f, -3.0f};
  GradientCompressor c(Compressor::kFp16, 1.0, grad.size(), 1);
  Round r = compressOnce(c, grad);
  CHECK(r.bytes == grad.size() * 2);
  CHECK(r.sent == 0);
  CHECK(r.dense == grad);
  // Others round to nearest; beyond the half range they become infinite.
  Round q = compressOnce(c, {0.1f, 1e6f, -1e6f, 1.0f + 1.0f / 4096, 0, 0, 0, 0});
  CHECK(std::fabs(q.dense[0] - 0.1f) < 1e-4f);
  CHECK(std::isinf(q.dense[1]));
  CHECK(std::isinf(q.dense[2]));
  CHECK(q.dense[3] == 1.0f);
}

// On x86 with F16C the fp16 loops use vector conversions; they must round exactly as the portable
// bit-twiddling (kernels::floatToHalf) does, tails and specials included.
TEST_CASE("compressor: fp16 encodes and decodes like floatToHalf / halfToFloat, element for element", "[compressor]") {
  std::mt19937 rng(11);
  std::vector<float> grad(1003);
  for (float& g : grad)
    g = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 40) - 30);
  grad[5] = std::nanf("");
  grad[6] = INFINITY;
  grad[7] = 1e-8f;    // a half subnormal
  grad[1001] = 7e4f;  // beyond the half range
  GradientCompressor c(Compressor::kFp16, 1.0, grad.size(), 1);
  std::vector<uint8_t> payload(c.maxPayloadBytes());
  size_t sent = 0;
  REQUIRE(c.compress(grad.data(), payload.data(), &sent) == grad.size() * 2);
  std::vector<float> sum(grad.size(), 1.0f);
  kernels::addFp16(sum.data(), payload.data(), grad.size(), /*first=*/false);
  for (size_t i = 0; i < grad.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, payload.data() + 2 * i, 2);
    INFO(i << ": " << grad[i]);
    REQUIRE(h == kernels::floatToHalf(grad[i]));
    const float expect = 1.0f + kernels::halfToFloat(h);
    REQUIRE((sum[i] == expect || (std::isnan(sum[i]) && std::isnan(expect))));
  }
}

TEST_CASE("compressor: topk sends the k largest magnitudes, in increasing index order", "[compressor]") {
  std::vector<float> grad = {0.5f, -9.0f, 1.0f, 3.0f, -0.25f, 7.0f, 0.0f, -2.0f, 8.0f, 0.1f};
  GradientCompressor c(Compressor::kTopK, 0.3, grad.size(), 1);
  Round r = compressOnce(c, grad);
  REQUIRE(r.sent == 3);
  CHECK(r.bytes == 3 * kernels::kSparseEntryBytes);
  CHECK(r.indices == std::vector<uint32_t>{1, 5, 8});
  CHECK(r.dense == std::vector<float>{0, -9.0f, 0, 0, 0, 7.0f, 0, 0, 8.0f, 0});
  // The rest waits in the residual and is sent with the next round's gradient.
  CHECK(c.residual() == std::vector<float>{0.5f, 0, 1.0f, 3.0f, -0.25f, 0, 0.0f, -2.0f, 0, 0.1f});
  Round next = compressOnce(c, std::vector<float>(grad.size(), 0.0f));
  CHECK(next.indices == std::vector<uint32_t>{2, 3, 7});
}

TEST_CASE("compressor: a NaN is sent first and never breaks the ordering", "[compressor]") {
  std::vector<float> grad(100, 1.0f);
  grad[42] = std::nanf("");
  GradientCompressor c(Compressor::kTopK, 0.01, grad.size(), 1);
  Round r = compressOnce(c, grad);
  REQUIRE(r.sent == 1);
  CHECK(r.indices[0] == 42);
  CHECK(std::isnan(r.dense[42]));
}

TEST_CASE("compressor: randomk sends every element once per ceil(1 / ratio) rounds", "[compressor]") {
  const size_t n = 1000;
  GradientCompressor c(Compressor::kRandomK, 0.07, n, 99);  // k = 70: 14 full rounds and one of 20
  std::vector<int> times_sent(n, 0);
  std::vector<float> zeros(n, 0.0f);
  size_t rounds = 0;
  for (size_t total = 0; total < n; ++rounds) {
    Round r = compressOnce(c, zeros);
    REQUIRE(r.sent >= 1);
    REQUIRE(r.sent <= 70);
    for (size_t i = 0; i < r.sent; ++i) {
      if (i > 0) REQUIRE(r.indices[i] > r.indices[i - 1]);
      ++times_sent[r.indices[i]];
    }
    total += r.sent;
  }
  CHECK(rounds == 15);
  for (int t : times_sent) REQUIRE(t == 1);
  // Choices are random: two seeds differ, one seed repeats.
  GradientCompressor a(Compressor::kRandomK, 0.07, n, 1), b(Compressor::kRandomK, 0.07, n, 2),
      a2(Compressor::kRandomK, 0.07, n, 1);
  auto ia = compressOnce(a, zeros).indices;
  CHECK(ia != compressOnce(b, zeros).indices);
  CHECK(ia == compressOnce(a2, zeros).indices);
}

// Error feedback: what was sent plus what is held back equals what was pushed, every round; and the
// pushed-minus-sent gap stays bounded, so the sums over many rounds converge to the dense sums.
TEST_CASE("compressor: error feedback makes the sum over rounds converge to the dense sum", "[compressor]") {
  for (Compressor kind : {Compressor::kTopK, Compressor::kRandomK}) {
    INFO(compressorName(kind));
    const size_t n = 4096;
    GradientCompressor c(kind, 0.05, n, 7);
    std::mt19937 rng(3);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::vector<double> pushed(n, 0.0), received(n, 0.0);
    std::vector<float> grad(n);
    double worst_gap_at_100 = 0, worst_gap_at_400 = 0, dense_norm = 0;
    for (int round = 1; round <= 400; ++round) {
      // A gradient with a steady signal per element plus noise, as training produces.
      for (size_t i = 0; i < n; ++i) grad[i] = 0.01f * static_cast<float>(i % 17) + 0.1f * noise(rng);
      Round r = compressOnce(c, grad);
      for (size_t i = 0; i < n; ++i) {
        pushed[i] += grad[i];
        received[i] += r.dense[i];
      }
      // Invariant: received + residual == pushed (up to float rounding of the running sums).
      double gap = 0, norm = 0, lost = 0;
      for (size_t i = 0; i < n; ++i) {
        lost = std::max(lost, std::fabs(received[i] + c.residual()[i] - pushed[i]) / (1 + std::fabs(pushed[i])));
        gap = std::max(gap, std::fabs(received[i] - pushed[i]));
        norm = std::max(norm, std::fabs(pushed[i]));
      }
      REQUIRE(lost < 1e-3);
      if (round == 100) worst_gap_at_100 = gap / norm;
      if (round == 400) {
        worst_gap_at_400 = gap / norm;
        dense_norm = norm;
      }
    }
    // The residual stays bounded while the sums grow, so the relative gap shrinks.
    CHECK(worst_gap_at_400 < 0.2);
    CHECK(worst_gap_at_400 < worst_gap_at_100);
    CHECK(dense_norm > 50);
  }
}

// ---- the codec: compressed pushes from a peer ----

std::vector<Blob> compressedPush(pb::PayloadEncoding encoding, uint64_t n, uint64_t count, const std::string& payload,
                                 DType dtype = DType::kFloat32, pb::DataCommand command = pb::CMD_PUSH) {
  return testing::encodedMessage(command, encoding, n, count, payload, dtype);
}

std::string sparsePayload(const std::vector<uint32_t>& indices, const std::vector<float>& values) {
  std::string s(indices.size() * 4 + values.size() * 4, '\0');
  std::memcpy(s.data(), indices.data(), indices.size() * 4);
  std::memcpy(s.data() + indices.size() * 4, values.data(), values.size() * 4);
  return s;
}

void expectRejected(const std::vector<Blob>& frames, const std::string& needle) {
  testing::expectRefused(frames, needle);
}

TEST_CASE("codec: valid compressed pushes decode", "[compressor][codec]") {
  auto fp16 = wire::decode(compressedPush(pb::ENCODING_FP16, 4, 0, std::string(8, '\0')), wire::Limits());
  REQUIRE(fp16.ok());
  auto sparse = wire::decode(compressedPush(pb::ENCODING_SPARSE, 10, 2, sparsePayload({0, 9}, {1.0f, 2.0f}),
                                            DType::kFloat32, pb::CMD_PUSH_PULL),
                             wire::Limits());
  REQUIRE(sparse.ok());
  CHECK(std::get<wire::DataMessage>(*sparse).payload.size() == 16);
}

TEST_CASE("codec: hostile compressed pushes are kProtocol errors", "[compressor][codec]") {
  expectRejected(compressedPush(pb::ENCODING_FP16, 4, 0, std::string(16, '\0')), "payload is 16 bytes");
  expectRejected(compressedPush(pb::ENCODING_FP16, 4, 0, std::string(8, '\0'), DType::kFloat64), "float32");
  expectRejected(compressedPush(pb::ENCODING_FP16, 4, 1, std::string(8, '\0')), "sparse_count is set");
  expectRejected(compressedPush(static_cast<pb::PayloadEncoding>(9), 4, 0, std::string(8, '\0')), "encoding 9");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 0, ""), "sparse_count 0 is out of range");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 11, std::string(88, '\0')), "sparse_count 11");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 2, sparsePayload({1}, {1.0f})), "payload is 8 bytes");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 2, sparsePayload({3, 10}, {1.0f, 2.0f})),
                 "sparse index 10 at position 1 is not below 10");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 2, sparsePayload({3, 3}, {1.0f, 2.0f})), "does not increase");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 2, sparsePayload({4, 2}, {1.0f, 2.0f})), "does not increase");
  expectRejected(compressedPush(pb::ENCODING_SPARSE, 10, 1, sparsePayload({0xFFFFFFFF}, {1.0f})), "not below");
  expectRejected(compressedPush(pb::ENCODING_DENSE, 2, 1, std::string(8, '\0')), "sparse_count is set on a dense");
  // Only pushes are compressed: a pull claiming an encoding is refused, and so is a reply (proto/zps.proto's
  // Reply: dense or nonzero only).
  pb::Data pull;
  pull.set_request_id(5);
  pull.mutable_tensor()->set_op(pb::OP_PULL);
  pull.mutable_tensor()->set_num_elements(4);
  pull.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
  expectRejected(wire::encodeData(pull), "cannot carry an encoded payload");
  auto reply = compressedPush(pb::ENCODING_FP16, 4, 0, std::string(8, '\0'), DType::kFloat32, pb::CMD_REPLY);
  expectRejected(reply, "a reply's payload encoding must be dense or nonzero");
}

// ---- the server: float32 sums of compressed pushes ----

wire::DataMessage decodedPush(const std::vector<Blob>& frames) {
  auto m = wire::decode(frames, wire::Limits());
  REQUIRE(m.ok());
  return std::get<wire::DataMessage>(*m);
}

TEST_CASE("sum store: compressed and dense pushes of one round sum in float32", "[compressor]") {
  auto reducer = kernels::makeCpuReducer();
  SumStore store(3, reducer.get());
  std::vector<Outgoing> out;
  wire::DataMessage declare;
  declare.data.mutable_declare()->set_key(1);
  declare.data.mutable_declare()->set_num_elements(4);
  declare.data.mutable_declare()->set_name("grad");
  store.handle(1, 0, declare, &out);
  REQUIRE(wire::commandOf(out.back().data) == pb::CMD_REPLY);

  // Worker 0: fp16 of {1, 2, 3, 4}; worker 1: sparse {index 1: 10, index 3: 20}; worker 2: dense.
  std::string half(8, '\0');
  for (int i = 0; i < 4; ++i) {
    uint16_t h = kernels::floatToHalf(static_cast<float>(i + 1));
    std::memcpy(half.data() + 2 * i, &h, 2);
  }
  float dense[4] = {100, 200, 300, 400};
  std::string dense_bytes(reinterpret_cast<const char*>(dense), sizeof(dense));
  // The sparse push comes first: it must not leave the round's buffer with stale bytes.
  out.clear();
  store.handle(2, 1, decodedPush(compressedPush(pb::ENCODING_SPARSE, 4, 2, sparsePayload({1, 3}, {10, 20}))), &out);
  store.handle(1, 0, decodedPush(compressedPush(pb::ENCODING_FP16, 4, 0, half)), &out);
  store.handle(3, 2,
               decodedPush(compressedPush(pb::ENCODING_DENSE, 4, 0, dense_bytes, DType::kFloat32, pb::CMD_PUSH_PULL)),
               &out);
  const Outgoing& sum = out.back();
  REQUIRE(wire::commandOf(sum.data) == pb::CMD_REPLY);
  REQUIRE(sum.payload.size() == 16);
  float got[4];
  std::memcpy(got, sum.payload.data(), 16);
  CHECK(got[0] == 101);
  CHECK(got[1] == 212);
  CHECK(got[2] == 303);
  CHECK(got[3] == 424);
}

TEST_CASE("sum store: a compressed push to a non-float32 key is an error reply", "[compressor]") {
  auto reducer = kernels::makeCpuReducer();
  SumStore store(1, reducer.get());
  std::vector<Outgoing> out;
  wire::DataMessage declare;
  declare.data.mutable_declare()->set_key(1);
  declare.data.mutable_declare()->set_num_elements(4);
  declare.data.mutable_declare()->set_dtype(static_cast<uint32_t>(DType::kInt32));
  declare.dtype = DType::kInt32;
  store.handle(1, 0, declare, &out);
  out.clear();
  store.handle(1, 0, decodedPush(compressedPush(pb::ENCODING_FP16, 4, 0, std::string(8, '\0'))), &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("does not match the declared"));
}

// ---- settings ----

testing::Env workerEnv() {
  return {{"DMLC_ROLE", "worker"},       {"DMLC_NUM_SERVER", "1"},          {"DMLC_NUM_WORKER", "1"},
          {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"HOSTNAME", "testhost"}};
}

TEST_CASE("config: compression settings", "[compressor][config]") {
  auto env = workerEnv();
  auto c = loadConfig(testing::lookup(env));
  REQUIRE(c.ok());
  CHECK(c->compressor == Compressor::kNone);
  CHECK(c->compress_ratio == kDefaultCompressRatio);
  CHECK(c->min_compress_bytes == 16384);
  env["ZPS_COMPRESSOR"] = " topk ";
  env["ZPS_COMPRESS_RATIO"] = "0.25";
  env["ZPS_MIN_COMPRESS_BYTES"] = "0";
  c = loadConfig(testing::lookup(env));
  REQUIRE(c.ok());
  CHECK(c->compressor == Compressor::kTopK);
  CHECK(c->compress_ratio == 0.25);
  CHECK(c->min_compress_bytes == 0);

  auto expectInvalid = [](testing::Env bad, const std::string& needle) {
    auto r = loadConfig(testing::lookup(bad));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains(needle));
  };
  for (const char* bad : {"FP16", "top-k", "zip"}) {
    auto e = workerEnv();
    e["ZPS_COMPRESSOR"] = bad;
    expectInvalid(e, "ZPS_COMPRESSOR='" + std::string(bad) + "' is not a compressor; set it to none, fp16");
  }
  for (const char* bad : {"0", "-0.1", "1.5", "nan", "1%", ""}) {
    auto e = workerEnv();
    e["ZPS_COMPRESS_RATIO"] = bad;
    expectInvalid(e, "ZPS_COMPRESS_RATIO='" + std::string(bad) + "' is not a share in (0, 1]");
  }
  auto e = workerEnv();
  e["ZPS_MIN_COMPRESS_BYTES"] = "-1";
  expectInvalid(e, "ZPS_MIN_COMPRESS_BYTES=-1 is out of range");
}

}  // namespace
}  // namespace zps
