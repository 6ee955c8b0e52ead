// Observability on a real job: /metrics on every role (names, # TYPE lines, counters that grow, a strict
// check of the text format), embedding-row traffic in the worker's counters, `zps status` for a healthy
// cluster and after a worker is killed, and `zps launch`'s status line on a terminal and in a pipe.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "ps/node/http_server.h"
#include "tests/integration/cluster.h"
#include "tools/process.h"

namespace zps::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string dataDir() {
  const char* d = std::getenv("ZPS_DATA_DIR");
  return d != nullptr ? d : "data";
}

std::string scrape(int port) {
  auto r = httpGet("127.0.0.1", port, "/metrics", std::chrono::seconds(5));
  if (!r.ok() || r->first != 200) return "";
  return r->second;
}

// Strict check of the Prometheus text format (0.0.4) as written by any exporter: every sample belongs
// to a family announced by # TYPE before it, names and labels are well-formed, values parse,
// histograms have cumulative buckets ending in +Inf equal to _count. Returns "" or the first problem.
std::string checkExposition(const std::string& text, std::map<std::string, std::string>* types,
                            std::map<std::string, double>* samples) {
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*)?\})? ([-+]?([0-9.eE+-]+|Inf|NaN))$)");
  std::istringstream in(text);
  std::string line;
  std::set<std::string> seen_families;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.empty()) continue;
    if (std::regex_match(line, m, kType)) {
      if (!seen_families.insert(m[1]).second) return "family " + std::string(m[1]) + " declared twice";
      (*types)[m[1]] = m[2];
      continue;
    }
    if (std::regex_match(line, m, kHelp)) continue;
    if (line[0] == '#') return "unknown comment line: " + line;
    if (!std::regex_match(line, m, kSample)) return "malformed sample line: " + line;
    std::string name = m[1];
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s = suffix;
      if (types->count(family) == 0 && name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
        family = name.substr(0, name.size() - s.size());
    }
    if (types->count(family) == 0) return "sample before its # TYPE: " + line;
    std::string value = m[7];
    char* end = nullptr;
    double v = value == "+Inf" || value == "Inf" ? 1e308 : std::strtod(value.c_str(), &end);
    if (value != "NaN" && value != "+Inf" && value != "Inf" && (end == nullptr || *end != '\0'))
      return "bad value: " + line;
    (*samples)[name + std::string(m[2])] = v;
  }
  return "";
}

double sum(const std::map<std::string, double>& samples, const std::string& name) {
  double total = 0;
  for (const auto& [k, v] : samples)
    if (k == name || k.rfind(name + "{", 0) == 0) total += v;
  return total;
}

// Scrapes `port` every 200 ms (for at most 60 s) until its exposition parses and `ready` holds for its
// samples; the process that serves it must keep running meanwhile. Leaves the last scrape's types and
// samples, which the caller REQUIREs to be ready.
template <typename Ready>
void scrapeUntil(Cluster& c, int process, int port, Ready ready, std::map<std::string, std::string>* types,
                 std::map<std::string, double>* samples) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    types->clear();
    samples->clear();
    std::string text = scrape(port);
    if (!text.empty()) {
      REQUIRE(checkExposition(text, types, samples) == "");
      if (ready(*samples)) return;
    }
    REQUIRE(c.running(process));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

TEST_CASE("every role serves /metrics and the counters grow", "[observability]") {
  Cluster c(1, 2);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  int base = proc::pickFreeTcpPort();
  int ports[4] = {base, proc::pickFreeTcpPort(), proc::pickFreeTcpPort(), proc::pickFreeTcpPort()};
  c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(ports[0])}});
  c.startServer({{"ZPS_METRICS_PORT", std::to_string(ports[1])}});
  std::vector<std::string> train = {"train", "--data", "digits", "--data_dir", dataDir(), "--epochs", "3000"};
  int w0 = c.startWorker(0, train, {{"ZPS_METRICS_PORT", std::to_string(ports[2])}});
  c.startWorker(1, train, {{"ZPS_METRICS_PORT", std::to_string(ports[3])}});

  // Wait (bounded) until worker 0 has pushed something.
  std::map<std::string, std::string> types;
  std::map<std::string, double> first;
  scrapeUntil(
      c, w0, ports[2],
      [](const std::map<std::string, double>& m) {
        return sum(m, "zps_worker_pushed_bytes_total") > 0 && sum(m, "zps_training_step") > 0;
      },
      &types, &first);
  REQUIRE(sum(first, "zps_worker_pushed_bytes_total") > 0);
  CHECK(types["zps_worker_pushed_bytes_total"] == "counter");
  CHECK(types["zps_worker_pulled_bytes_total"] == "counter");
  CHECK(types["zps_worker_push_messages_total"] == "counter");
  CHECK(types["zps_worker_request_duration_seconds"] == "histogram");
  CHECK(types["zps_training_loss"] == "gauge");
  CHECK(types["zps_training_samples_per_second"] == "gauge");
  CHECK(first.count("zps_worker_request_duration_seconds_bucket{server=\"0\",op=\"push_pull\",le=\"+Inf\"}") == 1);

  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::map<std::string, std::string> types2;
  std::map<std::string, double> second;
  REQUIRE(checkExposition(scrape(ports[2]), &types2, &second) == "");
  for (const char* counter : {"zps_worker_pushed_bytes_total", "zps_worker_pulled_bytes_total",
                              "zps_worker_push_messages_total", "zps_worker_pull_messages_total"}) {
    INFO(counter);
    CHECK(sum(second, counter) > sum(first, counter));
  }
  CHECK(second["zps_training_step"] > first["zps_training_step"]);

  // Server and scheduler.
  std::map<std::string, std::string> st;
  std::map<std::string, double> ss;
  REQUIRE(checkExposition(scrape(ports[1]), &st, &ss) == "");
  CHECK(st["zps_server_rounds_completed_total"] == "counter");
  CHECK(st["zps_server_engine_queue_depth"] == "gauge");
  CHECK(st["zps_malformed_messages_total"] == "counter");
  CHECK(ss["zps_server_rounds_completed_total"] > 0);
  CHECK(sum(ss, "zps_server_pushed_bytes_total") > 0);
  std::map<std::string, std::string> kt;
  std::map<std::string, double> ks;
  REQUIRE(checkExposition(scrape(ports[0]), &kt, &ks) == "");
  CHECK(kt["zps_dead_nodes_total"] == "counter");
  CHECK(ks["zps_scheduler_nodes{role=\"worker\",state=\"alive\"}"] == 2);
  CHECK(ks["zps_scheduler_healthy"] == 1);
}

TEST_CASE("zps status: healthy, then a killed worker is named and the exit code is 1", "[observability]") {
  Cluster c(1, 2);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "60");  // the job stays up while we look at the dead worker
  int port = proc::pickFreeTcpPort();
  c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(port)}});
  c.startServer();
  std::vector<std::string> train = {"train", "--data", "digits", "--data_dir", dataDir(), "--epochs", "3000"};
  c.startWorker(0, train);
  int w1 = c.startWorker(1, train);
  Env status_env = {{"ZPS_METRICS_PORT", std::to_string(port)}};

  int healthy = -1;
  std::string log;
  // A worker's row once its program reports progress: zps train's epoch of 3000, then its step.
  auto training = [](int rank) { return std::regex("\nworker +" + std::to_string(rank) + " .* [0-9]+/3000 +[0-9]+ "); };
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    int s = c.start("status", {c.bin(), "status"}, status_env);
    healthy = c.waitExit(s);
    log = c.log(s);
    if (healthy == 0 && log.find("running") != std::string::npos && std::regex_search(log, training(0)) &&
        std::regex_search(log, training(1)))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(log);
  REQUIRE(healthy == 0);
  CHECK(log.find("healthy") != std::string::npos);
  CHECK(log.find("alive") != std::string::npos);
  CHECK(std::regex_search(log, training(0)));
  CHECK(std::regex_search(log, training(1)));
  WARN("zps status, healthy:\n" << log);
  int json = c.start("status-json", {c.bin(), "status", "--status_json"}, status_env);
  CHECK(c.waitExit(json) == 0);
  CHECK(std::regex_search(c.log(json), std::regex("\"epoch\":[0-9]+,\"epochs\":3000,\"step\":")));

  c.signal(w1, SIGKILL);
  int code = 0;
  deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    int s = c.start("status", {c.bin(), "status"}, status_env);
    code = c.waitExit(s);
    log = c.log(s);
    if (code != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  INFO(log);
  REQUIRE(code == 1);
  CHECK(log.find("NOT healthy") != std::string::npos);
  CHECK(log.find("worker 1 (127.0.0.1, pid " + std::to_string(c.pid(w1)) + ") sent no heartbeat") != std::string::npos);
  WARN("zps status, worker 1 killed:\n" << log);

  // Bad settings are a user error naming the variable.
  int bad = c.start("status-bad", {c.bin(), "status"}, {{"ZPS_METRICS_PORT", "http"}});
  CHECK(c.waitExit(bad) == 2);
  CHECK(c.log(bad).find("ZPS_METRICS_PORT") != std::string::npos);
}

TEST_CASE("embedding-row traffic counts in the worker's bytes, messages and rows", "[observability]") {
  Cluster c(1, 1);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  int port = proc::pickFreeTcpPort();
  c.startScheduler();
  c.startServer();
  int w = c.startWorker(
      0, {"train", "--model", "ctr", "--data", "synthetic-ctr", "--synthetic_rows", "4000", "--epochs", "1000"},
      {{"ZPS_METRICS_PORT", std::to_string(port)}});
  std::map<std::string, std::string> types;
  std::map<std::string, double> first;
  scrapeUntil(
      c, w, port,
      [](const std::map<std::string, double>& m) {
        return sum(m, "zps_worker_pulled_rows_total") > 0 && sum(m, "zps_worker_pushed_rows_total") > 0;
      },
      &types, &first);
  REQUIRE(sum(first, "zps_worker_pulled_rows_total") > 0);
  CHECK(types["zps_worker_pushed_rows_total"] == "counter");
  CHECK(types["zps_worker_pulled_rows_total"] == "counter");
  // Every row moves embedding_dim (8) floats; the dense layers add more bytes on top.
  CHECK(sum(first, "zps_worker_pulled_bytes_total") >= sum(first, "zps_worker_pulled_rows_total") * 8 * 4);
  CHECK(sum(first, "zps_worker_pushed_bytes_total") >= sum(first, "zps_worker_pushed_rows_total") * 8 * 4);

  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  std::map<std::string, std::string> types2;
  std::map<std::string, double> second;
  REQUIRE(checkExposition(scrape(port), &types2, &second) == "");
  for (const char* counter : {"zps_worker_pushed_rows_total", "zps_worker_pulled_rows_total",
                              "zps_worker_pulled_bytes_total", "zps_worker_pull_messages_total"}) {
    INFO(counter);
    CHECK(sum(second, counter) > sum(first, counter));
  }
  // Pulling rows is a pull: its latency lands in the pull histogram.
  CHECK(second["zps_worker_request_duration_seconds_count{server=\"0\",op=\"pull\"}"] > 0);
}

// The launch command line for a short real training job (about 1.5 s on two cores).
std::vector<std::string> launchTrain(const std::string& bin) {
  return {bin,  "launch", "--progress", "0.3",    "--servers",  "1",       "--workers", "2",
          "--", "train",  "--data",     "digits", "--data_dir", dataDir(), "--epochs",  "120"};
}

// What the scheduler's summary says once both workers train: zps train reports its epochs.
const std::string kTrainingStatus =
    R"(running [0-9]+s \| w0 epoch [0-9]+/120 step [0-9]+, w1 epoch [0-9]+/120 step [0-9]+ \| [0-9]+ samples/s \| )"
    R"(push [0-9.]+ MB/s, pull [0-9.]+ MB/s)";

TEST_CASE("zps launch: a live status line on a terminal, plain status lines in a pipe", "[observability]") {
  Cluster c(1, 2);
  // Progress reaches the scheduler with the heartbeats: frequent ones show steps early in a short job.
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.2");
  // A pipe: plain lines, no terminal control sequences.
  int piped = c.start("launch-pipe", launchTrain(c.bin()));
  REQUIRE(c.waitExit(piped, std::chrono::seconds(60)) == 0);
  std::string log = c.log(piped);
  INFO(log.substr(0, 4000));
  CHECK(log.find('\033') == std::string::npos);
  std::smatch m;
  CHECK(std::regex_search(log, m, std::regex("zps launch: status: " + kTrainingStatus + "\n")));

  // A real pseudo-terminal (util-linux script): one line, erased before every batch of log lines and
  // drawn again after them, never left in the scrollback.
  std::string script;
  for (const char* p : {"/usr/bin/script", "/bin/script"})
    if (std::filesystem::exists(p)) script = p;
  if (script.empty()) {
    WARN("SKIPPED the terminal half: util-linux 'script' is not installed");
    return;
  }
  std::string command;
  for (const auto& arg : launchTrain(c.bin())) command += "'" + arg + "' ";
  int tty = c.start("launch-tty", {script, "-qfec", command, "/dev/null"});
  REQUIRE(c.waitExit(tty, std::chrono::seconds(60)) == 0);
  log = c.log(tty);
  INFO(log.substr(0, 4000));
  const std::string erase = "\r\033[K";
  const std::string status = "zps launch: running";
  REQUIRE(log.find(erase + status) != std::string::npos);
  CHECK(std::regex_search(log, m, std::regex("zps launch: " + kTrainingStatus)));
  int draws = 0, training_lines = 0;
  size_t at = 0;
  while ((at = log.find(status, at)) != std::string::npos) {
    ++draws;
    // The status line ends where the next erase begins: no newline ever follows it.
    size_t end = log.find_first_of("\r\n", at);
    REQUIRE(end != std::string::npos);
    CHECK(log.compare(end, erase.size(), erase) == 0);
    at = end;
  }
  for (size_t p = log.find("[worker 0] Training. Epoch"); p != std::string::npos;
       p = log.find("[worker 0] Training. Epoch", p + 1)) {
    ++training_lines;
    // A log line starts at the left edge: after a newline or the erase of the status line.
    CHECK((log[p - 1] == '\n' || log.compare(p - erase.size(), erase.size(), erase) == 0));
  }
  CHECK(draws >= 2);
  CHECK(training_lines == 120);
}

}  // namespace
}  // namespace zps::testing
