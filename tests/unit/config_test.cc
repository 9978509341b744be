#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "quorate/config.h"

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

TEST_CASE("durations") {
  CHECK(*ParseDuration("500ms", "x") == std::chrono::milliseconds(500));
  CHECK(*ParseDuration("90", "x") == std::chrono::seconds(90));
  CHECK(*ParseDuration("1h", "x") == std::chrono::hours(1));
  CHECK(ParseDuration("0s", "x").status().IsInvalidArgument());
  CHECK(ParseDuration("", "x").status().IsInvalidArgument());
  CHECK(ParseDuration("1.5s", "x").status().IsInvalidArgument());
}

}  // namespace quorate
