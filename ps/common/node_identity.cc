#include "ps/common/node_identity.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ps/common/settings.h"

namespace zps {

const char* roleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

Status resolveRequestedRank(const EnvLookup& env, Role role, int num_nodes, const std::string& hostname, int* rank,
                            std::string* source) {
  *rank = -1;
  *source = "arrival order";
  if (role == Role::kScheduler) return Status::OK();
  const Setting& setting = role == Role::kWorker ? settings::kWorkerRank : settings::kServerId;
  // As for every other setting, a flag given on the command line wins over the environment.
  if (auto flag = setting.flag ? flagValue(std::string(setting.name)) : std::nullopt) {
    const std::string name = "--" + std::string(setting.name);
    ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, *flag, setting.min, setting.max,
                                                   std::string(setting.hint) + ", or -1 for arrival order"));
    if (n >= 0) {
      *rank = static_cast<int>(n);
      *source = name;
      return Status::OK();
    }
  }
  // The environment's ranks are explicit: -1 is not one of them.
  for (std::string_view name : setting.env) {
    auto v = env(std::string(name));
    if (!v || trimSpace(*v).empty()) continue;
    ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(std::string(name), *v, 0, setting.max, std::string(setting.hint)));
    *rank = static_cast<int>(n);
    *source = name;
    return Status::OK();
  }
  if (role == Role::kWorker) {
    // A pod of a StatefulSet, MXJob or Volcano job is named <job>-<role>-<index>.
    size_t dash = hostname.rfind('-');
    if (dash != std::string::npos && dash + 1 < hostname.size() && dash + 1 + 7 > hostname.size()) {
      std::string digits = hostname.substr(dash + 1);
      if (digits.find_first_not_of("0123456789") == std::string::npos) {
        int n = std::stoi(digits);
        if (n < num_nodes) {
          *rank = n;
          *source = "hostname " + hostname;
        } else {
          LOG(WARNING) << "hostname " << hostname << " ends in -" << n << ", which is not a worker rank below "
                       << num_nodes << "; using arrival order";
        }
      }
    }
  }
  return Status::OK();
}

StatusOr<std::string> hostName(const EnvLookup& env) {
  ZPS_ASSIGN_OR_RETURN(std::string name, readText(env, settings::kHostname));
  if (!name.empty()) return name;
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) == 0) return std::string(buf);
  return std::string();
}

StatusOr<std::string> interfaceAddress(const std::string& interface) {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Unavailable("getifaddrs failed: " + std::string(strerror(errno)));
  std::string found, names;
  for (auto* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!names.empty()) names += ", ";
    names += it->ifa_name;
    if (interface == it->ifa_name && found.empty()) {
      char buf[INET_ADDRSTRLEN];
      auto* sin = reinterpret_cast<struct sockaddr_in*>(it->ifa_addr);
      inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
      found = buf;
    }
  }
  freeifaddrs(list);
  if (found.empty())
    return InvalidArgument("DMLC_INTERFACE=" + interface + " has no IPv4 address; interfaces with one: " + names);
  return found;
}

std::string detectHostAddress() {
  struct ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (auto* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
    found = buf;
    break;
  }
  freeifaddrs(list);
  return found;
}

StatusOr<std::string> bindHostFrom(const EnvLookup& env) {
  ZPS_ASSIGN_OR_RETURN(std::string bind, readText(env, settings::kBindHost));
  if (!bind.empty()) return bind;
  ZPS_ASSIGN_OR_RETURN(std::string host, readText(env, settings::kNodeHost));
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1) return host;
  return std::string("0.0.0.0");
}

StatusOr<std::string> advertisedHost(const EnvLookup& env) {
  ZPS_ASSIGN_OR_RETURN(std::string host, readText(env, settings::kNodeHost));
  if (!host.empty()) return host;
  ZPS_ASSIGN_OR_RETURN(std::string interface, readText(env, settings::kInterface));
  if (!interface.empty()) return interfaceAddress(interface);
  return detectHostAddress();
}

}  // namespace zps
