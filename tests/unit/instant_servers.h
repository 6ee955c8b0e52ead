// InstantServers: a RequestTable (worker/request_table.h) whose requests are answered at once,
// inside send, by fake servers: no network. For the unit tests of the worker's parts. Used by one
// test's thread.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "ps/wire/codec.h"
#include "tests/unit/function_route.h"
#include "worker/request_table.h"
#include "worker/request_waiter.h"

namespace zps::testing {

struct InstantServers {
  // The floats a reply carries (default: none).
  std::function<std::vector<float>(int server, const wire::DataMessage&)> payload;
  bool silent = false;         // true: requests get no reply
  std::vector<pb::Data> seen;  // every request's body, in send order
  FunctionRoute route{[this](const RequestSpec& to, std::vector<Blob> frames) { return answer(to, frames); }};
  RequestTable table{&route, std::chrono::milliseconds(0)};
  RequestWaiter waiter{&table};  // with no receiver: its waits are the table's

  Status answer(const RequestSpec& to, const std::vector<Blob>& frames) {
    auto decoded = wire::decode(frames, wire::Limits());
    REQUIRE(decoded.ok());
    const auto& msg = std::get<wire::DataMessage>(*decoded);
    seen.push_back(msg.data);
    if (silent) return Status::OK();
    pb::Data reply;
    reply.set_request_id(msg.data.request_id());
    reply.mutable_reply();
    const std::vector<float> data = payload ? payload(to.server, msg) : std::vector<float>();
    table.deliver(to.server, reply, DType::kFloat32, Blob::copyOf(data.data(), data.size() * sizeof(float)), "fake");
    return Status::OK();
  }
};

}  // namespace zps::testing
