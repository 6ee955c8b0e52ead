#include "scheduler/job_rebuild.h"

#include <algorithm>

namespace zps {

bool JobRebuild::note(const pb::Register& reg) {
  const bool first = !active_;
  active_ = true;
  if (reg.generation() < generation_) return first;
  if (reg.generation() > generation_) released_ = {};
  generation_ = reg.generation();
  // The codec allows at most one entry per group.
  for (int g = 0; g < reg.barriers_released_size() && g < static_cast<int>(released_.size()); ++g)
    released_[g] = std::max(released_[g], reg.barriers_released(g));
  return first;
}

}  // namespace zps
