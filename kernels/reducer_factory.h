// Engine selection for the server (ZPS_SERVER_ENGINE=auto|cpu|cuda): which Reducer its engine
// threads sum with. Plain C++, so server/ needs no CUDA headers whether or not CUDA was built.
#pragma once

#include <memory>
#include <string>

#include "kernels/reducer.h"

namespace zps::kernels {

enum class ReducerKind { kCpu, kCuda };

struct ReducerChoice {
  ReducerKind kind = ReducerKind::kCpu;
  // Why "auto" chose what it did, for an INFO line; empty for an explicit choice.
  std::string note;
};

// Resolves an engine name. "cpu" always works. "auto" is CUDA when a device can run this build's
// kernels, else CPU with a note saying why. "cuda" without a usable device is kUnavailable (the
// server exits 2: the user asked for something this machine cannot do). Any other name is
// kInvalidArgument.
StatusOr<ReducerChoice> chooseReducer(const std::string& engine);

// One reducer per engine thread. CUDA reducers of different engine threads own different streams,
// so copies and sums of keys on different engines overlap; `engine_index` also spreads engines
// over the visible devices round-robin.
StatusOr<std::unique_ptr<Reducer>> makeReducer(ReducerKind kind, int engine_index);

}  // namespace zps::kernels
