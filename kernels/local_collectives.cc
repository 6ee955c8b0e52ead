#include "kernels/local_collectives.h"

namespace zps::kernels {

std::vector<CollectiveStep> planLocalCollectives(const std::vector<LocalPiece>& pieces, int size) {
  std::vector<CollectiveStep> steps;
  const size_t n = pieces.size();
  const size_t ranks = size > 0 ? static_cast<size_t>(size) : 1;
  for (size_t i = 0; i < n;) {
    const LocalPiece& first = pieces[i];
    bool whole = i + ranks <= n;
    for (size_t j = 0; whole && j < ranks; ++j) {
      const LocalPiece& p = pieces[i + j];
      whole = p.owner == static_cast<int>(j) && p.bytes == first.bytes && p.offset == first.offset + j * first.bytes;
    }
    if (whole) {
      steps.push_back(CollectiveStep{true, first.offset, first.bytes, 0});
      i += ranks;
    } else {
      steps.push_back(CollectiveStep{false, first.offset, first.bytes, first.owner});
      ++i;
    }
  }
  return steps;
}

}  // namespace zps::kernels
