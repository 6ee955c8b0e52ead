// `zps launch`'s standard output: the children's lines, launch's own lines, and on a terminal one
// live status line kept below them. Called only from launch's main thread (tools/launch.cc); the
// status line is process-wide state, as stdout is.
#pragma once

#include <string>
#include <string_view>

namespace zps {

// Writes all of `data` (whole lines) to launch's stdout in one write where the kernel allows, so a
// line from one child never interleaves with another's. Failures (a closed pipe) drop the output:
// the job itself must keep running and be stopped cleanly.
void writeOut(std::string_view data);

// Shows `line` as the terminal's live status line (empty: erases it). A line wider than the terminal
// would wrap, and "\r" would then redraw only its last row, so it is cut to the width.
void setStatusLine(std::string line);

// One line of launch's own: "zps launch: " + line.
void say(const std::string& line);

// One child's output stream cut into whole lines, each prefixed "[label] ", so that lines of
// different children never mix. Bytes after the last newline wait for the rest of their line, up to
// max_line_bytes: a child that never prints a newline must not grow launch's memory without bound.
class LinePrefixer {
 public:
  LinePrefixer(const std::string& label, size_t max_line_bytes)
      : prefix_("[" + label + "] "), max_line_bytes_(max_line_bytes) {}
  // The lines `data` completes, prefixed (empty when it completes none).
  std::string feed(std::string_view data);
  // The unfinished line's bytes as a line of their own; empty when there are none.
  std::string flush();

 private:
  std::string prefix_;
  size_t max_line_bytes_;
  std::string partial_;
};

}  // namespace zps
