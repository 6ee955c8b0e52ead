// A key's sum buffers come back to it when the last holder lets go, and are handed out again
// (server/sum_buffers.h), so a key's memory stays at what its rounds hold at once.
#include <catch2/catch.hpp>
#include <thread>

#include "server/sum_buffers.h"

namespace zps {
namespace {

TEST_CASE("sum buffers: a released buffer is the next one taken, and at most `kept` stay idle") {
  auto pool = SumBuffers::create(4096, 2);
  auto a = pool->take();
  REQUIRE(a->size() == 4096);
  AlignedBuffer* first = a.get();
  a.reset();
  CHECK(pool->idle() == 1);
  auto b = pool->take();
  CHECK(b.get() == first);  // reused, not allocated anew
  CHECK(pool->idle() == 0);

  auto c = pool->take(), d = pool->take(), e = pool->take();
  b.reset();
  c.reset();
  d.reset();
  e.reset();
  CHECK(pool->idle() == 2);  // the other two went back to the heap
}

TEST_CASE("sum buffers: a buffer outliving its key keeps the pool until it is released, on any thread") {
  auto pool = SumBuffers::create(1 << 20, 2);
  std::weak_ptr<SumBuffers> watch = pool;
  auto held = pool->take();
  pool.reset();  // the key is gone; a reply still holds its buffer
  CHECK_FALSE(watch.expired());
  std::thread([h = std::move(held)]() mutable { h.reset(); }).join();
  CHECK(watch.expired());  // the last buffer back, the pool went with it
}

}  // namespace
}  // namespace zps
