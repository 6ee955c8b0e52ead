// Tests for RecoveryState (worker/recovery_state.h): generations, and how a lost node fails pending
// and new requests until recover() reaches the newest announced generation.
#include "worker/recovery_state.h"

#include <catch2/catch.hpp>

#include "tests/unit/function_route.h"

namespace zps {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  int sends = 0;
  testing::FunctionRoute route{[this](const RequestSpec&, std::vector<Blob>) {
    ++sends;
    return Status::OK();
  }};
  RequestTable table{&route, 0ms};
  RecoveryState recovery{&table};

  StatusOr<Handle> hello() {
    FanOut fan("connecting to the servers");
    pb::Data d = table.newRequest();
    CHECK(d.generation() == recovery.generation());
    fan.requests.emplace_back(d, RequestSpec::to(0), std::vector<Blob>());
    return table.issue(std::move(fan));
  }
};

TEST_CASE("recovery state: an old or current generation is no news", "[recovery_state]") {
  Fixture f;
  f.recovery.start(3);
  CHECK(f.recovery.generation() == 3);
  CHECK_FALSE(f.recovery.notice(2, Unavailable("old")));
  CHECK_FALSE(f.recovery.notice(3, Unavailable("same")));
  CHECK_FALSE(f.recovery.recovering());
  CHECK(f.hello().ok());
}

TEST_CASE(
    "recovery state: a newer generation fails pending and new requests "
    "until recover() moves",
    "[recovery_state]") {
  Fixture f;
  f.recovery.start(1);
  auto pending = f.hello();
  REQUIRE(pending.ok());
  CHECK(f.recovery.notice(2, Unavailable("recovering: the scheduler lost server 1")));
  CHECK(f.recovery.recovering());
  Status s = f.table.wait(*pending, 1s);
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message() == "connecting to the servers: recovering: the scheduler lost server 1");
  CHECK(f.hello().status().code() == StatusCode::kUnavailable);
  // A second notice keeps the first reason, but is still news for the node's other local ranks.
  CHECK(f.recovery.notice(3, Unavailable("recovering: the scheduler lost worker 2")));
  CHECK(f.recovery.pending()->message() == "recovering: the scheduler lost server 1");
  // Reconnected in generation 2, but 3 was announced meanwhile: still recovering.
  CHECK_FALSE(f.recovery.moved(2));
  CHECK(f.recovery.recovering());
  CHECK(f.hello().status().code() == StatusCode::kUnavailable);
  CHECK(f.recovery.moved(3));
  CHECK_FALSE(f.recovery.recovering());
  CHECK(f.recovery.generation() == 3);
  CHECK(f.hello().ok());
}

}  // namespace
}  // namespace zps
