// Priority scheduling end to end without a network: several workers' DenseTensors, each behind its
// own RequestTable and PushScheduler, against servers that run the real SumStore on one thread.
// Exact sums with small credits, and workers that issue the same tensors in different orders (which
// deadlocks when credit is held until a push-pull's reply; push_scheduler.h).
#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/reducer.h"
#include "ps/wire/codec.h"
#include "server/sum_store.h"
#include "tests/unit/function_route.h"
#include "worker/dense_tensors.h"
#include "worker/scheduling/push_scheduler.h"

namespace zps {
namespace {

using namespace std::chrono_literals;

// Servers (one SumStore each) answering on one thread, and one worker stack per worker. The
// servers take nothing in until open() (so a test can queue requests first). Used by one test's
// thread; the server thread delivers replies into the workers' tables.
class SumServers {
 public:
  struct WorkerStack {
    std::unique_ptr<PushScheduler> scheduler;
    testing::FunctionRoute route;
    std::unique_ptr<RequestTable> table;
    std::unique_ptr<DenseTensors> tensors;
  };

  SumServers(const Config& config, int workers) : reducer_(kernels::makeCpuReducer()) {
    for (int s = 0; s < config.num_servers; ++s) stores_.push_back(std::make_unique<SumStore>(workers, reducer_.get()));
    for (int w = 0; w < workers; ++w) {
      auto stack = std::make_unique<WorkerStack>();
      WorkerStack* me = stack.get();
      stack->scheduler =
          std::make_unique<PushScheduler>(config.credit_bytes, [this, w](const RequestSpec& to, std::vector<Blob> f) {
            std::lock_guard<std::mutex> lock(mu_);
            inbox_.push_back(Message{w, to.server, std::move(f)});
            cv_.notify_all();
            return Status::OK();
          });
      stack->route.on_send = [me](const RequestSpec& to, std::vector<Blob> f) {
        return me->scheduler->send(to, std::move(f));
      };
      stack->route.on_completed = [me](uint64_t id, bool) { me->scheduler->completed(id); };
      stack->table = std::make_unique<RequestTable>(&stack->route, 0ms);
      stack->tensors = std::make_unique<DenseTensors>(config, w, stack->table.get());
      workers_.push_back(std::move(stack));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~SumServers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      open_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

  WorkerStack& worker(int w) { return *workers_[w]; }
  void open(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = open;
    cv_.notify_all();
  }

 private:
  struct Message {
    int worker;
    int server;
    std::vector<Blob> frames;
  };

  void serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || (open_ && !inbox_.empty()); });
      if (stop_) return;
      Message m = std::move(inbox_.front());
      inbox_.pop_front();
      lock.unlock();
      handle(m);
      lock.lock();
    }
  }

  void handle(const Message& m) {
    auto decoded = wire::decode(m.frames, wire::Limits());
    if (!decoded.ok()) return;
    wire::DataMessage msg = std::get<wire::DataMessage>(*decoded);
    // The store adopts a push's buffer as the sum: it must not be the worker's own.
    if (!msg.payload.empty()) msg.payload = Blob::copyOf(msg.payload.data(), msg.payload.size());
    std::vector<Outgoing> out;
    stores_[m.server]->handle(static_cast<PeerId>(m.worker), m.worker, msg, &out);
    for (const Outgoing& o : out) {
      workers_[o.peer]->table->deliver(m.server, o.data, static_cast<DType>(o.data.reply().dtype()), o.payload, "fake");
    }
  }

  std::unique_ptr<kernels::Reducer> reducer_;
  std::vector<std::unique_ptr<SumStore>> stores_;
  std::vector<std::unique_ptr<WorkerStack>> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> inbox_;
  bool open_ = true;
  bool stop_ = false;
  std::thread thread_;
};

TEST_CASE("priority scheduling: workers that issue tensors in opposite orders both finish", "[scheduled_rounds]") {
  // One push in flight per worker. Worker 0 sends x first and queues y; worker 1 sends y first and
  // queues x. Were credit held until a push-pull's reply, each would wait for the other's queued
  // push: a deadlock. The push's acknowledgement gives the credit back, so both rounds complete.
  Config config;
  config.num_servers = 1;
  config.credit_bytes = 1;
  SumServers servers(config, 2);
  std::vector<TensorId> ids;
  for (int w = 0; w < 2; ++w) {
    for (int64_t priority : {1, 0}) {
      DeclareOptions options;
      options.priority = priority;
      auto id = servers.worker(w).tensors->declare(priority == 1 ? "x" : "y", 16, DType::kFloat32, false, options);
      REQUIRE(id.ok());
      if (w == 0) ids.push_back(*id);
    }
  }
  const TensorId x = ids[0], y = ids[1];
  std::vector<float> in0(4, 1.0f), in1(4, 2.0f);
  std::vector<std::vector<float>> out(4, std::vector<float>(4, 0.0f));
  servers.open(false);
  auto hx0 = servers.worker(0).tensors->issue(x, pb::CMD_PUSH_PULL, in0.data(), out[0].data());
  auto hy0 = servers.worker(0).tensors->issue(y, pb::CMD_PUSH_PULL, in0.data(), out[1].data());
  auto hy1 = servers.worker(1).tensors->issue(y, pb::CMD_PUSH_PULL, in1.data(), out[2].data());
  auto hx1 = servers.worker(1).tensors->issue(x, pb::CMD_PUSH_PULL, in1.data(), out[3].data());
  REQUIRE((hx0.ok() && hy0.ok() && hy1.ok() && hx1.ok()));
  // Each worker has one push in flight and the other queued behind its credit; its pull queued behind
  // it too.
  CHECK(servers.worker(0).scheduler->queued() == 2);
  CHECK(servers.worker(1).scheduler->queued() == 2);
  servers.open(true);
  for (auto [w, h] : {std::pair{0, *hx0}, {0, *hy0}, {1, *hy1}, {1, *hx1}}) {
    Status s = servers.worker(w).table->wait(h, 10s);
    INFO("worker " << w << ": " << s.message() << " (a deadlock of credits ends here, after 10 s)");
    CHECK(s.ok());
  }
  for (const auto& o : out) CHECK(o == std::vector<float>(4, 3.0f));
}

TEST_CASE("priority scheduling: exact sums over many tensors, partitions and rounds with a small credit",
          "[scheduled_rounds]") {
  Config config;
  config.num_servers = 2;
  config.partition_bytes = 64;  // 16 floats per partition
  config.priority = true;       // every tensor by declaration order
  config.credit_bytes = 100;    // at most one partition of pushes in flight per server, plus one small one
  constexpr int kWorkers = 3, kTensors = 24, kRounds = 4;
  SumServers servers(config, kWorkers);
  std::vector<size_t> elements;
  for (int t = 0; t < kTensors; ++t) elements.push_back(1 + (t * 37) % 90);
  for (int w = 0; w < kWorkers; ++w)
    for (int t = 0; t < kTensors; ++t)
      REQUIRE(servers.worker(w)
                  .tensors->declare("t" + std::to_string(t), elements[t] * 4, DType::kFloat32, false, DeclareOptions())
                  .ok());
  for (int round = 1; round <= kRounds; ++round) {
    std::vector<std::vector<std::vector<float>>> in(kWorkers), out(kWorkers);
    std::vector<std::vector<Handle>> handles(kWorkers);
    servers.open(false);  // everything queues first, so the credit path is taken
    for (int w = 0; w < kWorkers; ++w) {
      for (int i = 0; i < kTensors; ++i) {
        // Each worker issues in its own order: backward, forward, or interleaved.
        const int t = w == 0 ? kTensors - 1 - i : w == 1 ? i : (i * 7) % kTensors;
        in[w].emplace_back(elements[t], static_cast<float>((w + 1) * (t + 1) + round));
        out[w].emplace_back(elements[t], -1.0f);
        auto h = servers.worker(w).tensors->issue(t, pb::CMD_PUSH_PULL, in[w].back().data(), out[w].back().data());
        REQUIRE(h.ok());
        handles[w].push_back(*h);
      }
    }
    CHECK(servers.worker(0).scheduler->queued() > 0);
    servers.open(true);
    for (int w = 0; w < kWorkers; ++w) {
      for (int i = 0; i < kTensors; ++i) {
        const int t = w == 0 ? kTensors - 1 - i : w == 1 ? i : (i * 7) % kTensors;
        Status s = servers.worker(w).table->wait(handles[w][i], 10s);
        INFO("worker " << w << " tensor " << t << " round " << round << ": " << s.message());
        REQUIRE(s.ok());
        // sum over workers of (v + 1) * (t + 1) + round
        const float expect = static_cast<float>(6 * (t + 1) + kWorkers * round);
        CHECK(out[w][i] == std::vector<float>(elements[t], expect));
      }
      CHECK(servers.worker(w).scheduler->queued() == 0);
    }
  }
}

}  // namespace
}  // namespace zps
