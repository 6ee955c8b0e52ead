#include "tools/launch_checks.h"

#include <cstdlib>

#include "ps/common/config.h"
#include "ps/common/settings.h"
#include "ps/node/auth.h"
#include "ps/node/observability.h"

namespace zps {

std::optional<std::pair<std::string, std::string>> freshJobToken() {
  const EnvLookup env = processEnv();
  if (settingText(env, settings::kAuthToken) || settingText(env, settings::kAuthTokenFile)) return std::nullopt;
  const std::string token = hexOf(Authenticator::newNonce() + Authenticator::newNonce());
  return std::make_pair(std::string("ZPS_AUTH_TOKEN"), token);
}

Status checkRoleSettings(const EnvList& common) {
  for (Role role : {Role::kScheduler, Role::kServer, Role::kWorker}) {
    EnvList overrides = common;
    overrides.emplace_back("DMLC_ROLE", roleName(role));
    EnvLookup env = [&overrides](const std::string& name) -> std::optional<std::string> {
      for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
        if (it->first == name) return it->second;
      const char* v = std::getenv(name.c_str());
      return v == nullptr ? std::nullopt : std::optional<std::string>(v);
    };
    auto config = loadConfig(env, role);
    if (!config.ok()) return InvalidArgument(std::string(roleName(role)) + ": " + config.status().message());
    // A token file is left to the roles: it may be a FIFO that is read once.
    auto auth = config->auth_token_file.empty() ? Authenticator::fromConfig(*config) : Authenticator::withToken("");
    if (!auth.ok()) return InvalidArgument(std::string(roleName(role)) + ": " + auth.status().message());
    if (role == Role::kScheduler) {
      auto obs = loadObsConfig(env);
      if (!obs.ok()) return InvalidArgument(obs.status().message());
    }
  }
  return Status::OK();
}

}  // namespace zps
