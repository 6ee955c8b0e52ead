#include "tools/launch_output.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

namespace zps {

namespace {

// The live status line while one is shown on a terminal (empty otherwise). Every write to stdout
// erases it first and draws it again after the new lines, so log lines never mix with it.
std::string g_status_line;
constexpr std::string_view kEraseLine = "\r\033[K";

void writeAll(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(STDOUT_FILENO, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void writeOut(std::string_view data) {
  if (g_status_line.empty()) return writeAll(data);
  std::string framed;
  framed.reserve(kEraseLine.size() + data.size() + g_status_line.size());
  framed.append(kEraseLine).append(data).append(g_status_line);
  writeAll(framed);
}

void setStatusLine(std::string line) {
  struct winsize ws {};
  if (!line.empty() && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col) {
    line.resize(ws.ws_col - 1);
  }
  if (line.empty() && g_status_line.empty()) return;
  g_status_line = std::move(line);
  writeAll(std::string(kEraseLine) + g_status_line);
}

void say(const std::string& line) { writeOut("zps launch: " + line + "\n"); }

std::string LinePrefixer::feed(std::string_view data) {
  std::string lines;
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      if (partial_.size() >= max_line_bytes_) lines += flush();
      break;
    }
    lines += prefix_;
    lines += partial_;
    lines.append(data.substr(0, newline + 1));
    partial_.clear();
    data.remove_prefix(newline + 1);
  }
  return lines;
}

std::string LinePrefixer::flush() {
  if (partial_.empty()) return "";
  std::string line = prefix_ + partial_ + "\n";
  partial_.clear();
  return line;
}

}  // namespace zps
