// JobLayout: where a job's workers and servers run, read from the scheduler's address book, and the
// scheduling settings zps chooses from it for those the user left at "auto" (partition size,
// priority scheduling, push credit, push pacing; docs/performance.md#defaults).
//
// Why the layout decides: on one host the CPUs are the limit, and every message costs CPU, so large
// partitions sent all at once are fastest. When the job spans hosts, the links are the limit: a
// tensor cut into small partitions spread over every server pipelines its pushes and its sums
// (a worker's link carries partition k's push while partition k-1's sum comes back), and one
// partition of push credit per server, sent in priority order, keeps the workers' flows into a
// server even, so every key is summed as its pushes arrive (measured on the emulated cluster:
// docs/performance.md).
//
// Every worker and server reads the same book, so every node of a job makes the same choice without
// talking to anyone: partitions (and so keys) agree on every worker, and a server's push pacing
// matches the workers' credit.
//
// Pure functions; any thread.
#pragma once

#include <string>

#include "proto/zps.pb.h"
#include "ps/common/config.h"

namespace zps {

struct JobLayout {
  int hosts = 1;    // distinct addresses among the workers and servers
  int workers = 0;  // in the book
  int servers = 0;
  bool spansHosts() const { return hosts > 1; }
};

// The layout of the nodes in `book` (the scheduler is not counted: it carries no data).
JobLayout layoutOf(const pb::RegisterReply& book);

// The values for the settings `config->automatic` marks, for a job laid out as `layout`, set into
// *config; returns one line for the log that says what was chosen, why, and what overrides it.
std::string chooseScheduling(const JobLayout& layout, Config* config);

// The choices chooseScheduling makes for a job that spans hosts, named for the docs and tests.
inline constexpr size_t kNetworkPartitionBytes = 64 << 10;
// With ZPS_CREDIT_BYTES=auto and priority scheduling, a worker's credit per server starts at one
// partition and follows its measured bandwidth-delay product (worker/scheduling/credit_gauge.h) up to this.
inline constexpr size_t kMaxAutomaticCreditBytes = 4 << 20;

}  // namespace zps
