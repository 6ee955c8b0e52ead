// Tests for RequestWaiter (worker/request_waiter.h): a wait whose missing replies all come from one
// server receives them on the waiting thread; an abort or refusal wakes such threads.
#include "worker/request_waiter.h"

#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "tests/unit/fake_request_servers.h"

namespace zps {
namespace {

using namespace std::chrono_literals;
using testing::FakeServers;

TEST_CASE("request waiter: a wait whose unanswered requests all went to one server receives them itself",
          "[request_waiter]") {
  FakeServers f;
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  std::vector<int> received_from;
  f.receive = [&](int server, const std::function<bool()>& done) {
    received_from.push_back(server);
    CHECK_FALSE(done());
    CHECK(f.reply(ids[server], server, 2.5f) == Delivery::kDelivered);  // handed to this thread
    CHECK(done());
    return true;
  };
  auto handle = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(handle.ok());
  CHECK(f.reply(ids[0], 0, 1.5f) == Delivery::kDelivered);
  CHECK(f.waiter.wait(*handle, 1s).ok());
  CHECK(received_from == std::vector<int>{1});  // only server 1's reply was missing
  CHECK(out == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f, 2.5f});
  CHECK(f.receive_pushes == std::vector<bool>{false});  // a pull holds no push credit

  // Replies missing from two servers: the wait does not receive (it waits for the I/O thread).
  ids.clear();
  auto both = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(both.ok());
  CHECK(f.waiter.wait(*both, 20ms).code() == StatusCode::kDeadlineExceeded);
  CHECK(received_from == std::vector<int>{1});

  // An abort or a refusal ends a wait without a message: the receiving threads must look again.
  CHECK(f.receivers_woken == 0);
  f.table.refuse(Unavailable("recovering"));
  f.table.abort(Aborted("job ended"));
  CHECK(f.receivers_woken == 2);
}

// A scheduled push of key 100 to server 0: it holds push credit, so its answer comes on the push lane
// where one is open.
OutgoingRequest scheduledPush(RequestTable& table) {
  OutgoingRequest push;
  push.id = table.newRequest().request_id();
  push.request.server = 0;
  push.request.key = 100;
  push.request.priority = 0;
  push.request.credit = 16;
  push.frames.push_back(Blob::copyOf(&push.id, sizeof(push.id)));
  return push;
}

TEST_CASE("request waiter: a wait tells the receiver whether an unanswered request is a scheduled push",
          "[request_waiter]") {
  FakeServers f;
  f.receive = [](int, const std::function<bool()>&) { return false; };
  std::vector<float> out(4, 0.0f);
  std::vector<uint64_t> ids;
  FanOut fan = f.pull(out.data(), 1, &ids);
  fan.requests.push_back(scheduledPush(f.table));
  auto handle = f.table.issue(std::move(fan));
  REQUIRE(handle.ok());
  CHECK(f.waiter.wait(*handle, 10ms).code() == StatusCode::kDeadlineExceeded);
  CHECK(f.receive_pushes == std::vector<bool>{true});

  // Once the push is answered only the pull is left: the receiver hears `pushes` false.
  ids.clear();
  FanOut again = f.pull(out.data(), 1, &ids);
  OutgoingRequest push2 = scheduledPush(f.table);
  const uint64_t push2_id = push2.id;
  again.requests.push_back(std::move(push2));
  auto second = f.table.issue(std::move(again));
  REQUIRE(second.ok());
  pb::Data ack;
  ack.set_request_id(push2_id);
  ack.mutable_reply();
  CHECK(f.table.deliver(0, ack, DType::kFloat32, Blob(), "server 0") == Delivery::kDelivered);
  CHECK(f.waiter.wait(*second, 10ms).code() == StatusCode::kDeadlineExceeded);
  CHECK(f.receive_pushes == std::vector<bool>{true, false});
}

}  // namespace
}  // namespace zps
