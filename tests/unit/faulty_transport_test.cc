#include "ps/transport/faulty_transport.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Records what reaches it; the verbs the decorator only forwards answer with fixed values.
class FakeTransport final : public Transport {
 public:
  struct Sent {
    PeerId peer;
    std::string text;
    Clock::time_point at;
  };

  Status send(PeerId peer, std::vector<Blob> frames) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.push_back(
        Sent{peer, std::string(reinterpret_cast<const char*>(frames[0].data()), frames[0].size()), Clock::now()});
    cv_.notify_all();
    return Status::OK();
  }
  std::vector<Sent> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  bool waitForSends(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return sent_.size() >= n; });
  }

  StatusOr<int> listen(const std::string&, int port) override { return port; }
  StatusOr<PeerId> connect(const Endpoint& to) override { return to.isIpc() ? PeerId{8} : PeerId{7}; }
  StatusOr<TransportMessage> recv(Clock::time_point) override { return TransportMessage{3, {}}; }
  void onMessage(std::function<void(TransportMessage)>) override { ++handlers; }
  void close() override { ++closes; }
  std::string describe(PeerId peer) const override { return "fake #" + std::to_string(peer); }
  void forget(PeerId) override {}
  std::string handshakeFailure(PeerId) const override { return ""; }
  uint64_t refusedHandshakes() const override { return 5; }
  void onReconnect(std::function<void(PeerId)>) override {}
  void disconnect(PeerId) override {}
  uint64_t reconnects() const override { return 6; }
  bool receiveOn(PeerId peer, Clock::time_point, const std::function<bool()>& done) override {
    received_on = peer;
    return done();
  }

  int handlers = 0;
  int closes = 0;
  PeerId received_on = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sent> sent_;
};

std::vector<Blob> message(int i) { return {Blob::fromString("m" + std::to_string(i))}; }

// A FaultyTransport over a FakeTransport that the test watches.
struct Wrapped {
  explicit Wrapped(const FaultInjection& faults)
      : fake(std::make_unique<FakeTransport>()), inner(fake.get()), faulty(std::move(fake), faults, "test") {}
  std::unique_ptr<FakeTransport> fake;  // moved into faulty
  FakeTransport* inner;
  FaultyTransport faulty;
};

FaultInjection faultsOf(double drop, double duplicate, double delay, int delay_ms = 20, uint64_t seed = 1) {
  FaultInjection f;
  f.drop = drop;
  f.duplicate = duplicate;
  f.delay = delay;
  f.delay_ms = delay_ms;
  f.seed = seed;
  return f;
}

}  // namespace

TEST_CASE("faulty transport: a seed drops and duplicates exactly the same messages every run", "[faulty_transport]") {
  Wrapped w(faultsOf(/*drop=*/0.1, /*duplicate=*/0.2, /*delay=*/0, /*delay_ms=*/20, /*seed=*/42));
  FakeTransport* inner = w.inner;
  FaultyTransport& faulty = w.faulty;
  for (int i = 0; i < 1000; ++i) REQUIRE(faulty.send(1, message(i)).ok());
  const FaultyTransport::Counts c = faulty.injected();
  // mt19937_64 is specified bit for bit, and the draw (libstdc++'s generate_canonical) is plain integer
  // and double arithmetic: the same counts on any CPU.
  CHECK(c.dropped == 81);
  CHECK(c.duplicated == 210);
  CHECK(c.delayed == 0);
  const std::vector<FakeTransport::Sent> sent = inner->sent();
  CHECK(sent.size() == 1000 - c.dropped + c.duplicated);
  // A duplicate follows its original at once; the rest keep their order.
  size_t doubles = 0;
  for (size_t i = 1; i < sent.size(); ++i) {
    if (sent[i].text == sent[i - 1].text) ++doubles;
    CHECK(std::stoi(sent[i].text.substr(1)) >= std::stoi(sent[i - 1].text.substr(1)));
  }
  CHECK(doubles == c.duplicated);
}

TEST_CASE("faulty transport: a delayed message goes out delay_ms later, on the timer's thread", "[faulty_transport]") {
  Wrapped w(faultsOf(0, 0, /*delay=*/1, /*delay_ms=*/50));
  FakeTransport* inner = w.inner;
  FaultyTransport& faulty = w.faulty;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 5; ++i) REQUIRE(faulty.send(2, message(i)).ok());
  REQUIRE(inner->waitForSends(5, 5s));
  const std::vector<FakeTransport::Sent> sent = inner->sent();
  REQUIRE(sent.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(sent[i].text == "m" + std::to_string(i));
    CHECK(sent[i].peer == 2);
    CHECK(sent[i].at - start >= 50ms);
  }
  CHECK(faulty.injected().delayed == 5);
}

TEST_CASE("faulty transport: close sends what is held back, then closes the transport under it", "[faulty_transport]") {
  Wrapped w(faultsOf(0, 0, /*delay=*/1, /*delay_ms=*/60000));
  FakeTransport* inner = w.inner;
  FaultyTransport& faulty = w.faulty;
  for (int i = 0; i < 3; ++i) REQUIRE(faulty.send(1, message(i)).ok());
  CHECK(inner->sent().empty());
  faulty.close();
  CHECK(inner->sent().size() == 3);
  CHECK(inner->closes == 1);
  faulty.close();  // idempotent
  CHECK(inner->closes == 1);
  CHECK(faulty.send(1, message(9)).code() == StatusCode::kAborted);
}

TEST_CASE("faulty transport: receiving and the other verbs reach the transport under it", "[faulty_transport]") {
  Wrapped w(faultsOf(/*drop=*/1, 0, 0));
  FakeTransport* inner = w.inner;
  FaultyTransport& faulty = w.faulty;
  CHECK(faulty.receiveOn(4, Clock::now() + 1s, [] { return true; }));
  CHECK(inner->received_on == 4);
  faulty.onMessage([](TransportMessage) {});
  CHECK(inner->handlers == 1);
  CHECK(faulty.connect(Endpoint::tcp("127.0.0.1", 1)).value() == 7);
  CHECK(faulty.connect(Endpoint::ipc("x", "pw")).value() == 8);
  CHECK(faulty.recv(Clock::now())->peer == 3);
  CHECK(faulty.describe(9) == "fake #9");
  CHECK(faulty.refusedHandshakes() == 5);
  CHECK(faulty.reconnects() == 6);
  REQUIRE(faulty.send(1, message(0)).ok());
  CHECK(inner->sent().empty());  // drop=1: every send is lost
  CHECK(faulty.injected().dropped == 1);
}

}  // namespace zps
