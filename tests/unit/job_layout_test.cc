// Tests for the job layout and the scheduling zps chooses from it (ps/node/job_layout.h): one host
// keeps large partitions sent at once, a job across hosts gets small partitions, priority, one
// partition of credit and pacing, and whatever the user set stays as set.
#include <string>

#include <catch2/catch.hpp>

#include "ps/common/config.h"
#include "ps/node/job_layout.h"
#include "tests/unit/env_lookup.h"

namespace zps {
namespace {

using testing::Env;
using testing::lookup;

void addNode(pb::RegisterReply* book, pb::Role role, int rank, const std::string& host) {
  pb::NodeInfo* n = book->add_nodes();
  n->set_role(role);
  n->set_rank(rank);
  n->set_host(host);
  n->set_port(9000 + rank);
}

// `workers` workers and `servers` servers; node i runs on host hosts[i % hosts.size()].
pb::RegisterReply bookOf(int workers, int servers, const std::vector<std::string>& hosts) {
  pb::RegisterReply book;
  int i = 0;
  for (int w = 0; w < workers; ++w) addNode(&book, pb::WORKER, w, hosts[i++ % hosts.size()]);
  for (int s = 0; s < servers; ++s) addNode(&book, pb::SERVER, s, hosts[i++ % hosts.size()]);
  return book;
}

Config configWith(Env extra) {
  Env env = {{"DMLC_ROLE", "worker"},       {"DMLC_NUM_SERVER", "4"},          {"DMLC_NUM_WORKER", "4"},
             {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"HOSTNAME", "testhost"}};
  for (const auto& [k, v] : extra) env[k] = v;
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  return *c;
}

TEST_CASE("job layout: hosts are the distinct addresses of workers and servers", "[job_layout]") {
  pb::RegisterReply book = bookOf(2, 2, {"127.0.0.1"});
  addNode(&book, pb::SCHEDULER, 0, "10.0.0.9");  // the scheduler carries no data: not counted
  JobLayout one = layoutOf(book);
  CHECK(one.hosts == 1);
  CHECK(one.workers == 2);
  CHECK(one.servers == 2);
  CHECK_FALSE(one.spansHosts());
  JobLayout eight = layoutOf(
      bookOf(4, 4, {"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8"}));
  CHECK(eight.hosts == 8);
  CHECK(eight.spansHosts());
  CHECK(layoutOf(pb::RegisterReply()).hosts == 1);
}

TEST_CASE("job layout: on one host the defaults are large partitions sent at once", "[job_layout]") {
  Config c = configWith({});
  CHECK(c.automatic.partition);
  CHECK(c.automatic.priority);
  const std::string line = chooseScheduling(layoutOf(bookOf(2, 2, {"127.0.0.1"})), &c);
  CHECK(c.partition_bytes == 4194304);
  CHECK_FALSE(c.priority);
  CHECK(c.push_pacing_bytes == 0);
  CHECK(line.find("one host") != std::string::npos);
  CHECK(line.find("partitions of 4194304 bytes (auto)") != std::string::npos);
  CHECK_FALSE(c.skip_zeros);
  CHECK(line.find("zeros sent (auto)") != std::string::npos);
}

TEST_CASE("job layout: across hosts, small partitions with priority, one partition of credit, pacing", "[job_layout]") {
  Config c = configWith({});
  const std::string line = chooseScheduling(layoutOf(bookOf(4, 4, {"10.0.0.1", "10.0.0.2"})), &c);
  CHECK(c.partition_bytes == kNetworkPartitionBytes);
  CHECK(c.priority);
  CHECK(c.credit_bytes == kNetworkPartitionBytes);
  CHECK(c.push_pacing_bytes == 2 * kNetworkPartitionBytes);
  CHECK(line.find("2 hosts") != std::string::npos);
  CHECK(line.find("priority scheduling on (auto)") != std::string::npos);
  CHECK(c.skip_zeros);
  CHECK(line.find("zeros skipped (auto)") != std::string::npos);
}

TEST_CASE("job layout: ZPS_SKIP_ZEROS set wins in either layout, and a bad value is refused", "[job_layout]") {
  Config off = configWith({{"ZPS_SKIP_ZEROS", "0"}});
  const std::string line = chooseScheduling(layoutOf(bookOf(2, 2, {"10.0.0.1", "10.0.0.2"})), &off);
  CHECK_FALSE(off.skip_zeros);
  CHECK(line.find("zeros sent (ZPS_SKIP_ZEROS)") != std::string::npos);
  Config on = configWith({{"ZPS_SKIP_ZEROS", "1"}});
  chooseScheduling(layoutOf(bookOf(2, 2, {"127.0.0.1"})), &on);
  CHECK(on.skip_zeros);
  Env env = {{"DMLC_ROLE", "worker"},       {"DMLC_NUM_SERVER", "4"},          {"DMLC_NUM_WORKER", "4"},
             {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"ZPS_SKIP_ZEROS", "maybe"}};
  auto bad = loadConfig(lookup(env));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("ZPS_SKIP_ZEROS") != std::string::npos);
}

TEST_CASE("job layout: settings the user gave are kept, and the log names them", "[job_layout]") {
  Config c = configWith({{"ZPS_PARTITION_BYTES", "131072"}, {"ZPS_PRIORITY", "0"}});
  CHECK_FALSE(c.automatic.partition);
  CHECK_FALSE(c.automatic.priority);
  const std::string line = chooseScheduling(layoutOf(bookOf(4, 4, {"10.0.0.1", "10.0.0.2"})), &c);
  CHECK(c.partition_bytes == 131072);
  CHECK_FALSE(c.priority);
  CHECK(line.find("131072 bytes (ZPS_PARTITION_BYTES)") != std::string::npos);
  CHECK(line.find("no priority scheduling (ZPS_PRIORITY)") != std::string::npos);

  // Credit -1 pacing follows the credit the layout chose; an explicit credit and pacing stay.
  Config follows = configWith({{"ZPS_PUSH_PACING_BYTES", "-1"}});
  chooseScheduling(layoutOf(bookOf(2, 2, {"10.0.0.1", "10.0.0.2"})), &follows);
  CHECK(follows.push_pacing_bytes == 2 * follows.credit_bytes);
  Config fixed = configWith({{"ZPS_CREDIT_BYTES", "5000"}, {"ZPS_PUSH_PACING_BYTES", "0"}});
  chooseScheduling(layoutOf(bookOf(2, 2, {"10.0.0.1", "10.0.0.2"})), &fixed);
  CHECK(fixed.credit_bytes == 5000);
  CHECK(fixed.push_pacing_bytes == 0);
  // On one host a user's priority keeps its credit of one (default) partition.
  Config priority = configWith({{"ZPS_PRIORITY", "1"}});
  chooseScheduling(layoutOf(bookOf(2, 2, {"127.0.0.1"})), &priority);
  CHECK(priority.priority);
  CHECK(priority.credit_bytes == 4194304);
}

TEST_CASE("job layout: 'auto' is a value, anything else is checked as before", "[job_layout]") {
  Config c = configWith({{"ZPS_PARTITION_BYTES", "auto"}, {"ZPS_PRIORITY", "auto"}});
  CHECK(c.automatic.partition);
  CHECK(c.automatic.priority);
  Env bad = {{"DMLC_ROLE", "worker"},       {"DMLC_NUM_SERVER", "1"},          {"DMLC_NUM_WORKER", "1"},
             {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"ZPS_PRIORITY", "maybe"}};
  auto refused = loadConfig(lookup(bad));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("ZPS_PRIORITY") != std::string::npos);
  CHECK(refused.status().message().find("auto, 0 or 1") != std::string::npos);
  bad["ZPS_PRIORITY"] = "1";
  bad["ZPS_PARTITION_BYTES"] = "Auto-ish";
  refused = loadConfig(lookup(bad));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("auto or a whole number") != std::string::npos);
}

}  // namespace
}  // namespace zps
