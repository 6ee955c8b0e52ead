#include "train/dataset_progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace zps::train {
namespace {

constexpr std::chrono::milliseconds kRedraw{500};
constexpr char kEraseLine[] = "\r\033[K";

std::string seconds(std::chrono::steady_clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

DatasetProgress::Options DatasetProgress::forStderr() {
  Options o;
  const char* term = std::getenv("TERM");
  o.terminal = isatty(STDERR_FILENO) == 1 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  o.write = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
  return o;
}

DatasetProgress::DatasetProgress(std::string what, uint64_t total, std::string unit, Options options)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      options_(std::move(options)),
      next_(start_ + options_.first) {}

DatasetProgress::~DatasetProgress() {
  if (line_open_) options_.write("\n");
}

std::string DatasetProgress::amount(uint64_t units) const {
  if (unit_ == "bytes") {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", units / 1e6);
    return buf;
  }
  return std::to_string(units);
}

void DatasetProgress::check() {
  pending_ = 0;
  const auto now = Clock::now();
  if (now < next_) return;
  const std::string unit = unit_ == "bytes" ? "MB" : unit_;
  std::string line = what_ + ": ";
  if (total_ > 0) {
    line += std::to_string(std::min<uint64_t>(done_ * 100 / total_, 100)) + "% (" + amount(done_) + " of " +
            amount(total_) + " " + unit + ")";
  } else {
    line += amount(done_) + " " + unit;
  }
  line += ", " + seconds(now - start_);
  if (options_.terminal) {
    options_.write(kEraseLine + line);
    line_open_ = true;
    next_ = now + kRedraw;
  } else {
    options_.write(line + "\n");
    next_ = now + options_.every;
  }
  shown_ = true;
}

void DatasetProgress::finish() {
  if (!shown_) return;
  std::string line = what_ + ": done, " + amount(done_) + " " + (unit_ == "bytes" ? "MB" : unit_) + " in " +
                     seconds(Clock::now() - start_) + "\n";
  options_.write(options_.terminal ? kEraseLine + line : line);
  line_open_ = false;
  shown_ = false;
}

}  // namespace zps::train
