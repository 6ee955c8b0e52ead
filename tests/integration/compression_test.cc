// Gradient compression on loopback clusters (docs/compression.md): zps check stays exact with
// fp16 on exactly representable data, topk/randomk deliver every pushed value once error feedback has
// drained, digits training still learns, and bad settings are user errors.
#include <catch2/catch.hpp>
#include <regex>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

// Worker traffic from zps check's log line: {network bytes pushed, tensor bytes pushed}.
std::pair<double, double> pushedBytes(const std::string& log) {
  std::smatch m;
  INFO(log);
  REQUIRE(std::regex_search(log, m, std::regex("pushed (\\d+) network bytes for (\\d+) tensor bytes")));
  return {std::stod(m[1]), std::stod(m[2])};
}

// A 2 x 2 `zps check` of float32 tensors (4 B to 1 MiB + 4 B) with the given compressor; returns the
// share of tensor bytes worker 0 sent.
double checkWith(const std::string& compressor, const std::string& ratio) {
  Cluster c(2, 2);
  c.setEnv("ZPS_COMPRESSOR", compressor);
  c.setEnv("ZPS_COMPRESS_RATIO", ratio);
  c.setEnv("ZPS_MIN_COMPRESS_BYTES", "0");
  c.startScheduler();
  c.startServer();
  c.startServer();
  std::vector<std::string> args = {"check", "--rounds", "6", "--dtypes", "float32", "--sizes", "4,4K+4,1M+4"};
  int w0 = c.startWorker(0, args);
  int w1 = c.startWorker(1, args);
  c.expectAllExitZero(120s);
  for (int w : {w0, w1}) {
    INFO(c.logTail(w));
    CHECK(contains(c.log(w), " 0 wrong"));
  }
  auto [network, tensor] = pushedBytes(c.log(w0));
  std::printf("check with %s: %.0f network bytes pushed for %.0f tensor bytes\n", compressor.c_str(), network, tensor);
  return network / tensor;
}

double finalAccuracy(const std::string& log) {
  std::smatch m;
  INFO(log);
  REQUIRE(std::regex_search(log, m, std::regex("Final test [^\\n]*?accuracy ([0-9.]+)")));
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("compression: zps check is exact with fp16 on values half represents, and sends half the bytes") {
  CHECK(checkWith("fp16", "0.01") == 0.5);
}

// Every push sends 20% of the elements at 8 bytes each: 40% of the tensor bytes (a little more from rounding up).
TEST_CASE("compression: with topk, the sums over all rounds equal the pushed values once feedback drains") {
  CHECK(checkWith("topk", "0.2") < 0.41);
}

TEST_CASE("compression: with randomk, the sums over all rounds equal the pushed values once feedback drains") {
  CHECK(checkWith("randomk", "0.2") < 0.41);
}

TEST_CASE("compression: digits mlp on 2 x 2 with fp16 and with topk reaches test accuracy >= 0.93") {
  for (const char* compressor : {"fp16", "topk"}) {
    INFO(compressor);
    Cluster c(2, 2);
    c.setEnv("ZPS_COMPRESSOR", compressor);
    c.setEnv("ZPS_COMPRESS_RATIO", "0.05");
    c.startScheduler();
    c.startServer();
    c.startServer();
    std::vector<std::string> args = {"train", "--model", "mlp", "--data", "digits", "--epochs", "6"};
    int w0 = c.startWorker(0, args);
    c.startWorker(1, args);
    c.expectAllExitZero(180s);
    const std::string log = c.log(w0);
    const size_t at = log.find("Traffic:");
    REQUIRE(at != std::string::npos);
    std::printf("%s: %s\n", compressor, log.substr(at, log.find('\n', at) - at).c_str());
    CHECK(contains(log, std::string("dense tensor compressor ") + compressor));
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex("(\\d+) bytes pushed for (\\d+) tensor bytes")));
    CHECK(std::stod(m[1]) <= 0.5 * std::stod(m[2]) + 64);  // + the 32-byte shape check, sent dense
    CHECK(finalAccuracy(log) >= 0.93);
  }
}

TEST_CASE("compression: bad settings exit 2 with a line saying what to fix") {
  struct Case {
    std::string name, value, message;
  };
  for (const Case& tc :
       {Case{"ZPS_COMPRESSOR", "gzip", "ZPS_COMPRESSOR='gzip' is not a compressor"},
        Case{"ZPS_COMPRESS_RATIO", "2", "ZPS_COMPRESS_RATIO='2' is not a share in (0, 1]"},
        Case{"ZPS_MIN_COMPRESS_BYTES", "lots", "ZPS_MIN_COMPRESS_BYTES='lots' is not a whole number"}}) {
    Cluster c(1, 1);
    int p = c.start("zps", {c.bin(), "check"}, {{"DMLC_ROLE", "worker"}, {tc.name, tc.value}});
    int code = c.waitExit(p, 20s);
    INFO(tc.message << "\n" << c.logTail(p));
    CHECK(code == 2);
    CHECK(contains(c.log(p), tc.message));
  }
}

TEST_CASE("compression: zps bench with topk leaves the lossy rows unchecked and passes") {
  Cluster c(1, 2);
  c.setEnv("ZPS_COMPRESSOR", "topk");
  c.setEnv("ZPS_MIN_COMPRESS_BYTES", "65536");  // 4K stays dense and checked, 1M is compressed
  std::vector<std::string> args = {"bench", "--sizes", "4K,1M", "--min_time", "0.05"};
  c.startScheduler();
  c.startServer();
  int w0 = c.startWorker(0, args);
  c.startWorker(1, args);
  c.expectAllExitZero(std::chrono::seconds(120));
  const std::string log = c.log(w0);
  INFO(log);
  CHECK(contains(log, "# #wrong '-': 1 rows not checked"));
  CHECK(contains(log, "# zps bench: PASS"));
}
