// `zps trace merge OUT.json IN.json...`: merges the timeline files the workers and servers wrote
// (ZPS_TRACE_ON=1) into one Chrome/Perfetto trace, one process per node.
//
// Clocks: every node measured the offset of its clock to the scheduler's from heartbeat round trips
// (the sample with the shortest round trip; the error is at most half of it) and stored it in
// otherData. Merge shifts each node's events by that offset when it exceeds that error bound; a smaller
// offset cannot be told apart from zero (nodes on one host share a clock), so it is left alone rather
// than adding noise. It reads only files written by zps, which put one event per line.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/programs.h"

namespace zps {
namespace {

// The integer after "key": in a line of our own JSON, or `fallback`.
long long numberAfter(const std::string& line, const std::string& key, long long fallback) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return fallback;
  return std::strtoll(line.c_str() + at + key.size() + 3, nullptr, 10);
}

std::string replaceNumber(const std::string& line, const std::string& key, long long value) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return line;
  size_t start = at + key.size() + 3;
  size_t end = line.find_first_not_of("-0123456789", start);
  return line.substr(0, start) + std::to_string(value) + line.substr(end);
}

}  // namespace

int traceMain(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "merge") {
    std::cerr << "usage: zps trace merge OUT.json IN.json [IN.json...]" << std::endl;
    return 2;
  }
  std::string out_path = argv[2];
  std::vector<std::string> events;
  for (int i = 3; i < argc; ++i) {
    std::ifstream in(argv[i]);
    if (!in) {
      std::cerr << "zps trace merge: cannot read " << argv[i] << std::endl;
      return 2;
    }
    std::string line;
    long long offset = 0, rtt = -1;
    bool ours = false;
    int pid = i - 2;
    while (std::getline(in, line)) {
      if (line.rfind("\"otherData\"", 0) == 0) {
        ours = true;
        offset = numberAfter(line, "clock_offset_us", 0);
        rtt = numberAfter(line, "clock_rtt_us", -1);
        if (rtt < 0 || std::llabs(offset) <= rtt / 2) offset = 0;
        std::cerr << "zps trace merge: " << argv[i] << ": clock offset " << offset << " us applied (measured "
                  << numberAfter(line, "clock_offset_us", 0) << " us, round trip " << rtt << " us)" << std::endl;
        continue;
      }
      if (!line.empty() && line[0] == ',') line.erase(0, 1);
      if (line.rfind("{\"name\"", 0) != 0) continue;
      if (line.size() >= 1 && line.back() == ',') line.pop_back();
      std::string e = replaceNumber(line, "pid", pid);
      if (e.find("\"ph\":\"X\"") != std::string::npos) e = replaceNumber(e, "ts", numberAfter(e, "ts", 0) + offset);
      events.push_back(e);
    }
    if (!ours) {
      std::cerr << "zps trace merge: " << argv[i] << " is not a zps timeline file" << std::endl;
      return 2;
    }
  }
  std::ofstream out(out_path, std::ios::trunc);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) out << (i ? ",\n" : "") << events[i];
  out << "\n]}\n";
  out.close();
  if (!out) {
    std::cerr << "zps trace merge: cannot write " << out_path << std::endl;
    return 1;
  }
  std::cout << "zps trace merge: " << events.size() << " events from " << argc - 3 << " files into " << out_path
            << std::endl;
  return 0;
}

}  // namespace zps
