// What `zps launch` reads of its job from the scheduler's HTTP endpoint (the one the dashboard and
// `zps status` read): the one-line summary for the live status line, and each worker rank's state,
// by which launch ends a job whose worker exited without ever joining it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace zps {

class JobStatus {
 public:
  // port 0: no endpoint (every query answers nothing).
  JobStatus(std::string host, int port, std::string token)
      : host_(std::move(host)), port_(port), token_(std::move(token)) {}

  bool enabled() const { return port_ > 0; }
  // The scheduler's /api/summary as one printable line (control characters blanked, at most 1 KiB);
  // nothing when it does not answer (not up yet, or gone at the end of the job).
  std::optional<std::string> summary() const;
  // Each worker rank's state ("missing" until it registers, "running", "finished", ...) from
  // /api/status; nothing when the endpoint is off or does not answer.
  std::optional<std::map<int, std::string>> workerStates() const;

 private:
  std::string host_;
  int port_;
  std::string token_;
};

// The worker rows of /api/status's JSON: rank -> state. Rows that do not parse are skipped (bytes
// from the network).
std::map<int, std::string> parseWorkerStates(const std::string& json);

// The summary's bytes as one terminal line: control characters blanked, trailing blanks cut.
std::string printableSummary(std::string summary);

}  // namespace zps
