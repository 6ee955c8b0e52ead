// Progress of long dataset work (generating synthetic data, reading a big file) for the person
// waiting on it. Work that ends within a couple of seconds prints nothing; longer work prints a
// percentage, what is done and the elapsed time: on a terminal one line redrawn in place, otherwise
// (a log, `zps launch`'s pipe) a plain line every few seconds. Output goes to stderr, where the log
// lines go.
//
// One DatasetProgress belongs to the thread doing the work; advance() is cheap enough to call per
// row (it reads the clock once every 1024 units).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace zps::train {

class DatasetProgress {
 public:
  struct Options {
    std::chrono::milliseconds first{2000};  // nothing is shown before this much time has passed
    std::chrono::milliseconds every{5000};  // between plain lines (a terminal redraws every 0.5 s)
    bool terminal = false;                  // redraw one line in place
    // Receives each piece of output; the default writes it to stderr.
    std::function<void(const std::string&)> write;
  };
  // Options for stderr: terminal when stderr is one (and TERM is not "dumb").
  static Options forStderr();

  // what: "generating synthetic-ctr"; total: the units of the whole work (0: unknown); unit: "rows",
  // "bytes" (shown in MB).
  DatasetProgress(std::string what, uint64_t total, std::string unit, Options options = forStderr());
  // Ends the line on a terminal if one was drawn (an error message then starts on its own line).
  ~DatasetProgress();
  DatasetProgress(const DatasetProgress&) = delete;
  DatasetProgress& operator=(const DatasetProgress&) = delete;

  void advance(uint64_t units = 1) {
    done_ += units;
    if ((pending_ += units) >= 1024) check();
  }
  // The work is complete: if anything was shown, says so and how long it took.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void check();
  std::string amount(uint64_t units) const;

  const std::string what_, unit_;
  const uint64_t total_;
  Options options_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point next_;
  uint64_t done_ = 0, pending_ = 0;
  bool shown_ = false, line_open_ = false;
};

}  // namespace zps::train
