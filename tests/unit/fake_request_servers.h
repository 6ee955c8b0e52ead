// FakeServers: a RequestTable (worker/request_table.h) whose sends are recorded instead of going
// anywhere, and a RequestWaiter over it whose receiver stands for Transport::receiveOn; replies are
// delivered by the test. For the unit tests of the table and the waiter.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tests/unit/function_route.h"
#include "worker/request_table.h"
#include "worker/request_waiter.h"

namespace zps::testing {

// A table whose sends are recorded instead of going anywhere.
struct FakeServers {
  std::vector<int> sent_to;
  bool fail_sends = false;
  // Stands for Transport::receiveOn (the waiting thread receives a server's replies); null: it cannot.
  std::function<bool(int server, const std::function<bool()>& done)> receive;
  std::vector<bool> receive_pushes;  // the `pushes` of each call of the receive hook
  int receivers_woken = 0;
  FunctionRoute route{
      [this](const RequestSpec& to, std::vector<Blob>) {
        sent_to.push_back(to.server);
        return fail_sends ? Unavailable("link down") : Status::OK();
      },
      [](int server) { return "server " + std::to_string(server) + " (fake:" + std::to_string(9000 + server) + ")"; }};
  FunctionReceiver receiver{[this](int server, bool pushes, const std::function<bool()>& done) {
                              receive_pushes.push_back(pushes);
                              return receive != nullptr && receive(server, done);
                            },
                            [this] { ++receivers_woken; }};
  RequestTable table{&route, std::chrono::milliseconds(100)};
  RequestWaiter waiter{&table};

  FakeServers() {
    route.on_wake_waiters = [this] { waiter.wakeReceivers(); };
    waiter.receiveWith(&receiver);
  }

  // A pull of `parts` partitions of 4 floats each into `out`, partition i from server i.
  FanOut pull(float* out, int parts, std::vector<uint64_t>* ids) {
    FanOut fan("pull of 'w' round 1");
    for (int i = 0; i < parts; ++i) {
      OutgoingRequest o;
      o.id = table.newRequest().request_id();
      o.request.server = i;
      o.request.key = 100 + i;
      o.request.dtype = DType::kFloat32;
      o.request.out = reinterpret_cast<uint8_t*>(out + 4 * i);
      o.request.bytes = 4 * sizeof(float);
      o.frames.push_back(Blob::copyOf(&i, sizeof(i)));  // kept for resends
      ids->push_back(o.id);
      fan.requests.push_back(std::move(o));
    }
    return fan;
  }

  Delivery reply(uint64_t id, int server, float value) {
    pb::Data h;
    h.set_request_id(id);
    h.mutable_reply();
    std::vector<float> data(4, value);
    return table.deliver(server, h, DType::kFloat32, Blob::copyOf(data.data(), data.size() * sizeof(float)),
                         "server " + std::to_string(server));
  }
};

}  // namespace zps::testing
