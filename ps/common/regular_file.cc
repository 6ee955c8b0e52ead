#include "ps/common/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zps {
namespace {

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

StatusOr<int> openRegularFile(const std::string& what, const std::string& path) {
  // O_NONBLOCK: opening a FIFO that no process writes to returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return NotFound(what + path + " does not exist");
    return InvalidArgument(what + path + " cannot be read: " + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = kindOf(st.st_mode);
    ::close(fd);
    return InvalidArgument(what + path + " is " + kind + "; give a regular file");
  }
  // Reads of a regular file never block; clearing the flag keeps stdio and streams on the usual path.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Status checkRegularFile(const std::string& what, const std::string& path) {
  ZPS_ASSIGN_OR_RETURN(int fd, openRegularFile(what, path));
  ::close(fd);
  return Status::OK();
}

}  // namespace zps
