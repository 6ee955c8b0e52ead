#pragma once

#include <chrono>
#include <string>

#include "zps/status.h"

namespace zps {

// Resolves a host name or IP to an IPv4 (else IPv6) address, retrying with exponential backoff (0.1 s
// doubling to 5 s) until `timeout` passes, and logging each failed attempt. Pods start in any order, so a
// name that does not resolve yet is normal for a while. `what` names the host in messages.
StatusOr<std::string> resolveWithRetry(const std::string& host, std::chrono::milliseconds timeout,
                                       const std::string& what);

}  // namespace zps
