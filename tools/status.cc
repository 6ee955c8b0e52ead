// `zps status`: asks the scheduler's HTTP endpoint (ZPS_METRICS_PORT on the scheduler) for the cluster
// table and prints it. Exit codes: 0 every node registered and alive (or finished); 1 a node missing,
// late or dead, the job failed, or the scheduler unreachable; 2 bad flags or environment. That makes it
// a readiness probe (`zps status` succeeds once the job runs) and a liveness check of the whole job.
//
//   zps status                              # DMLC_PS_ROOT_URI (or 127.0.0.1), ZPS_METRICS_PORT
//   zps status --host sched --metrics_port 9100 --status_json

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "ps/common/config.h"
#include "ps/common/settings.h"
#include "ps/node/auth.h"
#include "ps/node/http_server.h"
#include "ps/node/observability.h"
#include "tools/command_line.h"
#include "tools/programs.h"

ZPS_FLAG(status, std::string, host, "", "the scheduler's host name or IP (default: DMLC_PS_ROOT_URI, else 127.0.0.1)");
ZPS_FLAG(status, double, probe_timeout, 2, "seconds to wait for the scheduler's answer");
ZPS_FLAG(status, bool, status_json, false, "print the scheduler's JSON (/api/status) instead of the table");

namespace zps {

int statusMain() {
  auto env = processEnv();
  if (Status s = initObservability(env); !s.ok()) {
    std::cerr << "zps status: " << s.message() << std::endl;
    return 2;
  }
  int port = obsConfig().metrics_port;
  if (port == 0) {
    std::cerr << "zps status: set ZPS_METRICS_PORT (or --metrics_port) to the scheduler's HTTP port" << std::endl;
    return 2;
  }
  std::string host = FLAGS_host;
  if (host.empty()) {
    auto root = readText(processEnv(), settings::kRootUri);
    host = root.ok() && !root->empty() ? *root : "127.0.0.1";
  }
  if (!(FLAGS_probe_timeout > 0) || !std::isfinite(FLAGS_probe_timeout)) {
    std::cerr << "zps status: --probe_timeout must be a positive number of seconds" << std::endl;
    return 2;
  }
  auto timeout = std::chrono::milliseconds(static_cast<long long>(FLAGS_probe_timeout * 1000));
  auto token = tokenFromEnvironment();  // a job with a token shows its node table to holders only
  if (!token.ok()) {
    std::cerr << "zps status: " << token.status().message() << std::endl;
    return 2;
  }
  auto res = httpGet(host, port, FLAGS_status_json ? "/api/status" : "/status", timeout, *token);
  if (!res.ok()) {
    std::cerr << "zps status: scheduler unreachable: " << res.status().message() << std::endl;
    return 1;
  }
  auto [code, body] = *res;
  std::cout << body << std::flush;
  if (FLAGS_status_json) {
    // /api/status always answers 200; health is in the document.
    return body.find("\"healthy\":true") != std::string::npos ? 0 : 1;
  }
  if (code == 200) return 0;
  if (code == 401) {
    std::cerr << "zps status: the scheduler needs the job's token: set ZPS_AUTH_TOKEN or ZPS_AUTH_TOKEN_FILE"
              << std::endl;
    return 2;
  }
  if (code != 503) std::cerr << "zps status: unexpected HTTP status " << code << std::endl;
  return 1;
}

}  // namespace zps
