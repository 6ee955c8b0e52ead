// A user's training-loop skeleton: declare a gradient, push-pull it for a few rounds, check the sums.
#include <zps/worker.h>

#include <cstdio>
#include <vector>

int main() {
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::fprintf(stderr, "user_program: %s\n", worker.status().message().c_str());
    return 2;
  }
  zps::Worker& w = **worker;
  const size_t n = 1000;
  auto grad = w.declare("user/grad", n * sizeof(float), zps::DType::kFloat32);
  if (!grad.ok()) return w.finish(grad.status());
  std::vector<float> local(n), summed(n);
  for (int round = 1; round <= 5; ++round) {
    for (size_t i = 0; i < n; ++i) local[i] = static_cast<float>((w.rank() + 1) * round);
    auto h = w.pushPull(*grad, local.data(), summed.data());
    if (!h.ok()) return w.finish(h.status());
    zps::Status s = w.wait(*h, std::chrono::seconds(60));
    if (!s.ok()) return w.finish(s);
    float expect = static_cast<float>(w.numWorkers() * (w.numWorkers() + 1) / 2 * round);
    for (size_t i = 0; i < n; ++i) {
      if (summed[i] != expect) {
        return w.finish(zps::Status(zps::StatusCode::kInternal, "wrong sum at round " + std::to_string(round)));
      }
    }
  }
  std::printf("user_program: worker %d: 5 rounds OK\n", w.rank());
  return w.finish(zps::Status::OK());
}
