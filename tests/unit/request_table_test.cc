// Tests for RequestTable (worker/request_table.h): the fan-out-and-wait of every worker operation,
// reply delivery, the missing-replies message, resends, and cancellation after a failed wait.
#include "worker/request_table.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "tests/unit/fake_request_servers.h"

namespace zps {
namespace {

using namespace std::chrono_literals;
using testing::FakeServers;

TEST_CASE(
    "request table: a fan-out ends when every partition's reply is in "
    "its buffer",
    "[request_table]") {
  FakeServers f;
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  auto handle = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(handle.ok());
  CHECK(f.sent_to == std::vector<int>{0, 1});
  CHECK(f.table.poll(*handle).value() == false);
  CHECK(f.reply(ids[0], 0, 1.5f) == Delivery::kDelivered);
  CHECK(f.table.poll(*handle).value() == false);
  CHECK(f.reply(ids[1], 1, 2.5f) == Delivery::kDelivered);
  CHECK(f.table.poll(*handle).value() == true);
  CHECK(f.table.wait(*handle, 1s).ok());
  CHECK(out == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f, 2.5f});
  CHECK(f.table.pendingCount() == 0);
  // The handle is released by wait().
  CHECK(f.table.poll(*handle).status().code() == StatusCode::kInvalidArgument);
  CHECK(f.table.wait(*handle, 1s).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("request table: an expired wait names the missing replies and cancels them", "[request_table]") {
  FakeServers f;
  std::vector<float> out(12, 0.0f);
  std::vector<uint64_t> ids;
  FanOut fan = f.pull(out.data(), 3, &ids);
  bool described = false;
  fan.op->on_cancelled = [&](const Status& s) {
    described = true;
    return Status(s.code(), s.message() + "; retry it");
  };
  auto handle = f.table.issue(std::move(fan));
  REQUIRE(handle.ok());
  REQUIRE(f.reply(ids[1], 1, 7.0f) == Delivery::kDelivered);
  Status s = f.table.wait(*handle, 50ms);
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK(s.message() ==
        "pull of 'w' round 1: 2 replies missing after 0.05 s: "
        "key 100 from server 0 (fake:9000), "
        "key 102 from server 2 (fake:9002); retry it");
  CHECK(described);
  CHECK(f.table.pendingCount() == 0);
  // The caller reuses the buffer; the late replies must not touch it.
  std::fill(out.begin(), out.end(), -1.0f);
  CHECK(f.reply(ids[0], 0, 3.0f) == Delivery::kCancelled);
  CHECK(f.reply(ids[2], 2, 3.0f) == Delivery::kCancelled);
  CHECK(out == std::vector<float>(12, -1.0f));
  CHECK(f.table.droppedReplies() == 2);
  // A reply nobody asked for is unknown, not cancelled.
  CHECK(f.reply(ids[2] + 1000, 2, 3.0f) == Delivery::kUnknown);
  CHECK(f.table.droppedReplies() == 2);
}

// Delivers the reply to the first request on another thread (the I/O thread's part) and holds it
// just before its copy, where on_reply runs outside the table's lock, as a large copy would last.
struct SlowDelivery {
  std::atomic<bool> copying{false}, copied{false};
  std::thread io;

  void hold(FanOut* fan) {
    fan->requests[0].request.on_reply = [this](const pb::Data&) {
      copying = true;
      std::this_thread::sleep_for(200ms);
      copied = true;
      return Status::OK();
    };
  }
  // Returns once the delivery is inside the copy.
  void deliver(FakeServers* f, uint64_t id) {
    io = std::thread([f, id] { f->reply(id, 0, 4.0f); });
    while (!copying) std::this_thread::yield();
  }
  ~SlowDelivery() {
    if (io.joinable()) io.join();
  }
};

TEST_CASE("request table: wait does not return while a reply is being copied into the buffer", "[request_table]") {
  FakeServers f;
  std::vector<float> out(4, 0.0f);
  std::vector<uint64_t> ids;
  FanOut fan = f.pull(out.data(), 1, &ids);
  SlowDelivery slow;
  slow.hold(&fan);
  auto handle = f.table.issue(std::move(fan));
  REQUIRE(handle.ok());
  slow.deliver(&f, ids[0]);
  // The deadline passes during the copy; wait returns only after it, with the complete result.
  Status s = f.table.wait(*handle, 10ms);
  CHECK(slow.copied);
  CHECK(s.ok());
  CHECK(out == std::vector<float>(4, 4.0f));
}

TEST_CASE("request table: cancel waits for a delivery in progress and drops the rest", "[request_table]") {
  FakeServers f;
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  FanOut fan = f.pull(out.data(), 2, &ids);
  SlowDelivery slow;
  slow.hold(&fan);
  auto op = f.table.send(std::move(fan));
  REQUIRE(op.ok());
  slow.deliver(&f, ids[0]);
  CHECK(f.table.cancel(*op));
  CHECK(slow.copied);
  CHECK(f.reply(ids[1], 1, 5.0f) == Delivery::kCancelled);
  CHECK(out == std::vector<float>{4, 4, 4, 4, 0, 0, 0, 0});
  CHECK_FALSE(f.table.cancel(*op));
}

TEST_CASE("request table: after abort no reply is copied, and an aborted wait outlasts every copy", "[request_table]") {
  // A program stops at its first failed wait and frees the buffers of the operations it never waited
  // for (zps check did, after a SIGSTOP past the heartbeat timeout): a later copy would write into
  // freed memory, and one in progress would race the free.
  FakeServers f;
  std::vector<float> first(4, 0.0f), second(4, 0.0f), third(4, 0.0f);
  std::vector<uint64_t> first_ids, second_ids, third_ids;
  auto waited = f.table.issue(f.pull(first.data(), 1, &first_ids));
  REQUIRE(waited.ok());
  FanOut slow_fan = f.pull(second.data(), 1, &second_ids);
  SlowDelivery slow;
  slow.hold(&slow_fan);
  REQUIRE(f.table.issue(std::move(slow_fan)).ok());
  REQUIRE(f.table.issue(f.pull(third.data(), 1, &third_ids)).ok());
  slow.deliver(&f, second_ids[0]);  // in the copy into `second`
  f.table.abort(Aborted("job ended by the scheduler: worker 1 failed"));
  Status s = f.table.wait(*waited, 10s);
  CHECK(s.code() == StatusCode::kAborted);
  CHECK(slow.copied);  // the copy into another operation's buffer ended before the wait returned
  CHECK(f.reply(third_ids[0], 0, 9.0f) == Delivery::kCancelled);
  CHECK(third == std::vector<float>(4, 0.0f));
}

TEST_CASE("request table: error replies and malformed payloads fail the operation", "[request_table]") {
  FakeServers f;
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  auto handle = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(handle.ok());
  pb::Data error;
  error.set_request_id(ids[0]);
  error.mutable_error()->set_text("no such key");
  CHECK(f.table.deliver(0, error, DType::kFloat32, Blob(), "server 0") == Delivery::kDelivered);
  // A reply from the wrong server does not count as the reply.
  CHECK(f.reply(ids[1], 0, 1.0f) == Delivery::kUnknown);
  pb::Data shortReply;
  shortReply.set_request_id(ids[1]);
  shortReply.mutable_reply();
  float one = 1.0f;
  CHECK(f.table.deliver(1, shortReply, DType::kFloat32, Blob::copyOf(&one, sizeof(one)), "server 1") ==
        Delivery::kDelivered);
  Status s = f.table.wait(*handle, 1s);
  CHECK(s.code() == StatusCode::kInternal);
  CHECK(s.message() == "pull of 'w' round 1: server 0 answered: no such key");
  CHECK(out == std::vector<float>(8, 0.0f));

  // An error that refuses the user's input (a checkpoint file) is a user error: zps train exits 2.
  auto refused = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(refused.ok());
  error.set_request_id(ids[2]);
  error.mutable_error()->set_text("checkpoint /ckpt/x.ckpt is corrupt: CRC mismatch");
  error.mutable_error()->set_user_error(true);
  CHECK(f.table.deliver(0, error, DType::kFloat32, Blob(), "server 0") == Delivery::kDelivered);
  CHECK(f.reply(ids[3], 1, 1.0f) == Delivery::kDelivered);
  s = f.table.wait(*refused, 1s);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::EndsWith("server 0 refused: checkpoint /ckpt/x.ckpt is corrupt: CRC mismatch"));
}

TEST_CASE("request table: refused and aborted operations", "[request_table]") {
  FakeServers f;
  std::vector<float> out(4, 0.0f);
  std::vector<uint64_t> ids;
  auto handle = f.table.issue(f.pull(out.data(), 1, &ids));
  REQUIRE(handle.ok());
  f.table.refuse(Unavailable("recovering: the scheduler lost server 0"));
  Status s = f.table.wait(*handle, 1s);
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message() == "pull of 'w' round 1: recovering: the scheduler lost server 0");
  auto refused = f.table.issue(f.pull(out.data(), 1, &ids));
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  f.table.refuse(std::nullopt);
  auto again = f.table.issue(f.pull(out.data(), 1, &ids));
  REQUIRE(again.ok());
  f.table.abort(Aborted("job ended by the scheduler: worker 1 failed"));
  CHECK(f.table.poll(*again).value() == true);
  s = f.table.wait(*again, 10s);
  CHECK(s.code() == StatusCode::kAborted);
  CHECK(s.message() == "pull of 'w' round 1: job ended by the scheduler: worker 1 failed");
  CHECK(f.table.pendingCount() == 0);
  CHECK(f.table.issue(f.pull(out.data(), 1, &ids)).status().code() == StatusCode::kAborted);
}

TEST_CASE(
    "request table: a failed send fails the operation and leaves nothing "
    "pending",
    "[request_table]") {
  FakeServers f;
  f.fail_sends = true;
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  auto handle = f.table.issue(f.pull(out.data(), 2, &ids));
  CHECK(handle.status().code() == StatusCode::kUnavailable);
  CHECK(f.table.pendingCount() == 0);
}

TEST_CASE("request table: overdue requests are resent, answered ones are not", "[request_table]") {
  FakeServers f;  // resend timeout 100 ms
  std::vector<float> out(8, 0.0f);
  std::vector<uint64_t> ids;
  const auto start = RequestTable::Clock::now();
  auto handle = f.table.issue(f.pull(out.data(), 2, &ids));
  REQUIRE(handle.ok());
  CHECK(f.table.resendOverdue(start) == 0);
  REQUIRE(f.reply(ids[0], 0, 1.0f) == Delivery::kDelivered);
  const auto later = RequestTable::Clock::now() + 150ms;
  CHECK(f.table.resendOverdue(later) == 1);
  CHECK(f.sent_to == std::vector<int>{0, 1, 1});
  CHECK(f.table.resendOverdue(later + 50ms) == 0);  // sent again at `later`: not yet due
  CHECK(f.table.resendOverdue(later + 100ms) == 1);
  CHECK(f.table.resent() == 2);
  REQUIRE(f.reply(ids[1], 1, 2.0f) == Delivery::kDelivered);
  CHECK(f.table.wait(*handle, 1s).ok());
}

TEST_CASE("request table: after a reset, every unanswered request to that server goes again", "[request_table]") {
  FakeServers f;
  std::vector<float> out(12, 0.0f);
  std::vector<uint64_t> ids;
  auto handle = f.table.issue(f.pull(out.data(), 3, &ids));
  REQUIRE(handle.ok());
  REQUIRE(f.reply(ids[0], 0, 1.0f) == Delivery::kDelivered);
  CHECK(f.table.resendTo(0) == 0);  // answered
  CHECK(f.table.resendTo(1) == 1);  // not due by any timeout: a reset lost it
  CHECK(f.sent_to == std::vector<int>{0, 1, 2, 1});
  REQUIRE(f.reply(ids[1], 1, 2.0f) == Delivery::kDelivered);
  CHECK(f.reply(ids[1], 1, 2.0f) == Delivery::kUnknown);  // the resent request's reply: dropped
  REQUIRE(f.reply(ids[2], 2, 3.0f) == Delivery::kDelivered);
  CHECK(f.table.wait(*handle, 1s).ok());
  CHECK(out[4] == 2.0f);
  CHECK(f.table.resent() == 1);
}

TEST_CASE("request table: run() is send and wait, and completed() handles carry their status", "[request_table]") {
  FakeServers f;
  FanOut none("nothing to send");
  CHECK(f.table.run(std::move(none), 1s).ok());
  Handle h = f.table.completed(InvalidArgument("bad buffer"));
  CHECK(f.table.poll(h).value() == true);
  CHECK(f.table.wait(h, 1s).message() == "bad buffer");
}

}  // namespace
}  // namespace zps
