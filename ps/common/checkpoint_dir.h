// The checkpoint folder (ZPS_CHECKPOINT_DIR) as a whole: its job id, the `latest` pointer and the
// retention rule. Plain functions, called by the servers (table shards) and by process 0 of the
// workers (the dense model and `latest`); every node of a job sees the same folder.
//
// The job id (file `job-id`, 16 hex digits) is minted at random by the first node that finds the
// folder without one, and every checkpoint file written into the folder records it, so that a file
// copied in from another job's folder is refused by name. Retention never removes a file of the step
// `latest` names or of any newer step: only files of older steps go.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "zps/status.h"

namespace zps {

// Creates `dir`, checks that this process can create files in it (a probe file, written, synced and
// removed), and returns the folder's job id (minting it when the folder has none). kInvalidArgument
// naming the folder and the reason otherwise: callers exit 2 before the first step.
StatusOr<uint64_t> prepareCheckpointDir(const std::string& dir);

// The step `dir/latest` names. kNotFound: there is no `latest` (a job that starts afresh);
// kInvalidArgument: it exists but cannot be read or holds no step.
StatusOr<uint64_t> readLatestStep(const std::string& dir);
Status writeLatestStep(const std::string& dir, uint64_t step);

// Removes the files of `dir` for which `step_of(file name)` gives a step older than the step `latest`
// names; nothing when `latest` is missing or unreadable. Returns how many it removed.
size_t removeStepsBeforeLatest(const std::string& dir,
                               const std::function<std::optional<uint64_t>(const std::string&)>& step_of);
// The same with the step given: removes the files of steps older than `keep_from` (0: none).
size_t removeStepsBefore(const std::string& dir, uint64_t keep_from,
                         const std::function<std::optional<uint64_t>(const std::string&)>& step_of);

// Parses "<prefix><step><suffix>" (the step in decimal digits only); nullopt for other names.
std::optional<uint64_t> stepInFileName(const std::string& name, const std::string& prefix, const std::string& suffix);

}  // namespace zps
