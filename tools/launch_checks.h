// What `zps launch` settles before it starts a job's processes: the job's token, and whether the
// settings every role will read are valid, so that a user error ends launch with exit code 2 and one
// line, whichever process would have noticed it first.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zps/status.h"

namespace zps {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// ZPS_AUTH_TOKEN=<64 random hex digits> for a job whose environment sets no token (ZPS_AUTH_TOKEN or
// ZPS_AUTH_TOKEN_FILE): then only this job's processes can join its scheduler and servers, and its
// nodes cannot join another job's. nullopt when the user set a token.
std::optional<std::pair<std::string, std::string>> freshJobToken();

// Loads the scheduler's, a server's and a worker's configuration (and the observability settings) from
// `common` on top of this process's environment; the first error, as an InvalidArgument naming the
// role, or OK.
Status checkRoleSettings(const EnvList& common);

}  // namespace zps
