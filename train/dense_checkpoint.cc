#include "train/dense_checkpoint.h"

#include <algorithm>

#include "ps/common/checkpoint.h"
#include "ps/common/checkpoint_dir.h"

namespace zps::train {
namespace {

std::string densePath(const std::string& dir, uint64_t step) {
  return dir + "/dense-step-" + std::to_string(step) + ".ckpt";
}

CheckpointShape denseShape(uint64_t step, uint64_t job_id) {
  CheckpointShape s;
  s.kind = CheckpointKind::kDenseModel;
  s.step = step;
  s.server_rank = kNoServer;
  s.num_servers = 0;  // the dense model does not depend on the servers
  s.job_id = job_id;
  return s;
}

}  // namespace

Status writeDenseCheckpoint(const std::string& dir, uint64_t job_id, const DenseCheckpoint& c) {
  PayloadWriter w;
  w.put(c.step);
  w.put(c.opt_step);
  w.put(static_cast<uint64_t>(c.params.size()));
  w.putBytes(c.params.data(), c.params.size() * sizeof(float));
  w.put(static_cast<uint64_t>(c.state.size()));
  w.putBytes(c.state.data(), c.state.size() * sizeof(float));
  ZPS_RETURN_IF_ERROR(writeCheckpointFile(densePath(dir, c.step), denseShape(c.step, job_id), w.take()));
  ZPS_RETURN_IF_ERROR(writeLatestStep(dir, c.step));
  removeStepsBeforeLatest(dir, [](const std::string& name) { return stepInFileName(name, "dense-step-", ".ckpt"); });
  return Status::OK();
}

StatusOr<DenseCheckpoint> readDenseCheckpoint(const std::string& dir, uint64_t job_id, size_t num_params,
                                              size_t num_state) {
  auto latest = readLatestStep(dir);
  if (!latest.ok()) {
    if (latest.status().code() == StatusCode::kNotFound) return NotFound("no checkpoint in " + dir);
    return InvalidArgument(latest.status().message() + "; fix or remove it (removing it starts the job from step 0)");
  }
  const uint64_t step = *latest;
  const std::string path = densePath(dir, step);
  // A file of another model is refused below with its sizes; only a huge one is refused unread.
  const uint64_t max_payload =
      std::max<uint64_t>(3 * sizeof(uint64_t) + (uint64_t{num_params} + num_state) * sizeof(float), uint64_t{1} << 30);
  auto file = readCheckpointFile(path, denseShape(step, job_id), max_payload);
  if (!file.ok()) {
    std::string why = file.status().message();
    if (file.status().code() == StatusCode::kNotFound)
      why = dir + "/latest names step " + std::to_string(step) + " but " + path +
            " does not exist; refusing to start over from step 0 (that would overwrite the folder): restore the "
            "file or remove `latest`";
    return InvalidArgument(why);
  }
  DenseCheckpoint c;
  PayloadReader r(file->payload);
  uint64_t n = 0, m = 0;
  std::string bad = "checkpoint " + path + " does not fit this model: ";
  if (!r.get(&c.step) || !r.get(&c.opt_step) || !r.get(&n)) return InvalidArgument(bad + "truncated");
  if (n != num_params)
    return InvalidArgument(bad + "it has " + std::to_string(n) + " weights, the model " + std::to_string(num_params));
  c.params.resize(n);
  if (!r.getBytes(c.params.data(), n * sizeof(float)) || !r.get(&m) || m != num_state)
    return InvalidArgument(bad + "optimizer state does not match (another --optimizer?)");
  c.state.resize(m);
  if (!r.getBytes(c.state.data(), m * sizeof(float)) || r.remaining() != 0)
    return InvalidArgument(bad + "trailing bytes");
  if (c.step != step) return InvalidArgument(bad + "its step differs from `latest`");
  return c;
}

}  // namespace zps::train
