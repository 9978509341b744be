#include "node/etcd_env.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "etcd/etcd_config.h"
#include "quorate/log.h"

extern char** environ;

namespace quorate {
namespace {

// What a Go program reads from its environment besides its own settings.
bool IsProcessBasic(std::string_view name) {
  static const std::set<std::string_view> kBasics = {"PATH",    "HOME",       "LANG", "TZ",
                                                     "GODEBUG", "GOMAXPROCS", "GOGC", "GOMEMLIMIT"};
  return kBasics.count(name) > 0 || name.rfind("LC_", 0) == 0;
}

// Bootstrap settings etcd would combine with the ones quorate decided: discovery (v2 and v3, SRV,
// proxy), a cluster list or state of the operator's, a forced new cluster, or a config file that
// makes etcd ignore quorate's flags altogether.
bool FightsQuorate(std::string_view name) {
  for (std::string_view prefix : {"ETCD_DISCOVERY", "ETCD_INITIAL_CLUSTER"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return name == "ETCD_FORCE_NEW_CLUSTER" || name == "ETCD_CONFIG_FILE";
}

}  // namespace

EtcdEnvironment SelectEtcdEnvironment(const std::vector<std::string>& argv, const std::vector<std::string>& parent) {
  const std::vector<std::string> shadowed = EtcdVariablesShadowedBy(argv);
  EtcdEnvironment out;
  for (const std::string& entry : parent) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    if (name.rfind("ETCD_", 0) == 0) {
      bool passed = !FightsQuorate(name) && std::find(shadowed.begin(), shadowed.end(), name) == shadowed.end();
      if (!passed) {
        out.dropped.push_back(name);
        continue;
      }
    } else if (!IsProcessBasic(name)) {
      continue;
    }
    out.env.emplace_back(std::move(name), entry.substr(eq + 1));
  }
  std::sort(out.dropped.begin(), out.dropped.end());
  out.dropped.erase(std::unique(out.dropped.begin(), out.dropped.end()), out.dropped.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> ProcessBasicsEnvironment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry = *e;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = entry.substr(0, eq);
    if (IsProcessBasic(name) || name == "ETCD_UNSUPPORTED_ARCH") {
      env.emplace_back(std::string(name), std::string(entry.substr(eq + 1)));
    }
  }
  return env;
}

std::vector<std::pair<std::string, std::string>> EtcdEnvironmentFor(const std::vector<std::string>& argv) {
  std::vector<std::string> parent;
  for (char** e = environ; *e != nullptr; ++e) parent.emplace_back(*e);
  EtcdEnvironment selected = SelectEtcdEnvironment(argv, parent);
  // Said once, not at every restart: the environment does not change, the flags seldom do.
  static std::mutex mu;
  static std::vector<std::string> said;
  std::lock_guard lock(mu);
  if (!selected.dropped.empty() && selected.dropped != said) {
    spdlog::info(
        "etcd is started without {} from quorate's environment: quorate read them or decided the "
        "bootstrap itself, and passes etcd flags instead",
        fmt::join(selected.dropped, ", "));
  }
  said = selected.dropped;
  return std::move(selected.env);
}

}  // namespace quorate
