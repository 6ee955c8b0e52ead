// Table sizes on a real job: one worker pushes known rows into tables on 2 servers, and each server's
// rows held, bytes charged, rows created and evicted must read exactly in `zps status` (text and
// JSON, carried by the servers' heartbeats) and on each server's /metrics; under a small
// ZPS_TABLE_MEMORY_BYTES a stream of new ids holds the budget with the evictions counted.
#include <zps/worker.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "ps/node/http_server.h"
#include "tests/integration/cluster.h"
#include "tools/process.h"

using zps::testing::Cluster;
using zps::testing::Env;
using namespace std::chrono_literals;

namespace {

// Row charges (docs/tables.md: dim x 4 + state floats x dim x 4 + 96 bytes).
constexpr uint64_t kBytesA = 4 * 4 + 96;          // dim 4, sgd
constexpr uint64_t kBytesB = 8 * 4 + 8 * 4 + 96;  // dim 8, adagrad (one state float)
constexpr int kRowsA = 1000, kRowsB = 300, kStreamRows = 1000;
constexpr uint64_t kBudgetRows = 100;  // per server, of table sizes/stream (dim 4, sgd)

struct TablePlan {
  std::string name;
  uint32_t dim;
  std::string optimizer;
  std::vector<uint64_t> keys;
  size_t batch;
};

// TABLE_SIZES_MODE=tables: sizes/a and sizes/b; stream: sizes/stream (ids the budget cannot all hold).
std::vector<TablePlan> plans(const std::string& mode) {
  std::vector<TablePlan> out;
  if (mode == "stream") {
    out.push_back({"sizes/stream", 4, "sgd", {}, 50});
    for (uint64_t i = 0; i < kStreamRows; ++i) out.back().keys.push_back(i * 0x9E3779B97F4A7C15ull);
    return out;
  }
  out.push_back({"sizes/a", 4, "sgd", {}, 100});
  for (uint64_t i = 0; i < kRowsA; ++i) out.back().keys.push_back(i * 7919 + 1);
  out.push_back({"sizes/b", 8, "adagrad", {}, 100});
  for (uint64_t i = 0; i < kRowsB; ++i) out.back().keys.push_back((i << 40) | i);  // any 64-bit id
  return out;
}

zps::Status pushTables(zps::Worker& w, const std::string& mode) {
  for (const auto& plan : plans(mode)) {
    zps::TableOptions options;
    options.dim = plan.dim;
    options.optimizer = plan.optimizer;
    options.async = 0;
    auto table = w.declareTable(plan.name, options);
    if (!table.ok()) return table.status();
    std::vector<int> per_server(w.numServers());
    for (size_t at = 0; at < plan.keys.size(); at += plan.batch) {
      const size_t n = std::min(plan.batch, plan.keys.size() - at);
      std::vector<float> grads(n * plan.dim, 0.01f);
      auto pushed = w.pushRows(*table, plan.keys.data() + at, n, grads.data());
      if (!pushed.ok()) return pushed.status();
      ZPS_RETURN_IF_ERROR(w.wait(*pushed));
    }
    for (uint64_t k : plan.keys) ++per_server[w.serverOfRow(k)];
    std::string line = "table-sizes-worker: expect " + plan.name;
    for (size_t s = 0; s < per_server.size(); ++s)
      line += " s" + std::to_string(s) + " " + std::to_string(per_server[s]);
    std::cerr << line << std::endl;
  }
  std::cerr << "table-sizes-worker: pushed" << std::endl;
  // The test reads zps status and /metrics now; it writes TABLE_SIZES_RELEASE when done.
  const char* release = std::getenv("TABLE_SIZES_RELEASE");
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (release != nullptr && !std::filesystem::exists(release)) {
    if (std::chrono::steady_clock::now() > deadline) return zps::DeadlineExceeded("the test never released the worker");
    std::this_thread::sleep_for(50ms);
  }
  return zps::Status::OK();
}

std::string scrape(int port) {
  auto r = zps::httpGet("127.0.0.1", port, "/metrics", 5s);
  return r.ok() && r->first == 200 ? r->second : "";
}

// The value of one sample line `name{labels} value` in an exposition; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

// Per table, per server rank, the rows the worker says it sent there.
using Expected = std::map<std::string, std::vector<uint64_t>>;

Expected expectedRows(const std::string& log) {
  Expected out;
  static const std::regex kLine(R"(table-sizes-worker: expect (\S+) s0 ([0-9]+) s1 ([0-9]+))");
  for (std::sregex_iterator it(log.begin(), log.end(), kLine), end; it != end; ++it)
    out[(*it)[1]] = {std::stoull((*it)[2]), std::stoull((*it)[3])};
  return out;
}

// Starts the job (2 servers, 1 worker) and waits until the worker pushed its rows.
struct Job {
  Cluster c{2, 1};
  int status_port = zps::proc::pickFreeTcpPort();
  std::vector<int> server_ports{zps::proc::pickFreeTcpPort(), zps::proc::pickFreeTcpPort()};
  std::string release;
  std::vector<int> job;  // the scheduler, the servers and the worker (not the zps status runs)
  int worker = -1;
  Expected expected;

  Job(const std::string& mode, const Env& server_env) {
    c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.2");
    release = c.dir() + "/release";
    job.push_back(c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(status_port)}}));
    for (int port : server_ports) {
      Env env = server_env;
      env.emplace_back("ZPS_METRICS_PORT", std::to_string(port));
      job.push_back(c.startServer(env));
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe");
    worker = c.start("worker0", {self, "--table-sizes-worker"},
                     {{"DMLC_ROLE", "worker"},
                      {"DMLC_WORKER_ID", "0"},
                      {"TABLE_SIZES_MODE", mode},
                      {"TABLE_SIZES_RELEASE", release}});
    job.push_back(worker);
    REQUIRE(c.waitForLog(worker, "table-sizes-worker: pushed"));
    expected = expectedRows(c.log(worker));
  }

  // Runs `zps status` (with `flags`) until its output matches every pattern (heartbeats lag the
  // pushes), for at most 30 s; the last output.
  std::string statusUntil(const std::vector<std::string>& flags, const std::vector<std::regex>& patterns) {
    std::vector<std::string> argv = {c.bin(), "status"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    std::string log;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      const int s = c.start("status", argv, {{"ZPS_METRICS_PORT", std::to_string(status_port)}});
      const int code = c.waitExit(s);
      log = c.log(s);
      bool all = code == 0;
      for (const auto& p : patterns) all = all && std::regex_search(log, p);
      if (all) break;
      std::this_thread::sleep_for(200ms);
    }
    return log;
  }

  void finish() {
    std::ofstream(release) << "done\n";
    for (int p : job) {
      INFO(c.logTail(p));
      CHECK(c.waitExit(p, 60s) == 0);
    }
  }
};

}  // namespace

// `zps_integration_tests --table-sizes-worker` (tests/integration/main.cc).
int tableSizesWorker() {
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "table-sizes-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  const char* mode = std::getenv("TABLE_SIZES_MODE");
  zps::Status result = pushTables(**worker, mode != nullptr ? mode : "tables");
  if (!result.ok()) std::cerr << "table-sizes-worker: FAILED: " << result.message() << std::endl;
  return (*worker)->finish(result);
}

TEST_CASE("table sizes: exact rows and bytes of 2 tables on 2 servers in zps status and /metrics", "[tables]") {
  Job job("tables", {});
  const Expected& e = job.expected;
  REQUIRE(e.count("sizes/a") == 1);
  REQUIRE(e.count("sizes/b") == 1);
  REQUIRE(e.at("sizes/a")[0] + e.at("sizes/a")[1] == kRowsA);
  REQUIRE(e.at("sizes/b")[0] + e.at("sizes/b")[1] == kRowsB);
  auto line = [&](const std::string& name, uint64_t rows, uint64_t row_bytes) {
    const auto& s = e.at(name);
    return name + " +" + std::to_string(rows) + " +" + std::to_string(rows * row_bytes) + " +" + std::to_string(rows) +
           " +0  s0 " + std::to_string(s[0]) + ", s1 " + std::to_string(s[1]) + "\n";
  };
  const std::string a = line("sizes/a", kRowsA, kBytesA), b = line("sizes/b", kRowsB, kBytesB);
  std::string text = job.statusUntil({}, {std::regex(a), std::regex(b)});
  INFO(text);
  CHECK(std::regex_search(text, std::regex(R"(\nTABLE +ROWS +BYTES +CREATED +EVICTED +ROWS PER SERVER\n)")));
  CHECK(std::regex_search(text, std::regex(a)));
  CHECK(std::regex_search(text, std::regex(b)));
  CHECK(text.find("table budget") == std::string::npos);  // none set
  WARN("zps status with two tables:\n" << text);

  const std::string total_a = R"({"name":"sizes/a","rows":1000,"bytes":)" + std::to_string(kRowsA * kBytesA) +
                              R"(,"created":1000,"evicted":0})";
  std::string json = job.statusUntil({"--status_json"}, {});
  INFO(json);
  CHECK(json.find(R"("tables":[)" + total_a) != std::string::npos);
  CHECK(json.find(R"("table_budget_bytes":0,"tables_left_out":0,"tables":[)") != std::string::npos);

  for (int s = 0; s < 2; ++s) {
    const std::string text = scrape(job.server_ports[s]);
    INFO("server " << s << ":\n" << text);
    for (const auto& [name, row_bytes] : {std::pair{"sizes/a", kBytesA}, std::pair{"sizes/b", kBytesB}}) {
      const std::string label = "{table=\"" + std::string(name) + "\"}";
      const double rows = static_cast<double>(e.at(name)[s]);
      CHECK(sample(text, "zps_server_table_rows" + label) == rows);
      CHECK(sample(text, "zps_server_table_bytes" + label) == rows * row_bytes);
      CHECK(sample(text, "zps_server_table_rows_created_total" + label) == rows);
      CHECK(sample(text, "zps_server_table_rows_evicted_total" + label) == 0);
    }
    CHECK(sample(text, "zps_server_table_budget_bytes") == 0);
  }
  job.finish();
}

TEST_CASE("table sizes: a stream of new ids holds ZPS_TABLE_MEMORY_BYTES and counts its evictions", "[tables]") {
  const uint64_t budget = kBudgetRows * kBytesA;
  Job job("stream", {{"ZPS_TABLE_MEMORY_BYTES", std::to_string(budget)}});
  REQUIRE(job.expected.count("sizes/stream") == 1);
  const auto& sent = job.expected.at("sizes/stream");
  REQUIRE(sent[0] > kBudgetRows);  // each server gets about half: both must evict
  REQUIRE(sent[1] > kBudgetRows);
  const uint64_t held = 2 * kBudgetRows;
  const std::string line = "sizes/stream +" + std::to_string(held) + " +" + std::to_string(held * kBytesA) + " +" +
                           std::to_string(kStreamRows) + " +" + std::to_string(kStreamRows - held) + "  s0 " +
                           std::to_string(kBudgetRows) + ", s1 " + std::to_string(kBudgetRows) + "\n";
  const std::string budget_line = " table budget: " + std::to_string(budget) + " of " + std::to_string(budget) +
                                  " bytes held \\(ZPS_TABLE_MEMORY_BYTES\\)\n";
  std::string text = job.statusUntil(
      {}, {std::regex(line), std::regex("server 0" + budget_line), std::regex("server 1" + budget_line)});
  INFO(text);
  CHECK(std::regex_search(text, std::regex(line)));
  CHECK(std::regex_search(text, std::regex("server 0" + budget_line)));
  CHECK(std::regex_search(text, std::regex("server 1" + budget_line)));
  WARN("zps status under a table budget:\n" << text);
  for (int s = 0; s < 2; ++s) {
    const std::string text = scrape(job.server_ports[s]);
    INFO("server " << s << ":\n" << text);
    const std::string label = "{table=\"sizes/stream\"}";
    CHECK(sample(text, "zps_server_table_rows" + label) == kBudgetRows);
    CHECK(sample(text, "zps_server_table_bytes" + label) == budget);
    CHECK(sample(text, "zps_server_table_rows_created_total" + label) == sent[s]);
    CHECK(sample(text, "zps_server_table_rows_evicted_total" + label) == sent[s] - kBudgetRows);
    CHECK(sample(text, "zps_server_table_budget_bytes") == budget);
  }
  job.finish();
}
