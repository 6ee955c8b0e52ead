// Shared by tests/unit and tests/cuda: the worker's slice logic (worker.cc placeForNode) in its
// simplest form, pieces of `piece` bytes with piece i owned by local rank i % n.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/local_collectives.h"

namespace zps::kernels {

inline std::vector<LocalPiece> cut(size_t bytes, size_t piece, int n) {
  std::vector<LocalPiece> pieces;
  for (size_t offset = 0, i = 0; offset < bytes; offset += piece, ++i)
    pieces.push_back(LocalPiece{offset, std::min(piece, bytes - offset), static_cast<int>(i % n)});
  return pieces;
}

}  // namespace zps::kernels
