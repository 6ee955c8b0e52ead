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

// Writes dense-step-<step>.ckpt into `dir`, then `latest`; keeps the two newest dense files.
Status writeDenseCheckpoint(const std::string& dir, const DenseCheckpoint& c);
// Reads `latest` and the dense file it names, checked against the model's sizes. NotFound when there
// is no checkpoint to resume from.
StatusOr<DenseCheckpoint> readDenseCheckpoint(const std::string& dir, size_t num_params, size_t num_state);

}  // namespace zps::train
