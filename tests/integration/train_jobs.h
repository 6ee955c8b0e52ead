// Helpers for the `zps train` integration tests: run a whole training job on a loopback Cluster,
// read its final metric from worker 0's log, and compare the weight files it writes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/integration/cluster.h"

namespace zps::testing {

using namespace std::chrono_literals;

inline std::string dataDir() {
  const char* d = std::getenv("ZPS_DATA_DIR");
  return d != nullptr ? d : "data";
}

// Runs a whole training job and returns worker 0's log; every process must exit 0. local_size > 1:
// that many processes per worker node (the caller sets ZPS_LOCAL_SIZE).
inline std::string trainJob(Cluster& c, int servers, int workers, const std::vector<std::string>& args,
                            std::chrono::seconds deadline = 240s, int local_size = 1) {
  c.startScheduler();
  for (int s = 0; s < servers; ++s) c.startServer();
  std::vector<std::string> argv = {"train"};
  argv.insert(argv.end(), args.begin(), args.end());
  int first = -1;
  for (int w = 0; w < workers; ++w) {
    for (int l = 0; l < local_size; ++l) {
      zps::testing::Env local;
      if (local_size > 1) local = {{"ZPS_LOCAL_RANK", std::to_string(l)}};
      int idx = c.startWorker(w, argv, local);
      if (first < 0) first = idx;
    }
  }
  auto codes = c.waitAll(deadline);
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(c.logTail(static_cast<int>(i)));
    REQUIRE(codes[i] == 0);
  }
  return c.log(first);
}

// `zps train` of the CTR model (dense weights on the workers, an adam embedding table on the
// servers) on 40000 synthetic rows: the job the checkpoint and restart tests disturb.
inline std::vector<std::string> ctrAdamTraining(int batch_size, int epochs = 4) {
  return {"train",
          "--model",
          "ctr",
          "--data",
          "synthetic-ctr",
          "--synthetic_rows",
          "40000",
          "--epochs",
          std::to_string(epochs),
          "--batch_size",
          std::to_string(batch_size),
          "--optimizer",
          "adam",
          "--lr",
          "0.001",
          "--hidden",
          "32"};
}

// The number after "Final test <metric> " in a log.
inline double finalMetric(const std::string& log, const std::string& metric) {
  std::smatch m;
  std::regex re("Final test [^\\n]*?" + metric + " ([0-9.eE+-]+)");
  INFO(log);
  REQUIRE(std::regex_search(log, m, re));
  return std::stod(m[1]);
}

// The hex after "weights checksum " in a log (`zps train` prints the dense weights' checksum).
inline std::string weightsChecksum(const std::string& log) {
  std::smatch m;
  INFO(log);
  REQUIRE(std::regex_search(log, m, std::regex("weights checksum ([0-9a-f]+)")));
  return m[1];
}

inline std::vector<float> readWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> w(bytes.size() / 4);
  std::memcpy(w.data(), bytes.data(), w.size() * 4);
  return w;
}

// max |a - b| / max |a|: the largest difference relative to the scale of the weights.
inline double maxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return diff / scale;
}

}  // namespace zps::testing
