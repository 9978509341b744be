#include <doctest/doctest.h>
#include <fmt/format.h>

#include <unistd.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "cli/options.h"
#include "quorate/duration.h"
#include "quorate/limits.h"
#include "quorate/provider.h"

namespace quorate {
namespace {

std::string WriteTemp(const std::string& content) {
  char path[] = "/tmp/quorate-config-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << content;
  return path;
}

const std::vector<std::string> kKeys = {"config", "name", "data-dir", "cluster-size", "timeout",
                                        "initial-cluster-token", "listen-peer-urls", "write-out",
                                        "client-cert-auth", "agent-listen", "log-format", "state-dir"};

}  // namespace

TEST_CASE("precedence is flag > environment > file > default") {
  std::string file = WriteTemp("name: from-file\ncluster-size: 3\ntimeout: 2m\n");
  std::map<std::string, std::string> env = {{"ETCD_NAME", "from-env"}, {"QUORATE_CLUSTER_SIZE", "5"}};

  auto c = ResolveConfig(kKeys, {{"config", file}, {"name", "from-flag"}}, env);
  REQUIRE(c.ok());
  CHECK(c->name == "from-flag");
  CHECK(c->cluster_size == 5u);
  CHECK(c->timeout == std::chrono::minutes(2));
  CHECK(c->initial_cluster_token == "etcd-cluster");
  CHECK(c->data_dir == "from-flag.etcd");
  CHECK(c->state_dir == "from-flag.etcd/quorate");

  auto from_file = ResolveConfig(kKeys, {{"config", file}}, {});
  REQUIRE(from_file.ok());
  CHECK(from_file->name == "from-file");
  CHECK(from_file->cluster_size == 3u);
  std::remove(file.c_str());
}

TEST_CASE("the config file path itself can come from QUORATE_CONFIG") {
  std::string file = WriteTemp("name: n7\n");
  auto c = ResolveConfig(kKeys, {}, {{"QUORATE_CONFIG", file}});
  REQUIRE(c.ok());
  CHECK(c->name == "n7");
  std::remove(file.c_str());
}

TEST_CASE("YAML lists become comma-separated URL lists") {
  std::string file = WriteTemp("listen-peer-urls:\n  - http://127.0.0.1:2380\n  - http://127.0.0.2:2380\n");
  auto c = ResolveConfig(kKeys, {{"config", file}}, {});
  REQUIRE(c.ok());
  CHECK(c->listen_peer_urls.size() == 2);
  std::remove(file.c_str());
}

TEST_CASE("bad values name their source") {
  struct Case {
    FlagValues flags;
    std::map<std::string, std::string> env;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{{"cluster-size", "three"}}, {}, "--cluster-size"},
      {{{"cluster-size", "0"}}, {}, "--cluster-size"},
      {{}, {{"QUORATE_CLUSTER_SIZE", "-1"}}, "QUORATE_CLUSTER_SIZE"},
      {{{"timeout", "soon"}}, {}, "--timeout"},
      {{{"timeout", "10parsecs"}}, {}, "--timeout"},
      {{{"listen-peer-urls", "127.0.0.1:2380"}}, {}, "--listen-peer-urls"},
      {{{"write-out", "xml"}}, {}, "--write-out"},
      {{{"client-cert-auth", "maybe"}}, {}, "--client-cert-auth"},
      {{{"agent-listen", "nowhere"}}, {}, "--agent-listen"},
      {{{"log-format", "xml"}}, {}, "--log-format"},
      {{{"name", "a=b"}}, {}, "--name"},
      {{{"initial-cluster-token", ""}}, {}, "token"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.expect);
    auto r = ResolveConfig(kKeys, c.flags, c.env);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find(c.expect) != std::string::npos);
    CHECK(r.status().message().find('\n') == std::string::npos);
  }
}

TEST_CASE("--cluster-size stops at the one cluster size limit that groups are held to too") {
  auto largest = ResolveConfig(kKeys, {{"cluster-size", std::to_string(kMaxClusterSize)}}, {});
  REQUIRE_MESSAGE(largest.ok(), largest.status().message());
  CHECK(largest->cluster_size == size_t{kMaxClusterSize});
  auto over = ResolveConfig(kKeys, {{"cluster-size", std::to_string(kMaxClusterSize + 1)}}, {});
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().IsInvalidArgument());
  CHECK(over.status().message() ==
        fmt::format("--cluster-size: '{}' is not a whole number from 1 to {}", kMaxClusterSize + 1, kMaxClusterSize));
}

TEST_CASE("bad YAML files are refused with the line") {
  for (const char* text : {"name: [unclosed\n", "- a\n- b\n", "nmae: typo\n", "name: {a: 1}\n"}) {
    CAPTURE(text);
    std::string file = WriteTemp(text);
    auto r = ResolveConfig(kKeys, {{"config", file}}, {});
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("--config") != std::string::npos);
    std::remove(file.c_str());
  }
  CHECK(ResolveConfig(kKeys, {{"config", "/nonexistent/q.yaml"}}, {}).status().IsInvalidArgument());
}

TEST_CASE("every option row binds its value, and keys are unique") {
  std::set<std::string> keys;
  for (const auto& opt : AllOptions()) {
    CAPTURE(opt.key);
    CHECK(static_cast<bool>(opt.bind));
    CHECK(keys.insert(opt.key).second);
  }
}

TEST_CASE("a value is bound from its row: kinds, defaults and the options that go together") {
  auto c = ResolveConfig({"endpoints", "write-out", "agent-port", "timeout", "client-cert-auth", "log-level"},
                         {{"endpoints", "10.0.0.1:2379,https://h:2379"}, {"write-out", "json"}, {"client-cert-auth", "true"}},
                         {{"QUORATE_AGENT_PORT", "2999"}});
  REQUIRE(c.ok());
  CHECK(c->endpoints == std::vector<std::string>{"http://10.0.0.1:2379", "https://h:2379"});
  CHECK(c->output == OutputFormat::kJson);
  CHECK(c->agent_port == 2999);
  CHECK(c->timeout == std::chrono::minutes(5));
  CHECK(c->client_tls.client_cert_auth);
  CHECK(c->log_level == "info");
  // A key the command does not declare keeps Config's own value, whatever the environment says.
  auto undeclared = ResolveConfig({"name"}, {}, {{"QUORATE_AGENT_PORT", "2999"}, {"QUORATE_WRITE_OUT", "json"}});
  REQUIRE(undeclared.ok());
  CHECK(undeclared->agent_port == 2382);
  CHECK(undeclared->output == OutputFormat::kSimple);
  CHECK(undeclared->initial_cluster_token.empty());

  auto half = ResolveConfig({"cert", "key"}, {{"cert", "/dev/null"}}, {});
  REQUIRE_FALSE(half.ok());
  CHECK(half.status().message() == "--cert and --key go together: give both or neither");
}

TEST_CASE("names and tokens that could break a file or a log line are bad input") {
  struct Case {
    FlagValues flags;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{{"name", "n1\nETCD_FORCE_NEW_CLUSTER=true"}}, "--name"},
      {{{"name", "n1\n"}}, "--name"},
      {{{"name", "\xff"}}, "not UTF-8"},
      {{{"name", std::string(300, 'n')}}, "longer than"},
      {{{"initial-cluster-token", "tok\n"}}, "--initial-cluster-token"},
      {{{"initial-cluster-token", "tok\x1b[31m"}}, "--initial-cluster-token"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.expect);
    auto r = ResolveConfig(kKeys, c.flags, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find(c.expect) != std::string::npos);
    CHECK(r.status().message().find_first_of("\n\x1b") == std::string::npos);
  }
  CHECK(ResolveConfig(kKeys, {{"name", "n\xc3\xa9"}, {"initial-cluster-token", "t\xc3\xa9 1"}}, {}).ok());
}

TEST_CASE("a value echoed in an error is escaped and cut") {
  std::string huge(128 * 1024, 'x');
  huge[5] = '\n';
  for (const char* key : {"cluster-size", "timeout", "agent-listen", "write-out", "log-level", "ignore-not-found"}) {
    CAPTURE(key);
    auto r = ResolveConfig({key}, {{key, huge}}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find('\n') == std::string::npos);
    CHECK(r.status().message().size() < 1024);
    CHECK(r.status().message().find("--" + std::string(key)) != std::string::npos);
  }
}

TEST_CASE("durations are capped, so a deadline computed from one cannot overflow") {
  CHECK(*ParseDuration("24h", "x") == std::chrono::hours(24));
  for (const char* text : {"25h", "1441m", "86401s", "3000000h", "999999999h"}) {
    CAPTURE(text);
    auto d = ParseDuration(text, "--timeout");
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().IsInvalidArgument());
    CHECK(d.status().message().find("24h") != std::string::npos);
  }
  auto r = ResolveConfig(kKeys, {{"timeout", "3000000h"}}, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("--timeout") != std::string::npos);
}

TEST_CASE("a config file that is not a small plain map of options is refused fast, naming file and key") {
  auto refused = [](const std::string& path, const std::string& expect) {
    CAPTURE(expect);
    auto start = std::chrono::steady_clock::now();
    auto r = ResolveConfig(kKeys, {{"config", path}}, {});
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("--config " + path) != std::string::npos);
    CHECK(r.status().message().find(expect) != std::string::npos);
    CHECK(r.status().message().find('\n') == std::string::npos);
  };
  char dir[] = "/tmp/quorate-config-dir-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  refused(dir, "not a regular file");
  rmdir(dir);

  struct Case {
    std::string text;
    std::string expect;
  };
  std::string laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char k = 'b'; k <= 'i'; ++k) {
    laughs += fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", k, k, char(k - 1), char(k - 1),
                          char(k - 1), char(k - 1), char(k - 1), char(k - 1), char(k - 1), char(k - 1), char(k - 1));
  }
  while (laughs.size() < 130 * 1024) laughs += "# padding, as the attack file had\n";
  std::vector<Case> cases = {
      {"[name]: n1\n", "line 1: a key must be an option name"},
      {"{a: 1}: n1\n", "line 1: a key must be an option name"},
      {"name: [n1, n2]\n", "name (line 1): takes one value"},
      {"timeout:\n  a: 1\n", "timeout (line 1): takes one value"},
      {"listen-peer-urls: {a: 1}\n", "listen-peer-urls (line 1): must be a value or a list of values"},
      {"listen-peer-urls: [[http://a:1]]\n", "a list or map inside a value"},
      {"name: &n n1\ndata-dir: *n\n", "an anchor"},
      {"data-dir: *n\n", "not valid YAML"},
      {laughs, "an anchor"},
      {"name: " + std::string(100000, '[') + "\n", "--config"},
      {std::string((1 << 20) + 1, '#'), "bytes, more than"},
  };
  for (const auto& c : cases) {
    std::string file = WriteTemp(c.text);
    refused(file, c.expect);
    std::remove(file.c_str());
  }
}

TEST_CASE("a discovery spec names one provider") {
  auto spec = ParseDiscoverySpec("provider=static provider=file path=/x");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().IsInvalidArgument());
  CHECK(spec.status().message().find("'provider' given twice") != std::string::npos);
  CHECK(ParseDiscoverySpec("provider=file path=/x").ok());
  auto raw = ParseDiscoverySpec("provider=static\n foo");
  REQUIRE_FALSE(raw.ok());
  CHECK(raw.status().message().find('\n') == std::string::npos);
}

TEST_CASE("a provider's number keys: the fallback when absent, the key and the range named when wrong") {
  auto spec = ParseDiscoverySpec("provider=aws peer_port=12380 client_port=0 page_size=1e3");
  REQUIRE(spec.ok());
  ProviderParams params(*spec);
  CHECK(*params.TakeNumber("peer_port", 2380, 1, 65535, "a port") == 12380);
  CHECK(*params.TakeNumber("metrics_port", 2381, 1, 65535, "a port") == 2381);
  auto zero = params.TakeNumber("client_port", 2379, 1, 65535, "a port");
  REQUIRE(zero.status().IsInvalidArgument());
  CHECK(zero.status().message() == "--discovery client_port '0' is not a port (1-65535)");
  CHECK(params.TakeNumber("page_size", 1000, 5, 1000, "a page size").status().IsInvalidArgument());
}

TEST_CASE("durations") {
  CHECK(*ParseDuration("500ms", "x") == std::chrono::milliseconds(500));
  CHECK(*ParseDuration("90", "x") == std::chrono::seconds(90));
  CHECK(*ParseDuration("1h", "x") == std::chrono::hours(1));
  CHECK(ParseDuration("0s", "x").status().IsInvalidArgument());
  CHECK(ParseDuration("", "x").status().IsInvalidArgument());
  CHECK(ParseDuration("1.5s", "x").status().IsInvalidArgument());
}

}  // namespace quorate
