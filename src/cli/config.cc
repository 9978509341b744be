#include "quorate/config.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "quorate/member.h"

extern char** environ;

namespace quorate {
namespace {

// A value and where it came from, so an error can point at the flag, variable or file line.
struct Sourced {
  std::string value;
  std::string source;
};

Result<int> ParseInt(const Sourced& v, int min, int max) {
  int n = 0;
  const char* end = v.value.data() + v.value.size();
  auto [ptr, ec] = std::from_chars(v.value.data(), end, n);
  if (v.value.empty() || ec != std::errc() || ptr != end || n < min || n > max) {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not a whole number from {} to {}", v.source, v.value, min, max));
  }
  return n;
}

Result<bool> ParseBool(const Sourced& v) {
  if (v.value == "true" || v.value == "1") return true;
  if (v.value == "false" || v.value == "0") return false;
  return Status::InvalidArgument(fmt::format("{}: '{}' is not true or false", v.source, v.value));
}

Status CheckHostPort(const Sourced& v) {
  size_t colon = v.value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(fmt::format("{}: '{}' is not host:port", v.source, v.value));
  }
  return ParseInt({v.value.substr(colon + 1), v.source}, 0, 65535).status();
}

Status CheckReadable(const Sourced& v) {
  if (v.value.empty() || access(v.value.c_str(), R_OK) == 0) return Status::Ok();
  return Status::InvalidArgument(fmt::format("{}: cannot read file '{}'", v.source, v.value));
}

// YAML scalars and sequences of scalars become the same strings a flag would carry.
Result<std::map<std::string, Sourced>> LoadYaml(const std::string& path) {
  std::map<std::string, Sourced> values;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Status::InvalidArgument(fmt::format("--config: cannot read '{}'", path));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("--config {}: not valid YAML: line {}, column {}: {}", path,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) return values;
  if (!root.IsMap()) {
    return Status::InvalidArgument(fmt::format("--config {}: the top level must be a map of option: value", path));
  }
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    std::string source = fmt::format("--config {}: {} (line {})", path, key, entry.first.Mark().line + 1);
    if (FindOption(key) == nullptr || key == "config") {
      return Status::InvalidArgument(fmt::format("--config {}: unknown option '{}' (line {})", path, key,
                                                 entry.first.Mark().line + 1));
    }
    const YAML::Node& node = entry.second;
    std::string value;
    if (node.IsScalar()) {
      value = node.Scalar();
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!item.IsScalar()) return Status::InvalidArgument(source + ": list items must be plain values");
        if (!value.empty()) value += ',';
        value += item.Scalar();
      }
    } else {
      return Status::InvalidArgument(source + ": must be a value or a list of values");
    }
    values[key] = {value, source};
  }
  return values;
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "default";
  return buf;
}

}  // namespace

const std::vector<OptionDef>& AllOptions() {
  static const std::vector<OptionDef> kOptions = {
      // etcd's flags.
      {"name", "ETCD_NAME", "member name (default: the host name)"},
      {"data-dir", "ETCD_DATA_DIR", "etcd data directory (default: <name>.etcd)"},
      {"initial-advertise-peer-urls", "ETCD_INITIAL_ADVERTISE_PEER_URLS",
       "this member's peer URLs (default: from discovery)"},
      {"advertise-client-urls", "ETCD_ADVERTISE_CLIENT_URLS", "this member's client URLs (default: from discovery)"},
      {"listen-peer-urls", "ETCD_LISTEN_PEER_URLS", "URLs etcd listens on for peers (default: the advertised ones)"},
      {"listen-client-urls", "ETCD_LISTEN_CLIENT_URLS",
       "URLs etcd listens on for clients (default: the advertised ones)"},
      {"initial-cluster", "ETCD_INITIAL_CLUSTER", "static discovery: name=peerURL,..."},
      {"initial-cluster-token", "ETCD_INITIAL_CLUSTER_TOKEN", "cluster token, seeds the IDs", false,
       "etcd-cluster"},
      {"discovery-srv", "ETCD_DISCOVERY_SRV", "DNS SRV discovery: the domain"},
      {"discovery-srv-name", "ETCD_DISCOVERY_SRV_NAME", "DNS SRV discovery: service name suffix"},
      {"cert-file", "ETCD_CERT_FILE", "client TLS certificate"},
      {"key-file", "ETCD_KEY_FILE", "client TLS key"},
      {"trusted-ca-file", "ETCD_TRUSTED_CA_FILE", "client TLS CA bundle"},
      {"client-cert-auth", "ETCD_CLIENT_CERT_AUTH", "require client certificates", true},
      {"peer-cert-file", "ETCD_PEER_CERT_FILE", "peer TLS certificate"},
      {"peer-key-file", "ETCD_PEER_KEY_FILE", "peer TLS key"},
      {"peer-trusted-ca-file", "ETCD_PEER_TRUSTED_CA_FILE", "peer TLS CA bundle"},
      {"peer-client-cert-auth", "ETCD_PEER_CLIENT_CERT_AUTH", "require peer client certificates", true},
      // quorate's own.
      {"config", "QUORATE_CONFIG", "YAML file with any of these options (flag > env > file > default)"},
      {"discovery", "QUORATE_DISCOVERY", "discovery spec: 'provider=NAME key=value ...'"},
      {"bucket", "QUORATE_BUCKET", "store of a sealed member bucket: file:///dir or s3://bucket/prefix?endpoint=URL"},
      {"cluster-size", "QUORATE_CLUSTER_SIZE", "expected member count (static lists imply it)"},
      {"timeout", "QUORATE_TIMEOUT", "how long to wait for peers, e.g. 90s, 5m", false, "5m"},
      {"state-dir", "QUORATE_STATE_DIR", "where the member bucket and etcd config go (default: <data-dir>/quorate)"},
      {"agent-listen", "QUORATE_AGENT_LISTEN", "address of this node's agent", false, "0.0.0.0:2382"},
      {"agent-port", "QUORATE_AGENT_PORT", "port of the peers' agents", false, "2382"},
      {"status-listen", "QUORATE_STATUS_LISTEN", "address of /healthz, /readyz, /metrics", false, "0.0.0.0:2383"},
      {"etcd", "QUORATE_ETCD", "etcd binary to run", false, "etcd"},
      {"log-format", "QUORATE_LOG_FORMAT", "text or json", false, "text"},
      {"log-level", "QUORATE_LOG_LEVEL", "debug, info, warn or error", false, "info"},
      {"write-out", "QUORATE_WRITE_OUT", "output format: simple, table or json", false, "simple"},
      // etcdctl's client flags.
      {"endpoints", "ETCDCTL_ENDPOINTS", "etcd client URLs", false, "http://127.0.0.1:2379"},
      {"cacert", "ETCDCTL_CACERT", "CA bundle to verify etcd"},
      {"cert", "ETCDCTL_CERT", "client certificate for etcd"},
      {"key", "ETCDCTL_KEY", "client key for etcd"},
      {"ignore-not-found", "QUORATE_IGNORE_NOT_FOUND",
       "a MEMBER that is not in the cluster is reported and skipped (exit 0) instead of being bad input, so a "
       "removal that stopped half-way can simply be run again",
       true},
  };
  return kOptions;
}

const OptionDef* FindOption(const std::string& key) {
  for (const auto& opt : AllOptions()) {
    if (key == opt.key) return &opt;
  }
  return nullptr;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

Result<std::chrono::milliseconds> ParseDuration(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not a duration (use e.g. 500ms, 90s, 5m, 1h)", what, text));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 9) return bad();
  long n = std::stol(text.substr(0, digits));
  std::string unit = text.substr(digits);
  std::chrono::milliseconds d;
  if (unit.empty() || unit == "s") {
    d = std::chrono::seconds(n);
  } else if (unit == "ms") {
    d = std::chrono::milliseconds(n);
  } else if (unit == "m") {
    d = std::chrono::minutes(n);
  } else if (unit == "h") {
    d = std::chrono::hours(n);
  } else {
    return bad();
  }
  if (d.count() <= 0) return bad();
  return d;
}

Result<Config> ResolveConfig(const std::vector<std::string>& keys, const FlagValues& flags,
                             const std::map<std::string, std::string>& env) {
  // The config file's path itself follows flag > env.
  std::map<std::string, Sourced> file;
  std::string config_path;
  if (auto it = flags.find("config"); it != flags.end()) {
    config_path = it->second;
  } else if (auto e = env.find("QUORATE_CONFIG"); e != env.end()) {
    config_path = e->second;
  }
  if (!config_path.empty()) {
    auto loaded = LoadYaml(config_path);
    if (!loaded.ok()) return loaded.status();
    file = std::move(*loaded);
  }

  std::map<std::string, Sourced> v;
  for (const auto& key : keys) {
    const OptionDef* opt = FindOption(key);
    if (opt == nullptr) return Status::Internal("command declares unknown option " + key);
    if (auto it = flags.find(key); it != flags.end()) {
      v[key] = {it->second, "--" + key};
    } else if (auto e = opt->env ? env.find(opt->env) : env.end(); e != env.end()) {
      v[key] = {e->second, opt->env};
    } else if (auto f = file.find(key); f != file.end()) {
      v[key] = f->second;
    } else if (opt->default_value != nullptr) {
      v[key] = {opt->default_value, "default of --" + key};
    }
  }
  auto has = [&](const char* key) { return v.count(key) > 0 && !v[key].value.empty(); };
  auto str = [&](const char* key) { return has(key) ? v[key].value : std::string(); };

  Config c;
  c.name = has("name") ? str("name") : Hostname();
  if (c.name.find_first_of("=,/ \t") != std::string::npos) {
    return Status::InvalidArgument(fmt::format("{}: name '{}' must not contain '=', ',', '/' or spaces",
                                               v["name"].source, c.name));
  }
  c.data_dir = has("data-dir") ? str("data-dir") : c.name + ".etcd";
  for (auto [key, target] : std::initializer_list<std::pair<const char*, std::vector<std::string>*>>{
           {"initial-advertise-peer-urls", &c.initial_advertise_peer_urls},
           {"advertise-client-urls", &c.advertise_client_urls},
           {"listen-peer-urls", &c.listen_peer_urls},
           {"listen-client-urls", &c.listen_client_urls},
           {"endpoints", &c.endpoints}}) {
    if (!has(key)) continue;
    std::string text = str(key);
    // etcdctl accepts bare host:port endpoints.
    if (std::string(key) == "endpoints") {
      std::string normalized;
      std::stringstream ss(text);
      for (std::string part; std::getline(ss, part, ',');) {
        if (!normalized.empty()) normalized += ',';
        normalized += part.find("://") == std::string::npos ? "http://" + part : part;
      }
      text = normalized;
    }
    auto urls = ParseUrlList(text, v[key].source);
    if (!urls.ok()) return urls.status();
    *target = std::move(*urls);
  }
  c.initial_cluster = str("initial-cluster");
  c.initial_cluster_token = str("initial-cluster-token");
  if (keys.end() != std::find(keys.begin(), keys.end(), "initial-cluster-token") && c.initial_cluster_token.empty()) {
    return Status::InvalidArgument(fmt::format("{}: the token must not be empty", v["initial-cluster-token"].source));
  }
  c.discovery_srv = str("discovery-srv");
  c.discovery_srv_name = str("discovery-srv-name");
  c.discovery = str("discovery");
  c.bucket = str("bucket");

  struct TlsKeys {
    TlsFiles* tls;
    const char *cert, *key, *ca, *auth;
  };
  for (const TlsKeys& t : {TlsKeys{&c.client_tls, "cert-file", "key-file", "trusted-ca-file", "client-cert-auth"},
                           TlsKeys{&c.peer_tls, "peer-cert-file", "peer-key-file", "peer-trusted-ca-file",
                                   "peer-client-cert-auth"},
                           TlsKeys{&c.etcdctl_tls, "cert", "key", "cacert", nullptr}}) {
    for (const char* key : {t.cert, t.key, t.ca}) {
      if (has(key)) {
        if (Status s = CheckReadable(v[key]); !s.ok()) return s;
      }
    }
    t.tls->cert_file = str(t.cert);
    t.tls->key_file = str(t.key);
    t.tls->trusted_ca_file = str(t.ca);
    if (t.tls->cert_file.empty() != t.tls->key_file.empty()) {
      return Status::InvalidArgument(fmt::format("--{} and --{} go together: give both or neither", t.cert, t.key));
    }
    if (t.auth != nullptr && has(t.auth)) {
      auto b = ParseBool(v[t.auth]);
      if (!b.ok()) return b.status();
      t.tls->client_cert_auth = *b;
    }
  }

  if (has("ignore-not-found")) {
    auto b = ParseBool(v["ignore-not-found"]);
    if (!b.ok()) return b.status();
    c.ignore_not_found = *b;
  }
  if (has("cluster-size")) {
    auto n = ParseInt(v["cluster-size"], 1, 99);
    if (!n.ok()) return n.status();
    c.cluster_size = static_cast<size_t>(*n);
  }
  if (has("timeout")) {
    auto d = ParseDuration(str("timeout"), v["timeout"].source);
    if (!d.ok()) return d.status();
    c.timeout = *d;
  }
  c.state_dir = has("state-dir") ? str("state-dir") : c.data_dir + "/quorate";
  for (const char* key : {"agent-listen", "status-listen"}) {
    if (has(key)) {
      if (Status s = CheckHostPort(v[key]); !s.ok()) return s;
    }
  }
  c.agent_listen = str("agent-listen");
  c.status_listen = str("status-listen");
  if (has("agent-port")) {
    auto port = ParseInt(v["agent-port"], 1, 65535);
    if (!port.ok()) return port.status();
    c.agent_port = *port;
  }
  c.etcd_path = str("etcd");
  c.log_format = str("log-format");
  if (has("log-format") && c.log_format != "text" && c.log_format != "json") {
    return Status::InvalidArgument(fmt::format("{}: '{}' is not text or json", v["log-format"].source, c.log_format));
  }
  c.log_level = str("log-level");
  if (has("log-level") && c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" &&
      c.log_level != "error") {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not debug, info, warn or error", v["log-level"].source, c.log_level));
  }
  if (has("write-out")) {
    const std::string& w = str("write-out");
    if (w == "table") {
      c.output = OutputFormat::kTable;
    } else if (w == "json") {
      c.output = OutputFormat::kJson;
    } else if (w == "simple") {
      c.output = OutputFormat::kSimple;
    } else {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not simple, table or json", v["write-out"].source, w));
    }
  }
  return c;
}

}  // namespace quorate
