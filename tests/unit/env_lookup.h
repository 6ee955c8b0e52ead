// An EnvLookup over a map, so config tests choose exactly the environment a process would see.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ps/common/config.h"

namespace zps::testing {

using Env = std::map<std::string, std::string>;

inline EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace zps::testing
