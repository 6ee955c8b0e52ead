// Replays a committed corpus through a fuzz target without libFuzzer, so that every ordinary build
// (gcc, in CI) runs each input that ever mattered: the seeds and the inputs that once crashed.
//
// Usage: zps_fuzz_replay_<target> PATH...   (a PATH is a corpus folder or one input file)
// Exits 1 when no input was found at all, so that a misplaced or emptied corpus cannot pass
// silently. A crash, sanitizer report or failed property aborts the process, as under libFuzzer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> readAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  size_t total = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    std::error_code ec;
    std::vector<std::filesystem::path> inputs;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      inputs.push_back(arg);
    }
    if (ec) {
      std::fprintf(stderr, "replay: cannot read %s: %s\n", argv[i], ec.message().c_str());
      return 1;
    }
    // A fixed order, so that a failure names the same input on every machine.
    std::sort(inputs.begin(), inputs.end());
    for (const auto& path : inputs) {
      std::vector<uint8_t> bytes = readAll(path);
      // Printed before the call: when an input crashes, the last line names it.
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
      // A copy of exactly the input's size, so ASan (in sanitizer builds) sees reads past its end.
      std::vector<uint8_t> exact(bytes.begin(), bytes.end());
      LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    }
    std::printf("replay: %zu inputs from %s\n", inputs.size(), argv[i]);
    total += inputs.size();
  }
  if (total == 0) {
    std::fprintf(stderr, "replay: no inputs found; a corpus must not be empty\n");
    return 1;
  }
  std::printf("replay: %zu inputs replayed, no failures\n", total);
  return 0;
}
