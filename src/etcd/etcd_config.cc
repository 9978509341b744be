#include "etcd/etcd_config.h"

#include <arpa/inet.h>

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

namespace quorate {
namespace {

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

// etcd refuses host names in listen URLs; a name is what a StatefulSet advertises.
std::vector<std::string> ListenFor(const std::vector<std::string>& advertised) {
  std::vector<std::string> out;
  for (const auto& text : advertised) {
    auto url = ParseUrl(text);
    if (!url.ok()) continue;  // advertised URLs were validated where they came in
    out.push_back(IsIpLiteral(url->host) ? text : fmt::format("{}://0.0.0.0:{}", url->scheme, url->port));
  }
  return out;
}

namespace {

// Settings etcd's config file takes as YAML booleans, not strings.
const std::set<std::string> kBooleanSettings = {"pre-vote"};

std::string EnvName(const std::string& flag) {
  std::string env = "ETCD_";
  for (char c : flag) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

std::vector<std::pair<std::string, std::string>> TlsSettings(const TlsFiles& tls, const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!tls.cert_file.empty()) out.emplace_back(prefix + "cert-file", tls.cert_file);
  if (!tls.key_file.empty()) out.emplace_back(prefix + "key-file", tls.key_file);
  if (!tls.trusted_ca_file.empty()) out.emplace_back(prefix + "trusted-ca-file", tls.trusted_ca_file);
  if (tls.client_cert_auth) out.emplace_back(prefix + "client-cert-auth", "true");
  return out;
}

std::vector<std::pair<std::string, std::string>> AllSettings(const EtcdLaunch& launch) {
  auto all = launch.settings;
  for (auto& kv : TlsSettings(launch.client_tls, "")) all.push_back(kv);
  for (auto& kv : TlsSettings(launch.peer_tls, "peer-")) all.push_back(kv);
  return all;
}

}  // namespace

EtcdLaunch MakeEtcdLaunch(const Config& config, const Member& self, const std::string& token,
                          const std::string& initial_cluster, const std::string& initial_cluster_state) {
  EtcdLaunch launch;
  auto join = [](const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ",")); };
  const auto& listen_peer = config.listen_peer_urls.empty() ? ListenFor(self.peer_urls) : config.listen_peer_urls;
  const auto& listen_client =
      config.listen_client_urls.empty() ? ListenFor(self.client_urls) : config.listen_client_urls;
  launch.settings = {
      {"name", self.name},
      {"data-dir", config.data_dir},
      {"initial-advertise-peer-urls", join(self.peer_urls)},
      {"advertise-client-urls", join(self.client_urls)},
      {"listen-peer-urls", join(listen_peer)},
      {"listen-client-urls", join(listen_client)},
      {"initial-cluster", initial_cluster},
      {"initial-cluster-token", token},
      {"initial-cluster-state", initial_cluster_state},
      // Raft's pre-vote (3.5's default, off on 3.4): a member that campaigns without reaching a
      // quorum no longer raises its term. Without it, a leader stopping while its peers are gone
      // (every node cut at once) campaigned alone for seconds, came back at a term the others never
      // saw, and deposed the first leader they elected: a second election, 1 to 2 s later.
      {"pre-vote", "true"},
  };
  launch.client_tls = config.client_tls;
  launch.peer_tls = config.peer_tls;
  return launch;
}

std::string RenderEtcdYaml(const EtcdLaunch& launch) {
  YAML::Emitter out;
  out << YAML::Comment("Written by quorate init: etcd --config-file <this file>") << YAML::BeginMap;
  for (const auto& [key, value] : launch.settings) {
    out << YAML::Key << key << YAML::Value;
    if (kBooleanSettings.contains(key)) {
      out << (value == "true");
    } else {
      out << value;
    }
  }
  // etcd 3.4 turns its gRPC gateway (the /v3 HTTP API) off when started from a file, unlike from
  // flags or the environment: keep the three ways alike.
  out << YAML::Key << "enable-grpc-gateway" << YAML::Value << true;
  for (const auto& [section, tls] : {std::pair{"client-transport-security", &launch.client_tls},
                                     std::pair{"peer-transport-security", &launch.peer_tls}}) {
    if (!tls->enabled() && !tls->client_cert_auth) continue;
    out << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& [key, value] : TlsSettings(*tls, "")) {
      if (key == "client-cert-auth") {
        out << YAML::Key << key << YAML::Value << true;
      } else {
        out << YAML::Key << key << YAML::Value << value;
      }
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

// A value in double quotes with \ " $ and ` escaped: read back the same by a POSIX shell
// (`set -a; . etcd.env`) and by systemd's EnvironmentFile=, and no value can end its line early or
// start another variable, whatever it holds.
std::string EnvQuoted(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string RenderEtcdEnv(const EtcdLaunch& launch) {
  std::string out = "# Written by quorate init: etcd reads these ETCD_* variables.\n";
  for (const auto& [key, value] : AllSettings(launch)) out += EnvName(key) + "=" + EnvQuoted(value) + "\n";
  return out;
}

std::vector<std::string> RenderEtcdFlags(const EtcdLaunch& launch) {
  std::vector<std::string> flags;
  for (const auto& [key, value] : AllSettings(launch)) flags.push_back("--" + key + "=" + value);
  return flags;
}

std::vector<std::string> EtcdVariablesShadowedBy(const std::vector<std::string>& argv) {
  std::vector<std::string> names;
  for (const auto& arg : argv) {
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) continue;
    std::string flag = arg.substr(2, arg.find('=') - 2);
    std::string name = "ETCD_";
    for (char ch : flag) name += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace quorate
