// How etcd is started, as init decided: one list of etcd settings rendered three ways, as etcd's
// --config-file YAML, as ETCD_* environment lines (for a plain etcd container or a boot script),
// and as command-line flags (for `run`, which may append the user's extra flags).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "quorate/member.h"

namespace quorate {

struct EtcdLaunch {
  std::vector<std::pair<std::string, std::string>> settings;  // etcd flag name → value
  TlsFiles client_tls;
  TlsFiles peer_tls;
};

// Where etcd listens for URLs it advertises: the same where they name an IP address, 0.0.0.0 on the
// same port where they name a host.
std::vector<std::string> ListenFor(const std::vector<std::string>& advertised);

// `self` carries the peer and client URLs to advertise; listen URLs default to the advertised ones
// when those name an IP address, and to 0.0.0.0 on the same port when they name a host.
EtcdLaunch MakeEtcdLaunch(const Config& config, const Member& self, const std::string& token,
                          const std::string& initial_cluster, const std::string& initial_cluster_state);

std::string RenderEtcdYaml(const EtcdLaunch& launch);
std::string RenderEtcdEnv(const EtcdLaunch& launch);
std::vector<std::string> RenderEtcdFlags(const EtcdLaunch& launch);

// The ETCD_* variables that flags in `argv` shadow (`--name` → ETCD_NAME). etcd 3.4 refuses to start
// when a variable and a flag both set one option, and manifests that run quorate set ETCD_* for it:
// `run` removes these from etcd's environment, so the flags it passes win and the rest pass through.
std::vector<std::string> EtcdVariablesShadowedBy(const std::vector<std::string>& argv);

inline constexpr const char* kEtcdConfigFile = "etcd.conf.yml";
inline constexpr const char* kEtcdEnvFile = "etcd.env";

}  // namespace quorate
