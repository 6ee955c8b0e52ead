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

}  // namespace zps
