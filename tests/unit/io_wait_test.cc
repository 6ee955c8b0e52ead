// IoWait's count of waits that ran to their timeout while messages were waiting (a lost ZMQ_FD edge).
#include "ps/transport/zmq/io_wait.h"

#include <catch2/catch.hpp>

using zps::IoWait;

TEST_CASE("io wait: a wait that times out and then finds messages is counted as late, a woken one is not",
          "[io_wait]") {
  IoWait w;
  IoWait::Ready got = w.wait(-1, -1, {}, 1);  // nothing watched: it runs to its 1 ms timeout
  CHECK(got.timed_out);
  w.found(0);  // nothing found after it: not late
  CHECK(w.lateFinds() == 0);
  w.found(3);
  CHECK(w.lateFinds() == 1);

  w.wake();
  got = w.wait(-1, -1, {}, 1000);
  CHECK(got.woken);
  CHECK_FALSE(got.timed_out);
  w.found(5);  // a signalled wait that finds messages is the normal case
  CHECK(w.lateFinds() == 1);

  got = w.wait(-1, -1, {}, 0);  // a look without waiting never counts as a timeout
  CHECK_FALSE(got.timed_out);
  w.found(2);
  CHECK(w.lateFinds() == 1);
}
