// Picks a small corpus: the inputs that together reach every edge the given inputs reach, chosen
// greedily (the input adding the most edges not yet reached, the smaller one on ties), at most
// MAX_FILES of them. libFuzzer's -merge keeps any input that adds a feature, smallest first, which
// leaves hundreds of one-edge inputs; a committed corpus should stay small enough to read and to
// replay in CI.
//
// Built in the fuzz build only (the zps libraries there carry -fsanitize=fuzzer-no-link, so their
// edges are counted): zps_fuzz_minimize_<target> MAX_FILES INPUT_DIR... prints "keep PATH" per
// chosen input. Files named seed-* and crash-* are always kept. run-fuzzers.sh (FUZZ_MERGE=1)
// calls it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

struct Counters {
  uint8_t* start;
  uint8_t* stop;
};
std::vector<Counters>& counterRanges() {
  static std::vector<Counters> ranges;
  return ranges;
}

struct Input {
  std::filesystem::path path;
  size_t size = 0;
  std::vector<uint32_t> edges;  // indices of the counters this input hit, sorted
  bool forced = false;
};

std::vector<uint32_t> runAndCollect(const std::vector<uint8_t>& bytes) {
  for (const auto& r : counterRanges()) std::memset(r.start, 0, r.stop - r.start);
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  std::vector<uint32_t> edges;
  uint32_t base = 0;
  for (const auto& r : counterRanges()) {
    for (uint8_t* p = r.start; p < r.stop; ++p) {
      if (*p != 0) edges.push_back(base + static_cast<uint32_t>(p - r.start));
    }
    base += static_cast<uint32_t>(r.stop - r.start);
  }
  return edges;
}

bool startsWith(const std::string& s, const char* prefix) { return s.compare(0, std::strlen(prefix), prefix) == 0; }

}  // namespace

// SanitizerCoverage hands each instrumented module's counters to this hook at start-up (the
// sanitizer runtimes only define a weak default; libFuzzer, which defines it too, is not linked).
// Every instrumented file's constructor calls it, with the same bounds within one module.
extern "C" void __sanitizer_cov_8bit_counters_init(uint8_t* start, uint8_t* stop) {
  for (const auto& r : counterRanges()) {
    if (r.start == start) return;
  }
  if (start < stop) counterRanges().push_back({start, stop});
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MAX_FILES INPUT_DIR...\n", argv[0]);
    return 2;
  }
  const size_t max_files = std::strtoul(argv[1], nullptr, 10);
  if (counterRanges().empty()) {
    std::fprintf(stderr, "no coverage counters: build with -fsanitize=fuzzer-no-link\n");
    return 2;
  }
  std::vector<Input> inputs;
  std::vector<std::string> names;  // a name seen in an earlier folder is the same input
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(argv[i], ec)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().filename().string();
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      names.push_back(name);
      Input in;
      in.path = entry.path();
      in.forced = startsWith(name, "seed-") || startsWith(name, "crash-");
      inputs.push_back(std::move(in));
    }
  }
  std::sort(inputs.begin(), inputs.end(), [](const Input& a, const Input& b) { return a.path < b.path; });
  for (Input& in : inputs) {
    std::ifstream f(in.path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    in.size = bytes.size();
    // Twice: the first run of a process also covers one-time set-up that no input owns.
    runAndCollect(bytes);
    in.edges = runAndCollect(bytes);
  }

  std::vector<bool> all;
  for (const Input& in : inputs) {
    for (uint32_t e : in.edges) {
      if (e >= all.size()) all.resize(e + 1, false);
      all[e] = true;
    }
  }
  std::vector<bool> reached;
  auto add = [&](const Input& in) {
    for (uint32_t e : in.edges) {
      if (e >= reached.size()) reached.resize(e + 1, false);
      reached[e] = true;
    }
    std::printf("keep %s\n", in.path.c_str());
  };
  auto gain = [&](const Input& in) {
    size_t n = 0;
    for (uint32_t e : in.edges) n += e >= reached.size() || !reached[e];
    return n;
  };
  size_t kept = 0;
  std::vector<bool> used(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].forced) continue;
    add(inputs[i]);
    used[i] = true;
    ++kept;
  }
  while (kept < max_files) {
    size_t best = inputs.size(), best_gain = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (used[i]) continue;
      const size_t g = gain(inputs[i]);
      if (g > best_gain || (g == best_gain && g > 0 && inputs[i].size < inputs[best].size)) {
        best = i;
        best_gain = g;
      }
    }
    if (best_gain == 0) break;
    add(inputs[best]);
    used[best] = true;
    ++kept;
  }
  size_t total = 0, possible = 0;
  for (bool r : reached) total += r;
  for (bool r : all) possible += r;
  std::fprintf(stderr, "minimize: kept %zu of %zu inputs, reaching %zu of their %zu edges\n", kept, inputs.size(),
               total, possible);
  return 0;
}
