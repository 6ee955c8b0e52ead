// Data messages as a peer may send them, with an encoded payload, for the codec's and the stores' tests.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ps/wire/codec.h"

namespace zps::testing {

// A PUSH, PUSH_PULL or PULL (a Tensor) or a REPLY of key 1, round 1, request id 5, of n elements of
// dtype, naming `encoding` and `count` (sparse_count), with `payload` (no payload frame when empty).
inline std::vector<Blob> encodedMessage(pb::DataCommand command, pb::PayloadEncoding encoding, uint64_t n,
                                        uint64_t count, const std::string& payload, DType dtype = DType::kFloat32) {
  pb::Data d;
  d.set_request_id(5);
  if (command == pb::CMD_REPLY) {
    pb::Reply* r = d.mutable_reply();
    r->set_key(1);
    r->set_round(1);
    r->set_dtype(static_cast<uint32_t>(dtype));
    r->set_num_elements(n);
    r->set_encoding(encoding);
    r->set_sparse_count(count);
  } else {
    pb::Tensor* t = d.mutable_tensor();
    t->set_op(wire::tensorOp(command));
    t->set_key(1);
    t->set_round(1);
    t->set_dtype(static_cast<uint32_t>(dtype));
    t->set_num_elements(n);
    t->set_encoding(encoding);
    t->set_sparse_count(count);
  }
  return wire::encodeData(d, payload.empty() ? Blob() : Blob::fromString(payload));
}

// Decoding `frames` fails as a kProtocol error whose message holds `needle`, and the request id is
// still known, so that a server can answer with an error.
inline void expectRefused(const std::vector<Blob>& frames, const std::string& needle) {
  pb::Data rejected;
  auto m = wire::decode(frames, wire::Limits(), &rejected);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::kProtocol);
  CHECK_THAT(m.status().message(), Catch::Contains(needle));
  CHECK(rejected.request_id() == 5);
}

}  // namespace zps::testing
