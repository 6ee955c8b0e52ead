#include "ps/common/checkpoint_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "ps/common/checkpoint.h"

namespace zps {
namespace {

constexpr size_t kMaxSmallFile = 64;  // `latest` and `job-id` are a line of digits

std::string errnoText() { return std::strerror(errno); }

// Reads a small regular file whole: at most kMaxSmallFile bytes, or an error naming it.
StatusOr<std::string> readSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return InvalidArgument(path + " cannot be read: " + errnoText());
  }
  struct stat st {};
  std::string text(kMaxSmallFile + 1, '\0');
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    do {
      n = ::read(fd, text.data(), text.size());
    } while (n < 0 && errno == EINTR);
  }
  const int saved = errno;
  ::close(fd);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + " is not a regular file");
  if (n < 0) return InvalidArgument(path + " cannot be read: " + std::strerror(saved));
  if (static_cast<size_t>(n) > kMaxSmallFile)
    return InvalidArgument(path + " is longer than " + std::to_string(kMaxSmallFile) + " bytes: not written by zps");
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

StatusOr<uint64_t> parseJobId(const std::string& path, const std::string& text) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return InvalidArgument(path + " holds '" + text.substr(0, 32) + "', not a job id of 16 hex digits");
  return std::stoull(text, nullptr, 16);
}

Status probeWritable(const std::string& dir) {
  const std::string probe = dir + "/.zps-write-check." + std::to_string(getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return InvalidArgument("cannot create files in " + dir + ": " + errnoText());
  const bool written = ::write(fd, "z", 1) == 1 && ::fsync(fd) == 0;
  const std::string why = errnoText();
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written) return InvalidArgument("cannot write files in " + dir + ": " + why);
  return Status::OK();
}

// Writes a fresh random id to a temporary file and links it to `path`: the link either creates the
// whole file or fails because another node was first, so no node ever reads half an id.
Status mintJobId(const std::string& path) {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char text[18];
  std::snprintf(text, sizeof(text), "%016" PRIx64 "\n", id);
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  Status s = writeFileAtomically(tmp, text);
  if (!s.ok()) return InvalidArgument(s.message());
  const bool linked = ::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST;
  const std::string why = errnoText();
  ::unlink(tmp.c_str());
  if (!linked) return InvalidArgument("cannot create " + path + ": " + why);
  return Status::OK();
}

}  // namespace

StatusOr<uint64_t> prepareCheckpointDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("cannot create the checkpoint folder " + dir + ": " + ec.message());
  if (Status s = probeWritable(dir); !s.ok())
    return InvalidArgument("the checkpoint folder is not writable: " + s.message());
  const std::string path = dir + "/job-id";
  auto text = readSmallFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    ZPS_RETURN_IF_ERROR(mintJobId(path));
    text = readSmallFile(path);
  }
  if (!text.ok()) return InvalidArgument(text.status().message());
  return parseJobId(path, *text);
}

StatusOr<uint64_t> readLatestStep(const std::string& dir) {
  const std::string path = dir + "/latest";
  ZPS_ASSIGN_OR_RETURN(std::string text, readSmallFile(path));
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument(path + " holds '" + text + "', not a step number written by zps");
  const uint64_t step = std::stoull(text);
  if (step == 0) return InvalidArgument(path + " names step 0; zps writes checkpoints from step 1");
  return step;
}

Status writeLatestStep(const std::string& dir, uint64_t step) {
  return writeFileAtomically(dir + "/latest", std::to_string(step) + "\n");
}

std::optional<uint64_t> stepInFileName(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(digits);
}

size_t removeStepsBeforeLatest(const std::string& dir,
                               const std::function<std::optional<uint64_t>(const std::string&)>& step_of) {
  auto latest = readLatestStep(dir);
  return latest.ok() ? removeStepsBefore(dir, *latest, step_of) : 0;
}

size_t removeStepsBefore(const std::string& dir, uint64_t keep_from,
                         const std::function<std::optional<uint64_t>(const std::string&)>& step_of) {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto step = step_of(e.path().filename().string());
    if (step && *step < keep_from && std::filesystem::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace zps
