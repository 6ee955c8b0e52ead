#include "worker/train/dense_checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ps/common/checkpoint.h"
#include "ps/common/config.h"

namespace zps::train {
namespace {

std::string densePath(const std::string& dir, uint64_t step) {
  return dir + "/dense-step-" + std::to_string(step) + ".ckpt";
}

}  // namespace

Status writeDenseCheckpoint(const std::string& dir, const DenseCheckpoint& c) {
  PayloadWriter w;
  w.put(c.step);
  w.put(c.opt_step);
  w.put(static_cast<uint64_t>(c.params.size()));
  w.putBytes(c.params.data(), c.params.size() * sizeof(float));
  w.put(static_cast<uint64_t>(c.state.size()));
  w.putBytes(c.state.data(), c.state.size() * sizeof(float));
  ZPS_RETURN_IF_ERROR(writeCheckpointFile(densePath(dir, c.step), CheckpointKind::kDenseModel, c.step, w.take()));
  ZPS_RETURN_IF_ERROR(writeFileAtomically(dir + "/latest", std::to_string(c.step) + "\n"));
  // Keep the two newest dense files; `latest` names the newest.
  std::error_code ec;
  std::vector<uint64_t> steps;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    if (f.rfind("dense-step-", 0) == 0 && f.size() > 16 && f.substr(f.size() - 5) == ".ckpt")
      steps.push_back(std::strtoull(f.c_str() + 11, nullptr, 10));
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + 2 < steps.size(); ++i) std::filesystem::remove(densePath(dir, steps[i]), ec);
  return Status::OK();
}

StatusOr<DenseCheckpoint> readDenseCheckpoint(const std::string& dir, size_t num_params, size_t num_state) {
  std::ifstream in(dir + "/latest");
  if (!in) return NotFound("no checkpoint in " + dir);
  std::string text;
  std::getline(in, text);
  ZPS_ASSIGN_OR_RETURN(long long step,
                       parseInteger(dir + "/latest", text, 1, int64_t{1} << 50, "a step number written by zps"));
  ZPS_ASSIGN_OR_RETURN(CheckpointFile f,
                       readCheckpointFile(densePath(dir, static_cast<uint64_t>(step)), CheckpointKind::kDenseModel));
  DenseCheckpoint c;
  PayloadReader r(f.payload);
  uint64_t n = 0, m = 0;
  std::string bad = "checkpoint " + densePath(dir, step) + " does not fit this model: ";
  if (!r.get(&c.step) || !r.get(&c.opt_step) || !r.get(&n)) return InvalidArgument(bad + "truncated");
  if (n != num_params)
    return InvalidArgument(bad + "it has " + std::to_string(n) + " weights, the model " + std::to_string(num_params));
  c.params.resize(n);
  if (!r.getBytes(c.params.data(), n * sizeof(float)) || !r.get(&m) || m != num_state)
    return InvalidArgument(bad + "optimizer state does not match (another --optimizer?)");
  c.state.resize(m);
  if (!r.getBytes(c.state.data(), m * sizeof(float)) || r.remaining() != 0)
    return InvalidArgument(bad + "trailing bytes");
  if (c.step != static_cast<uint64_t>(step)) return InvalidArgument(bad + "its step differs from `latest`");
  return c;
}

}  // namespace zps::train
