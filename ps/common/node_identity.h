// Who this node is in the job: its role, the rank it asks the scheduler for, the address it advertises
// to its peers and the one it listens on. Each is guessed from the environment when not set (a rank from
// the Kubernetes or Volcano index or the hostname, an address from DMLC_INTERFACE or the machine's
// interfaces); loadConfig (config.h) reads them through these functions.
#pragma once

#include <string>

#include "ps/common/setting.h"
#include "zps/status.h"

namespace zps {

enum class Role { kScheduler, kServer, kWorker };
const char* roleName(Role role);

// The worker rank the environment asks for, in this order: DMLC_WORKER_ID, JOB_COMPLETION_INDEX,
// VC_TASK_INDEX, a trailing "-N" in the hostname; otherwise -1 (arrival order). Servers use ZPS_SERVER_ID,
// JOB_COMPLETION_INDEX, VC_TASK_INDEX. A hostname-derived rank >= num_nodes is ignored (it is a guess);
// an explicit one is kept and the scheduler refuses it.
Status resolveRequestedRank(const EnvLookup& env, Role role, int num_nodes, const std::string& hostname, int* rank,
                            std::string* source);

// This machine's name: HOSTNAME, else gethostname().
StatusOr<std::string> hostName(const EnvLookup& env);

// The address this node advertises: DMLC_NODE_HOST, else DMLC_INTERFACE's address, else detected.
StatusOr<std::string> advertisedHost(const EnvLookup& env);

// The address to listen on: ZPS_BIND_HOST, else DMLC_NODE_HOST when it is an IP address (a node binds
// the address it was told to advertise), else 0.0.0.0 (every interface: the scheduler behind a
// Kubernetes Service, whose name no pod can bind).
StatusOr<std::string> bindHostFrom(const EnvLookup& env);

// The IPv4 address of a network interface, or an error naming the interfaces that exist.
StatusOr<std::string> interfaceAddress(const std::string& interface);
// The first non-loopback IPv4 address that is up, else 127.0.0.1.
std::string detectHostAddress();

}  // namespace zps
