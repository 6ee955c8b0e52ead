#include "ps/node/job_layout.h"

#include <algorithm>
#include <set>

namespace zps {
namespace {

// "65536 bytes (auto)" or "65536 bytes (ZPS_CREDIT_BYTES)".
std::string described(const std::string& value, bool chosen, const char* setting) {
  return value + (chosen ? " (auto)" : std::string(" (") + setting + ")");
}

}  // namespace

JobLayout layoutOf(const pb::RegisterReply& book) {
  JobLayout layout;
  std::set<std::string> hosts;
  for (const pb::NodeInfo& n : book.nodes()) {
    if (n.role() == pb::WORKER) {
      ++layout.workers;
    } else if (n.role() == pb::SERVER) {
      ++layout.servers;
    } else {
      continue;
    }
    hosts.insert(n.host());
  }
  layout.hosts = std::max<int>(1, static_cast<int>(hosts.size()));
  return layout;
}

std::string chooseScheduling(const JobLayout& layout, Config* config) {
  Config::Automatic& a = config->automatic;
  const bool network = layout.spansHosts();
  if (a.partition) config->partition_bytes = network ? kNetworkPartitionBytes : kOneHostPartitionBytes;
  if (a.priority) config->priority = network;
  if (a.skip_zeros) config->skip_zeros = network;
  if (a.credit) config->credit_bytes = config->partition_bytes;
  if (a.pacing) config->push_pacing_bytes = network ? 2 * config->credit_bytes : 0;
  if (a.pacing_follows_credit) config->push_pacing_bytes = 2 * config->credit_bytes;

  std::string line = "scheduling: ";
  line += network
              ? "the workers and servers run on " + std::to_string(layout.hosts) + " hosts, so the links are the limit"
              : "every worker and server runs on one host, so the CPUs are the limit";
  line += ": partitions of " +
          described(std::to_string(config->partition_bytes) + " bytes", a.partition, "ZPS_PARTITION_BYTES");
  if (config->priority) {
    line += ", priority scheduling " + described("on", a.priority, "ZPS_PRIORITY") + " with " +
            described(std::to_string(config->credit_bytes) + " bytes", a.credit, "ZPS_CREDIT_BYTES") +
            " of push credit per server, push pacing " +
            described(config->push_pacing_bytes == 0 ? "off" : std::to_string(config->push_pacing_bytes) + " bytes",
                      a.pacing, "ZPS_PUSH_PACING_BYTES");
  } else {
    line += ", " + described("no priority scheduling", a.priority, "ZPS_PRIORITY") + ": every partition sent at once";
  }
  line += ", zeros " + described(config->skip_zeros ? "skipped" : "sent", a.skip_zeros, "ZPS_SKIP_ZEROS");
  return line;
}

}  // namespace zps
