// Everything a command can be told, resolved from flags, ETCD_*/QUORATE_* environment variables and
// a YAML --config file, in that order of precedence, then defaults. Every value is validated here,
// so the rest of quorate never sees malformed input; errors name where the bad value came from.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

enum class OutputFormat { kTable, kJson, kSimple };

struct Config {
  // etcd's own flags, with etcd's names and defaults.
  std::string name;
  std::string data_dir;
  std::vector<std::string> initial_advertise_peer_urls;
  std::vector<std::string> advertise_client_urls;
  std::vector<std::string> listen_peer_urls;
  std::vector<std::string> listen_client_urls;
  std::string initial_cluster;
  std::string initial_cluster_token;
  std::string discovery_srv;
  std::string discovery_srv_name;
  TlsFiles client_tls;  // --cert-file, --key-file, --trusted-ca-file, --client-cert-auth
  TlsFiles peer_tls;    // --peer-cert-file, ...

  // quorate's own.
  std::string discovery;  // provider spec
  std::string bucket;     // store URL of a sealed member bucket (cluster-init writes, init reads)
  std::optional<size_t> cluster_size;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string state_dir;  // default <data-dir>/quorate
  std::string agent_listen;
  int agent_port = 2382;
  std::string status_listen;
  std::string etcd_path;
  std::string log_format;  // text | json
  std::string log_level;
  OutputFormat output = OutputFormat::kSimple;

  // etcdctl-like client flags for commands that talk to a running cluster.
  std::vector<std::string> endpoints;
  TlsFiles etcdctl_tls;  // --cacert, --cert, --key
  bool ignore_not_found = false;  // member remove: skip a MEMBER the cluster does not list
};

// A command's options: which keys it accepts. Keys are flag names without dashes ("data-dir"),
// also the YAML keys; the environment variable is derived (ETCD_DATA_DIR, QUORATE_CLUSTER_SIZE).
struct OptionDef {
  const char* key;
  const char* env;  // full variable name, or nullptr for none
  const char* help;
  bool is_bool = false;
  const char* default_value = nullptr;
};
const std::vector<OptionDef>& AllOptions();
const OptionDef* FindOption(const std::string& key);

// The raw strings given on the command line, keyed by option key.
using FlagValues = std::map<std::string, std::string>;

// Resolves every option of `keys` from flags > environment > YAML file > default, then validates.
// `env` is injectable so tests do not depend on the process environment.
Result<Config> ResolveConfig(const std::vector<std::string>& keys, const FlagValues& flags,
                             const std::map<std::string, std::string>& env);
std::map<std::string, std::string> ProcessEnvironment();

Result<std::chrono::milliseconds> ParseDuration(const std::string& text, const std::string& what);

}  // namespace quorate
