// Tests for the push credit measured from acknowledgements (worker/scheduling/credit_gauge.h): it stays at one
// partition on links without delay, grows to twice the bandwidth-delay product on a long round trip,
// is shared by the servers, stays within its bounds, and forgets a short round trip after 10 s.
#include <chrono>

#include <catch2/catch.hpp>

#include "worker/scheduling/credit_gauge.h"

namespace zps {
namespace {

using Clock = CreditGauge::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr size_t kPartition = 64 << 10;

// Acknowledges `count` partitions, one every `gap`, each `round_trip` after it was sent; returns the
// last credit.
size_t feed(CreditGauge& g, Clock::time_point* now, int count, Clock::duration gap, Clock::duration round_trip) {
  size_t credit = 0;
  for (int i = 0; i < count; ++i) {
    *now += gap;
    credit = g.acknowledged(kPartition, *now - round_trip, *now);
  }
  return credit;
}

TEST_CASE("credit gauge: without delay it stays at one partition", "[credit_gauge]") {
  // 100 Mbit/s (12.5 MB/s) out of the worker, 4 servers: a partition every 5.2 ms, acknowledged
  // 10.5 ms after it left (two links' time on the wire).
  CreditGauge g(kPartition, 4 << 20, 4);
  Clock::time_point now{};
  CHECK(feed(g, &now, 400, microseconds(5243), microseconds(10486)) < 2 * kPartition);
  CHECK(g.rateBytesPerSecond() == Approx(12.5e6).epsilon(0.15));
  CHECK(g.minRoundTrip() == microseconds(10486));
}

TEST_CASE("credit gauge: a long round trip raises it to twice the bandwidth-delay product per server",
          "[credit_gauge]") {
  // The same rate through 40 ms of round trip, one server: 2 x 12.5 MB/s x 40 ms = 1 MB.
  CreditGauge g(kPartition, 4 << 20, 1);
  Clock::time_point now{};
  const size_t credit = feed(g, &now, 400, microseconds(5243), milliseconds(40));
  CHECK(credit == Approx(2 * 12.5e6 * 0.040).epsilon(0.15));
  // Four servers share it.
  CreditGauge shared(kPartition, 4 << 20, 4);
  Clock::time_point t{};
  CHECK(feed(shared, &t, 400, microseconds(5243), milliseconds(40)) == Approx(credit / 4.0).epsilon(0.15));
}

TEST_CASE("credit gauge: bounded by the floor and the ceiling", "[credit_gauge]") {
  CreditGauge g(kPartition, 256 << 10, 1);
  Clock::time_point now{};
  CHECK(g.credit() == kPartition);
  CHECK(feed(g, &now, 400, microseconds(5243), milliseconds(500)) == size_t{256} << 10);
  CreditGauge slow(kPartition, 4 << 20, 1);
  Clock::time_point t{};
  CHECK(feed(slow, &t, 50, milliseconds(100), microseconds(100)) == kPartition);
}

TEST_CASE("credit gauge: a short round trip is forgotten within 10 s, and silence empties the rate", "[credit_gauge]") {
  CreditGauge g(kPartition, 4 << 20, 1);
  Clock::time_point now{};
  feed(g, &now, 100, microseconds(5243), milliseconds(2));
  CHECK(g.minRoundTrip() == milliseconds(2));
  // 12 s of 30 ms round trips: the 2 ms one is gone.
  feed(g, &now, 2300, microseconds(5243), milliseconds(30));
  CHECK(g.minRoundTrip() == milliseconds(30));
  now += std::chrono::seconds(5);  // nothing acknowledged for 5 s: the rate starts over
  g.acknowledged(kPartition, now - milliseconds(30), now);
  CHECK(g.rateBytesPerSecond() == Approx(kPartition / 0.05));
}

}  // namespace
}  // namespace zps
