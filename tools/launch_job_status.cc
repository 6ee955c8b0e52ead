#include "tools/launch_job_status.h"

#include <limits.h>

#include <cstdlib>

#include "ps/node/http_server.h"

namespace zps {
namespace {

// Short: these run on the loop that relays the children's output.
constexpr std::chrono::milliseconds kQueryTimeout{300};
constexpr size_t kMaxSummaryBytes = 1024;

}  // namespace

std::optional<std::string> JobStatus::summary() const {
  if (!enabled()) return std::nullopt;
  auto res = httpGet(host_, port_, "/api/summary", kQueryTimeout, token_);
  if (!res.ok() || res->first != 200) return std::nullopt;
  return printableSummary(res->second.substr(0, kMaxSummaryBytes));
}

std::optional<std::map<int, std::string>> JobStatus::workerStates() const {
  if (!enabled()) return std::nullopt;
  auto res = httpGet(host_, port_, "/api/status", kQueryTimeout, token_);
  if (!res.ok() || res->first != 200) return std::nullopt;
  return parseWorkerStates(res->second);
}

std::map<int, std::string> parseWorkerStates(const std::string& json) {
  std::map<int, std::string> states;
  const std::string row = "{\"role\":\"worker\",\"rank\":";
  const std::string state = "\"state\":\"";
  for (size_t at = json.find(row); at != std::string::npos; at = json.find(row, at + 1)) {
    const char* digits = json.c_str() + at + row.size();
    char* end = nullptr;
    long rank = std::strtol(digits, &end, 10);
    size_t s = json.find(state, at);
    if (end == digits || rank < 0 || rank > INT_MAX || s == std::string::npos) continue;
    size_t close = json.find('"', s + state.size());
    if (close == std::string::npos) continue;
    states[static_cast<int>(rank)] = json.substr(s + state.size(), close - s - state.size());
  }
  return states;
}

std::string printableSummary(std::string summary) {
  for (char& c : summary) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!summary.empty() && summary.back() == ' ') summary.pop_back();
  return summary;
}

}  // namespace zps
