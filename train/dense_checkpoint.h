// The dense half of a `zps train` checkpoint (the servers write the tables' halves): the weights and
// optimizer state as of a step, in dense-step-<s>.ckpt (ps/common/checkpoint.h's file format), and the
// pointer file `latest` naming the newest. Written by process 0 of a job only; plain functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zps/status.h"

namespace zps::train {

struct DenseCheckpoint {
  uint64_t step = 0;      // global steps done
  uint64_t opt_step = 0;  // optimizer updates applied
  std::vector<float> params;
  std::vector<float> state;
};

// Writes dense-step-<step>.ckpt into `dir` (its header records the folder's `job_id`), then
// `latest`, then removes the dense files of older steps.
Status writeDenseCheckpoint(const std::string& dir, uint64_t job_id, const DenseCheckpoint& c);
// Reads `latest` and the dense file it names, checked against the folder's job id and the model's
// sizes. kNotFound only when there is no `latest` (nothing to resume from); a `latest` that cannot be
// read, or names a file that is missing, corrupt or of another job or step, is kInvalidArgument
// naming the file: starting over from step 0 would overwrite the folder.
StatusOr<DenseCheckpoint> readDenseCheckpoint(const std::string& dir, uint64_t job_id, size_t num_params,
                                              size_t num_state);

}  // namespace zps::train
