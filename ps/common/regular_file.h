// Opening a file that a user named (a data file, a token file) for reading, refusing anything but a
// regular file: a folder would fail only at the first read (libstdc++ then throws from deep inside a
// stream), a FIFO without a writer would block the open forever, and a device such as /dev/zero never
// ends. Every refusal names the path and says what it is instead.
#pragma once

#include <string>

#include "zps/status.h"

namespace zps {

// A descriptor open for reading on `path`, a regular file (following symbolic links, so a mounted
// Kubernetes Secret's link is fine); the caller closes it. `what` starts each message ("data file",
// "ZPS_AUTH_TOKEN_FILE="): NotFound when the path does not exist, InvalidArgument for a folder, FIFO,
// socket, device or a file this process may not read. Never blocks.
StatusOr<int> openRegularFile(const std::string& what, const std::string& path);

// The same check without keeping the descriptor open.
Status checkRegularFile(const std::string& what, const std::string& path);

}  // namespace zps
