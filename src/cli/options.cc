#include "cli/options.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "quorate/duration.h"
#include "quorate/limits.h"
#include "quorate/member.h"
#include "quorate/text.h"
#include "quorate/vfs.h"
#include "tls/cert.h"

extern char** environ;

namespace quorate {
namespace {

// How much of a value an error message quotes: enough to recognise it, never a whole file.
constexpr size_t kQuotedBytes = 128;
// quorate's config file is a few dozen lines; anything this large is not one.
constexpr off_t kMaxConfigBytes = 1 << 20;
// A top-level map of option: value, where a value may be a list of plain values.
constexpr int kMaxYamlDepth = 2;

std::string Quoted(const std::string& value) { return Printable(value, kQuotedBytes); }

template <typename Int>
Result<Int> ParseInt(const Sourced& v, Int min, Int max) {
  Int n = 0;
  const char* end = v.value.data() + v.value.size();
  auto [ptr, ec] = std::from_chars(v.value.data(), end, n);
  if (v.value.empty() || ec != std::errc() || ptr != end || n < min || n > max) {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not a whole number from {} to {}", v.source, Quoted(v.value), min, max));
  }
  return n;
}

Result<bool> ParseBool(const Sourced& v) {
  if (v.value == "true" || v.value == "1") return true;
  if (v.value == "false" || v.value == "0") return false;
  return Status::InvalidArgument(fmt::format("{}: '{}' is not true or false", v.source, Quoted(v.value)));
}

// The kinds of option. Each binder leaves Config alone for an empty value (as if not given), but
// for the kinds that refuse one.
Binder NonEmpty(Binder bind) {
  return [bind = std::move(bind)](const Sourced& v, Config& c) { return v.value.empty() ? Status::Ok() : bind(v, c); };
}

Binder Text(std::string Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    c.*field = v.value;
    return Status::Ok();
  });
}

Binder UrlList(std::vector<std::string> Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    auto urls = ParseUrlList(v.value, v.source);
    if (!urls.ok()) return urls.status();
    c.*field = std::move(*urls);
    return Status::Ok();
  });
}

// etcdctl accepts bare host:port endpoints, as http://.
Binder Endpoints(std::vector<std::string> Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    std::string normalized;
    std::stringstream ss(v.value);
    for (std::string part; std::getline(ss, part, ',');) {
      if (!normalized.empty()) normalized += ',';
      normalized += part.find("://") == std::string::npos ? "http://" + part : part;
    }
    return UrlList(field)({normalized, v.source}, c);
  });
}

Binder Flag(bool Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    auto b = ParseBool(v);
    if (!b.ok()) return b.status();
    c.*field = *b;
    return Status::Ok();
  });
}

Binder Whole(int Config::*field, int min, int max) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    auto n = ParseInt(v, min, max);
    if (!n.ok()) return n.status();
    c.*field = *n;
    return Status::Ok();
  });
}

Binder Whole64(int64_t Config::*field, int64_t min, int64_t max) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    auto n = ParseInt<int64_t>(v, min, max);
    if (!n.ok()) return n.status();
    c.*field = *n;
    return Status::Ok();
  });
}

Binder Count(std::optional<size_t> Config::*field, int min, int max) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    auto n = ParseInt(v, min, max);
    if (!n.ok()) return n.status();
    c.*field = static_cast<size_t>(*n);
    return Status::Ok();
  });
}

Binder Duration(std::chrono::milliseconds Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    auto d = ParseDuration(v.value, v.source);
    if (!d.ok()) return d.status();
    c.*field = *d;
    return Status::Ok();
  });
}

Binder HostPort(std::string Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    size_t colon = v.value.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not host:port", v.source, Quoted(v.value)));
    }
    if (auto port = ParseInt({v.value.substr(colon + 1), v.source}, 0, 65535); !port.ok()) return port.status();
    c.*field = v.value;
    return Status::Ok();
  });
}

// One of `choices`, each with the value it stores.
template <typename T>
Binder OneOf(T Config::*field, std::vector<std::pair<const char*, T>> choices, const char* expected) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    for (const auto& [word, value] : choices) {
      if (v.value == word) {
        c.*field = value;
        return Status::Ok();
      }
    }
    return Status::InvalidArgument(fmt::format("{}: '{}' is not {}", v.source, Quoted(v.value), expected));
  });
}

Binder Words(std::string Config::*field, std::vector<const char*> words, const char* expected) {
  std::vector<std::pair<const char*, std::string>> choices;
  for (const char* w : words) choices.emplace_back(w, w);
  return OneOf(field, std::move(choices), expected);
}

Binder TlsFile(TlsFiles Config::*tls, std::string TlsFiles::*file) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    if (access(v.value.c_str(), R_OK) != 0) {
      return Status::InvalidArgument(fmt::format("{}: cannot read file '{}'", v.source, Quoted(v.value)));
    }
    c.*tls.*file = v.value;
    return Status::Ok();
  });
}

// A leaf's certificate or key, which quorate issues when it is missing and a CA is given: a file
// not there yet is taken when its folder is, and Finish refuses it unless quorate issues it.
Binder LeafFile(TlsFiles Config::*tls, std::string TlsFiles::*file) {
  return NonEmpty([=](const Sourced& v, Config& c) {
    if (access(v.value.c_str(), R_OK) != 0 &&
        (errno != ENOENT || !std::filesystem::is_directory(std::filesystem::path(v.value).parent_path()))) {
      return Status::InvalidArgument(fmt::format("{}: cannot read file '{}'", v.source, Quoted(v.value)));
    }
    c.*tls.*file = v.value;
    return Status::Ok();
  });
}

// A certificate's lifetime or a warning's lead: 90d, 36h, 30m, 45s (a bare number is seconds),
// from 10 seconds (a test's) to 10 years.
Binder CertDuration(std::chrono::seconds Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    size_t digits = 0;
    while (digits < v.value.size() && std::isdigit(static_cast<unsigned char>(v.value[digits]))) ++digits;
    const std::string unit = v.value.substr(digits);
    const std::map<std::string, int64_t> kUnits = {{"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
    auto u = kUnits.find(unit);
    // Nine digits of days still fit in 64 bits of seconds; the bound below does the rest.
    const int64_t n = digits > 0 && digits <= 9 ? std::stoll(v.value.substr(0, digits)) : 0;
    const int64_t secs = u == kUnits.end() ? 0 : n * u->second;
    if (secs < 10 || secs > int64_t{3650} * 86400) {
      return Status::InvalidArgument(fmt::format(
          "{}: '{}' is not a duration from 10s to 3650d (use e.g. 90d, 36h, 30m)", v.source, Quoted(v.value)));
    }
    c.*field = std::chrono::seconds(secs);
    return Status::Ok();
  });
}

Binder TlsFlag(TlsFiles Config::*tls) {
  return NonEmpty([tls](const Sourced& v, Config& c) {
    auto b = ParseBool(v);
    if (!b.ok()) return b.status();
    (c.*tls).client_cert_auth = *b;
    return Status::Ok();
  });
}

// The name goes into the data dir's path and into --initial-cluster, so it is stricter than etcd.
Status CheckName(const Sourced& v) {
  if (v.value.find_first_of("=,/ \t") != std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("{}: name '{}' must not contain '=', ',', '/' or spaces", v.source, Quoted(v.value)));
  }
  return CheckMemberName(v.value, v.source + ": name");
}

Binder Name() {
  return NonEmpty([](const Sourced& v, Config& c) {
    if (Status s = CheckName(v); !s.ok()) return s;
    c.name = v.value;
    return Status::Ok();
  });
}

// One folder name of a store key.
Status ValidateKeySegment(const Sourced& v) {
  if (v.value.find('/') != std::string::npos || !ValidateKey(v.value).ok()) {
    return Status::InvalidArgument(fmt::format(
        "{}: '{}' is not a folder name: letters, digits, '.', '_', ':' and '-', not starting with '.'", v.source,
        Quoted(v.value)));
  }
  return Status::Ok();
}

// The token seeds the cluster and member IDs and reaches etcd's config: printable, and never empty.
Binder Token() {
  return [](const Sourced& v, Config& c) {
    if (v.value.empty()) return Status::InvalidArgument(fmt::format("{}: the token must not be empty", v.source));
    if (!IsPrintable(v.value)) {
      return Status::InvalidArgument(fmt::format(
          "{}: the token '{}' holds control characters or bytes that are not UTF-8", v.source, Quoted(v.value)));
    }
    c.initial_cluster_token = v.value;
    return Status::Ok();
  };
}

// Files given as a comma-separated list (or a YAML list), each readable.
Binder FileList(std::vector<std::string> Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    std::vector<std::string> files;
    std::stringstream ss(v.value);
    for (std::string path; std::getline(ss, path, ',');) {
      if (access(path.c_str(), R_OK) != 0) {
        return Status::InvalidArgument(fmt::format("{}: cannot read file '{}'", v.source, Quoted(path)));
      }
      files.push_back(path);
    }
    c.*field = std::move(files);
    return Status::Ok();
  });
}

// A store URL's scheme is checked here; the store itself is opened by the command, which may wait for it.
Binder StoreUrl(std::string Config::*field) {
  return NonEmpty([field](const Sourced& v, Config& c) {
    if (!HasStoreScheme(v.value)) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not {}", v.source, Quoted(v.value), kStoreForms));
    }
    c.*field = v.value;
    return Status::Ok();
  });
}

OptionDef Row(const char* key, const char* env, const char* help, Binder bind, const char* default_value = nullptr) {
  return OptionDef{key, env, help, default_value, std::move(bind), /*is_bool=*/false, /*is_list=*/false};
}
OptionDef ListRow(const char* key, const char* env, const char* help, Binder bind,
                  const char* default_value = nullptr) {
  return OptionDef{key, env, help, default_value, std::move(bind), /*is_bool=*/false, /*is_list=*/true};
}
OptionDef BoolRow(const char* key, const char* env, const char* help, Binder bind) {
  return OptionDef{key, env, help, nullptr, std::move(bind), /*is_bool=*/true, /*is_list=*/false};
}

// The file's shape before its nodes are built: aliases and anchors are refused (quorate's options
// never need them, and expanding them is how a small file costs gigabytes), and so is nesting deeper
// than a list of values.
class ShapeCheck : public YAML::EventHandler {
 public:
  std::string problem;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Node(mark, anchor); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Refuse(mark, "an alias (*name)"); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    Node(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Node(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) Refuse(mark, "an anchor (&name)");
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Node(mark, anchor);
    if (++depth_ > kMaxYamlDepth) Refuse(mark, "a list or map inside a value");
  }
  void Refuse(const YAML::Mark& mark, const char* what) {
    if (problem.empty()) {
      problem = fmt::format("line {}, column {}: {}, which quorate's options never need", mark.line + 1,
                            mark.column + 1, what);
    }
  }
  int depth_ = 0;
};

Result<std::string> ReadConfigFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return Status::InvalidArgument(fmt::format("--config: cannot read '{}'", Quoted(path)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(fmt::format("--config {}: not a regular file", Quoted(path)));
  }
  if (st.st_size > kMaxConfigBytes) {
    return Status::InvalidArgument(fmt::format("--config {}: {} bytes, more than the {} a config file may hold",
                                               Quoted(path), st.st_size, kMaxConfigBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(kMaxConfigBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad() || in.gcount() > kMaxConfigBytes) {
    return Status::InvalidArgument(fmt::format("--config: cannot read '{}'", Quoted(path)));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// YAML scalars and lists of scalars become the same strings a flag would carry.
Result<std::map<std::string, Sourced>> LoadYaml(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  const std::string file = Quoted(path);
  std::map<std::string, Sourced> values;
  // yaml-cpp reports what it cannot parse, or convert, by throwing: all of it stops here.
  try {
    std::istringstream stream(*text);
    YAML::Parser parser(stream);
    ShapeCheck shape;
    parser.HandleNextDocument(shape);
    if (!shape.problem.empty()) return Status::InvalidArgument(fmt::format("--config {}: {}", file, shape.problem));

    YAML::Node root = YAML::Load(*text);
    if (root.IsNull()) return values;
    if (!root.IsMap()) {
      return Status::InvalidArgument(fmt::format("--config {}: the top level must be a map of option: value", file));
    }
    for (const auto& entry : root) {
      int line = entry.first.Mark().line + 1;
      if (!entry.first.IsScalar()) {
        return Status::InvalidArgument(
            fmt::format("--config {}: line {}: a key must be an option name, not a list or a map", file, line));
      }
      std::string key = entry.first.Scalar();
      const OptionDef* opt = FindOption(key);
      if (opt == nullptr || key == "config") {
        return Status::InvalidArgument(
            fmt::format("--config {}: unknown option '{}' (line {})", file, Quoted(key), line));
      }
      std::string source = fmt::format("--config {}: {} (line {})", file, key, line);
      const YAML::Node& node = entry.second;
      std::string value;
      if (node.IsScalar()) {
        value = node.Scalar();
      } else if (!opt->is_list) {
        return Status::InvalidArgument(source + ": takes one value, not a list or a map");
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
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("--config {}: not valid YAML: line {}, column {}: {}", file,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  return values;
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "default";
  return buf;
}

// The certificates quorate issues (docs/DESIGN.md §13) go with a CA, files it may write and the names
// to put in them; a leaf file that is not there is one quorate issues, or a mistake.
Status FinishTls(Config& c) {
  if (c.tls_ca.cert_file.empty() != c.tls_ca.key_file.empty()) {
    return Status::InvalidArgument("--tls-ca-cert-file and --tls-ca-key-file go together: give both or neither");
  }
  const bool issuing = !c.tls_ca.key_file.empty();
  if (!issuing && (!c.tls_leaves.empty() || !c.tls_extra_names.empty())) {
    return Status::InvalidArgument(
        "--tls-leaves and --tls-extra-names are for leaves quorate issues: give the CA with --tls-ca-cert-file and "
        "--tls-ca-key-file");
  }
  struct LeafFlags {
    const char* kind;
    const TlsFiles& tls;
    const char *cert, *key, *urls;
    const std::vector<std::string>& advertised;
  };
  const LeafFlags leaves[] = {
      {"peer", c.peer_tls, "peer-cert-file", "peer-key-file", "initial-advertise-peer-urls",
       c.initial_advertise_peer_urls},
      {"client", c.client_tls, "cert-file", "key-file", "advertise-client-urls", c.advertise_client_urls}};
  if (issuing && c.tls_leaves.empty()) {
    for (const auto& l : leaves) {
      if (!l.tls.cert_file.empty()) c.tls_leaves.push_back(l.kind);
    }
    if (c.tls_leaves.empty()) {
      return Status::InvalidArgument(
          "--tls-ca-key-file: no leaf to issue: give --peer-cert-file and --peer-key-file (and/or --cert-file and "
          "--key-file) where quorate is to write them");
    }
  }
  auto issued = [&](const LeafFlags& l) {
    return std::find(c.tls_leaves.begin(), c.tls_leaves.end(), l.kind) != c.tls_leaves.end();
  };
  for (const auto& l : leaves) {
    if (issued(l) && l.tls.cert_file.empty()) {
      return Status::InvalidArgument(fmt::format("--tls-leaves {}: give --{} and --{} where quorate is to write it",
                                                 l.kind, l.cert, l.key));
    }
    if (issued(l) && l.advertised.empty()) {
      return Status::InvalidArgument(
          fmt::format("--tls-leaves {}: give --{}: the {} certificate names their hosts", l.kind, l.urls, l.kind));
    }
  }
  for (const auto& l : leaves) {
    for (const char* flag : {l.cert, l.key}) {
      const std::string& path = flag == l.cert ? l.tls.cert_file : l.tls.key_file;
      if (path.empty()) continue;
      if (!issued(l) && access(path.c_str(), R_OK) != 0) {
        return Status::InvalidArgument(fmt::format("--{}: cannot read file '{}'", flag, Quoted(path)));
      }
      // A Secret or projected volume (what cert-manager's certificates are mounted as) is the
      // kubelet's to write: its files change under a "..data" link, and quorate never writes there.
      const auto dir = std::filesystem::path(path).parent_path();
      if (issued(l) && std::filesystem::exists(dir / "..data")) {
        return Status::InvalidArgument(fmt::format(
            "--{} '{}' is in a mounted Secret (its folder has ..data), which quorate never writes: leave its "
            "certificate to cert-manager (no --tls-ca-key-file) or give a path on a writable volume",
            flag, Quoted(path)));
      }
    }
  }
  return Status::Ok();
}

// The defaults that derive from other options, and the options that go together.
Status Finish(Config& c) {
  if (c.name.empty()) {
    c.name = Hostname();
    if (Status s = CheckName({c.name, "the host name (the default of --name)"}); !s.ok()) return s;
  }
  if (c.data_dir.empty()) c.data_dir = c.name + ".etcd";
  if (c.state_dir.empty()) c.state_dir = c.data_dir + "/quorate";
  struct Pair {
    const TlsFiles& tls;
    const char *cert, *key;
  };
  for (const Pair& p : {Pair{c.client_tls, "cert-file", "key-file"},
                        Pair{c.peer_tls, "peer-cert-file", "peer-key-file"}, Pair{c.etcdctl_tls, "cert", "key"}}) {
    if (p.tls.cert_file.empty() != p.tls.key_file.empty()) {
      return Status::InvalidArgument(fmt::format("--{} and --{} go together: give both or neither", p.cert, p.key));
    }
  }
  return FinishTls(c);
}

}  // namespace

const std::vector<OptionDef>& AllOptions() {
  using C = Config;
  static const std::vector<OptionDef> kOptions = {
      // etcd's flags.
      Row("name", "ETCD_NAME", "member name (default: the host name)", Name()),
      Row("data-dir", "ETCD_DATA_DIR", "etcd data directory (default: <name>.etcd)", Text(&C::data_dir)),
      ListRow("initial-advertise-peer-urls", "ETCD_INITIAL_ADVERTISE_PEER_URLS",
              "this member's peer URLs (default: from discovery)", UrlList(&C::initial_advertise_peer_urls)),
      ListRow("advertise-client-urls", "ETCD_ADVERTISE_CLIENT_URLS",
              "this member's client URLs (default: from discovery)", UrlList(&C::advertise_client_urls)),
      ListRow("listen-peer-urls", "ETCD_LISTEN_PEER_URLS",
              "URLs etcd listens on for peers (default: the advertised ones)", UrlList(&C::listen_peer_urls)),
      ListRow("listen-client-urls", "ETCD_LISTEN_CLIENT_URLS",
              "URLs etcd listens on for clients (default: the advertised ones)", UrlList(&C::listen_client_urls)),
      ListRow("initial-cluster", "ETCD_INITIAL_CLUSTER", "static discovery: name=peerURL,...",
              Text(&C::initial_cluster)),
      Row("initial-cluster-token", "ETCD_INITIAL_CLUSTER_TOKEN", "cluster token, seeds the IDs", Token(),
          "etcd-cluster"),
      Row("discovery-srv", "ETCD_DISCOVERY_SRV", "DNS SRV discovery: the domain", Text(&C::discovery_srv)),
      Row("discovery-srv-name", "ETCD_DISCOVERY_SRV_NAME", "DNS SRV discovery: service name suffix",
          Text(&C::discovery_srv_name)),
      Row("cert-file", "ETCD_CERT_FILE", "client TLS certificate", LeafFile(&C::client_tls, &TlsFiles::cert_file)),
      Row("key-file", "ETCD_KEY_FILE", "client TLS key", LeafFile(&C::client_tls, &TlsFiles::key_file)),
      Row("trusted-ca-file", "ETCD_TRUSTED_CA_FILE", "client TLS CA bundle",
          TlsFile(&C::client_tls, &TlsFiles::trusted_ca_file)),
      BoolRow("client-cert-auth", "ETCD_CLIENT_CERT_AUTH", "require client certificates", TlsFlag(&C::client_tls)),
      Row("peer-cert-file", "ETCD_PEER_CERT_FILE", "peer TLS certificate",
          LeafFile(&C::peer_tls, &TlsFiles::cert_file)),
      Row("peer-key-file", "ETCD_PEER_KEY_FILE", "peer TLS key", LeafFile(&C::peer_tls, &TlsFiles::key_file)),
      Row("peer-trusted-ca-file", "ETCD_PEER_TRUSTED_CA_FILE", "peer TLS CA bundle",
          TlsFile(&C::peer_tls, &TlsFiles::trusted_ca_file)),
      BoolRow("peer-client-cert-auth", "ETCD_PEER_CLIENT_CERT_AUTH", "require peer client certificates",
              TlsFlag(&C::peer_tls)),
      // quorate's own. --config is read before the others, by ResolveConfig itself.
      Row("config", "QUORATE_CONFIG", "YAML file with any of these options (flag > env > file > default)",
          [](const Sourced&, Config&) { return Status::Ok(); }),
      Row("discovery", "QUORATE_DISCOVERY", "discovery spec: 'provider=NAME key=value ...'", Text(&C::discovery)),
      Row("bucket", "QUORATE_BUCKET", "store of a sealed member bucket: file:///dir, s3://, gs:// or azblob:// (?endpoint=URL)",
          Text(&C::bucket)),
      Row("cluster-size", "QUORATE_CLUSTER_SIZE", "expected member count (static lists imply it)",
          Count(&C::cluster_size, 1, kMaxClusterSize)),
      Row("timeout", "QUORATE_TIMEOUT", "how long to wait for peers, e.g. 90s, 5m (at most 24h)", Duration(&C::timeout),
          "5m"),
      Row("state-dir", "QUORATE_STATE_DIR", "where the member bucket and etcd config go (default: <data-dir>/quorate)",
          Text(&C::state_dir)),
      Row("agent-listen", "QUORATE_AGENT_LISTEN", "address of this node's agent", HostPort(&C::agent_listen),
          "0.0.0.0:2382"),
      Row("agent-port", "QUORATE_AGENT_PORT", "port of the peers' agents", Whole(&C::agent_port, 1, 65535), "2382"),
      Row("status-listen", "QUORATE_STATUS_LISTEN", "address of /healthz, /readyz, /metrics",
          HostPort(&C::status_listen), "0.0.0.0:2383"),
      Row("etcd", "QUORATE_ETCD", "etcd binary to run", Text(&C::etcd_path), "etcd"),
      Row("log-format", "QUORATE_LOG_FORMAT", "text or json", Words(&C::log_format, {"text", "json"}, "text or json"),
          "text"),
      Row("log-level", "QUORATE_LOG_LEVEL", "debug, info, warn or error",
          Words(&C::log_level, {"debug", "info", "warn", "error"}, "debug, info, warn or error"), "info"),
      Row("write-out", "QUORATE_WRITE_OUT", "output format: simple, table or json",
          OneOf<OutputFormat>(
              &C::output,
              {{"simple", OutputFormat::kSimple}, {"table", OutputFormat::kTable}, {"json", OutputFormat::kJson}},
              "simple, table or json"),
          "simple"),
      // etcdctl's client flags.
      ListRow("endpoints", "ETCDCTL_ENDPOINTS", "etcd client URLs", Endpoints(&C::endpoints), "http://127.0.0.1:2379"),
      Row("cacert", "ETCDCTL_CACERT", "CA bundle to verify etcd", TlsFile(&C::etcdctl_tls, &TlsFiles::trusted_ca_file)),
      Row("cert", "ETCDCTL_CERT", "client certificate for etcd", TlsFile(&C::etcdctl_tls, &TlsFiles::cert_file)),
      Row("key", "ETCDCTL_KEY", "client key for etcd", TlsFile(&C::etcdctl_tls, &TlsFiles::key_file)),
      Row("peer-https-port", "QUORATE_PEER_HTTPS_PORT",
          "the port of each member's https peer URL (same host as its http one) after tls to-https",
          Whole(&C::peer_https_port, 1, 65535)),
      BoolRow("ignore-not-found", "QUORATE_IGNORE_NOT_FOUND",
              "a MEMBER that is not in the cluster is reported and skipped (exit 0) instead of being bad input, so "
              "a removal that stopped half-way can simply be run again",
              Flag(&C::ignore_not_found)),
      // Backups and restore.
      Row("backup-to", "QUORATE_BACKUP_TO",
          "backup store: file:///dir, s3://, gs:// or azblob:// (?endpoint=URL); backups go to backups/etcd/<cluster>/<time>/",
          StoreUrl(&C::backup_to)),
      ListRow("backup-key-file", "QUORATE_BACKUP_KEY_FILE",
              "AES-256 key files (32 bytes, raw or hex): the first encrypts new backups, any reads a backup sealed "
              "with its key ID, so old keys stay readable after a rotation",
              FileList(&C::backup_key_files)),
      Row("backup-compression", "QUORATE_BACKUP_COMPRESSION", "gzip or zstd",
          Words(&C::backup_compression, {"gzip", "zstd"}, "gzip or zstd"), "gzip"),
      Row("backup-cluster", "QUORATE_BACKUP_CLUSTER", "the cluster's folder in the store, as etcd-manager names it",
          NonEmpty([](const Sourced& v, Config& c) {
            if (Status s = ValidateKeySegment(v); !s.ok()) return s;
            c.backup_cluster = v.value;
            return Status::Ok();
          }),
          "main"),
      Row("backup-schedule", "QUORATE_BACKUP_SCHEDULE",
          "run: how often the leader's quorate takes a backup when --backup-to is given, e.g. 30m; 0 for never",
          Duration(&C::backup_schedule), "30m"),
      Row("backup-timeout", "QUORATE_BACKUP_TIMEOUT", "the longest one backup or one restore download may take",
          Duration(&C::backup_timeout), "10m"),
      Row("backup-keep-hourly-days", "QUORATE_BACKUP_KEEP_HOURLY_DAYS", "days the newest backup of each hour is kept",
          Whole(&C::backup_keep_hourly_days, 0, 3650), "7"),
      Row("backup-keep-daily-days", "QUORATE_BACKUP_KEEP_DAILY_DAYS", "days the newest backup of each day is kept",
          Whole(&C::backup_keep_daily_days, 0, 36500), "90"),
      Row("restore-from", "QUORATE_RESTORE_FROM",
          "run: start a new cluster from this backup URL (as backup list prints it); every node needs it and a new "
          "--initial-cluster-token",
          NonEmpty([](const Sourced& v, Config& c) {
            if (!HasStoreScheme(v.value)) {
              return Status::InvalidArgument(fmt::format(
                  "{}: '{}' is not a backup URL (file:///..., s3://..., gs://... or azblob://...), as backup list "
                  "prints it",
                  v.source, Quoted(v.value)));
            }
            c.restore_from = v.value;
            return Status::Ok();
          })),
      Row("from-member", "QUORATE_FROM_MEMBER",
          "recover: the surviving member (this node's --name) whose data dir seeds the new cluster",
          NonEmpty([](const Sourced& v, Config& c) {
            if (Status s = CheckName(v); !s.ok()) return s;
            c.from_member = v.value;
            return Status::Ok();
          })),
      // Maintenance (docs/DESIGN.md §12).
      BoolRow("maintenance", "QUORATE_MAINTENANCE",
              "run, upkeep: the leader's quorate compacts, defragments one member at a time by rule and clears a "
              "NOSPACE alarm once its cause is gone (false: none of it)",
              Flag(&C::maintenance)),
      Row("defrag-min-bytes", "QUORATE_DEFRAG_MIN_BYTES",
          "a member's database is defragmented only from this size on, when --defrag-min-percent of it is free",
          Whole64(&C::defrag_min_bytes, 0, int64_t{1} << 50), "104857600"),
      Row("defrag-min-percent", "QUORATE_DEFRAG_MIN_PERCENT",
          "a member's database is defragmented only when at least this share of it is free pages",
          Whole(&C::defrag_min_percent, 1, 100), "45"),
      Row("maintenance-pause", "QUORATE_MAINTENANCE_PAUSE",
          "the least time between two defragmentations, so every member is seen healthy between them",
          Duration(&C::maintenance_pause), "10s"),
      Row("learner-deadline", "QUORATE_LEARNER_DEADLINE",
          "a learner that neither catches up nor makes progress for this long is removed by the leader's quorate, "
          "freeing etcd's learner seat (0: never); longer than sending the database as a snapshot takes",
          Duration(&C::learner_deadline), "10m"),
      BoolRow("scale-in", "QUORATE_SCALE_IN",
              "run, upkeep with provider=k8s: when the StatefulSet's replicas go below the member count, the leader's "
              "quorate removes the members of the ordinals going, highest first, each while a majority is left "
              "(false: remove them by hand with member remove)",
              Flag(&C::scale_in)),
      Row("quota-backend-bytes", "ETCD_QUOTA_BACKEND_BYTES",
          "etcd's database quota (passed on to etcd by run), past which etcd raises NOSPACE (default: etcd's, 2 GiB)",
          Whole64(&C::quota_backend_bytes, 0, int64_t{1} << 50)),
      Row("compaction-keep-revisions", "QUORATE_COMPACTION_KEEP_REVISIONS",
          "revisions of history the leader's quorate keeps when it compacts: N compacts whenever the history passes "
          "2N; 0 (default) compacts only on NOSPACE, to the current revision (leave it 0 with etcd's own "
          "--auto-compaction-retention)",
          Whole64(&C::compaction_keep_revisions, 0, int64_t{1} << 50), "0"),
      // Certificates (docs/DESIGN.md §13).
      Row("tls-ca-cert-file", "QUORATE_TLS_CA_CERT_FILE",
          "CA certificate that issues this member's leaves (with --tls-ca-key-file; a Secret's ca.crt mounted as a file)",
          TlsFile(&C::tls_ca, &TlsFiles::cert_file)),
      Row("tls-ca-key-file", "QUORATE_TLS_CA_KEY_FILE",
          "the CA's private key (unencrypted PEM): quorate issues the leaves missing or expired before etcd starts and "
          "renews them at two thirds of their life; without it quorate writes no certificate, only watches them",
          TlsFile(&C::tls_ca, &TlsFiles::key_file)),
      ListRow("tls-leaves", "QUORATE_TLS_LEAVES",
              "the leaves quorate issues: peer (--peer-cert-file, --peer-key-file), client (--cert-file, --key-file) "
              "(default: each whose files are given)",
              NonEmpty([](const Sourced& v, Config& c) {
                std::stringstream ss(v.value);
                for (std::string kind; std::getline(ss, kind, ',');) {
                  if (kind != "peer" && kind != "client") {
                    return Status::InvalidArgument(
                        fmt::format("{}: '{}' is not a leaf: peer or client", v.source, Quoted(kind)));
                  }
                  if (std::find(c.tls_leaves.begin(), c.tls_leaves.end(), kind) == c.tls_leaves.end()) {
                    c.tls_leaves.push_back(kind);
                  }
                }
                return Status::Ok();
              })),
      ListRow("tls-extra-names", "QUORATE_TLS_EXTRA_NAMES",
              "IPs and DNS names every leaf quorate issues carries besides its URLs' hosts: a client Service or VIP, "
              "the address peers connect from (etcd 3.4 checks a peer's IP SANs against it)",
              NonEmpty([](const Sourced& v, Config& c) {
                std::stringstream ss(v.value);
                for (std::string host; std::getline(ss, host, ',');) {
                  if (!IsCertHost(host)) {
                    return Status::InvalidArgument(
                        fmt::format("{}: '{}' is neither an IP address nor a DNS name", v.source, Quoted(host)));
                  }
                  c.tls_extra_names.push_back(host);
                }
                return Status::Ok();
              })),
      Row("tls-leaf-lifetime", "QUORATE_TLS_LEAF_LIFETIME", "how long a leaf quorate issues is valid, e.g. 90d, 36h",
          CertDuration(&C::tls_leaf_lifetime), "90d"),
      Row("tls-expiry-warning", "QUORATE_TLS_EXPIRY_WARNING",
          "a certificate closer than this to its expiry is a warning line and a /readyz detail, e.g. 7d",
          CertDuration(&C::tls_expiry_warning), "7d"),
      BoolRow("force", "QUORATE_FORCE",
              "restore or recover even while the old cluster still has a live quorum (its later writes are lost)",
              Flag(&C::force)),
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

  Config c;
  for (const auto& key : keys) {
    const OptionDef* opt = FindOption(key);
    if (opt == nullptr) return Status::Internal("command declares unknown option " + key);
    std::optional<Sourced> v;
    if (auto it = flags.find(key); it != flags.end()) {
      v = Sourced{it->second, "--" + key};
    } else if (auto e = opt->env ? env.find(opt->env) : env.end(); e != env.end()) {
      v = Sourced{e->second, opt->env};
    } else if (auto f = file.find(key); f != file.end()) {
      v = f->second;
    } else if (opt->default_value != nullptr) {
      v = Sourced{opt->default_value, "default of --" + key};
    }
    if (!v) continue;
    if (Status s = opt->bind(*v, c); !s.ok()) return s;
  }
  if (Status s = Finish(c); !s.ok()) return s;
  return c;
}

}  // namespace quorate
