#include <doctest/doctest.h>

#include <algorithm>

#include "node/etcd_env.h"

namespace quorate {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

const std::vector<std::string> kArgv = {"etcd", "--name=n1", "--data-dir=/var/lib/etcd",
                                        "--initial-cluster=n1=http://10.0.0.1:2380", "--initial-cluster-state=new"};

}  // namespace

TEST_CASE("etcd gets its own settings and the process basics, never quorate's credentials") {
  EtcdEnvironment got = SelectEtcdEnvironment(kArgv, {"PATH=/usr/bin:/bin",
                                                      "HOME=/root",
                                                      "LANG=C.UTF-8",
                                                      "LC_ALL=C",
                                                      "TZ=UTC",
                                                      "GODEBUG=x=1",
                                                      "GOMAXPROCS=2",
                                                      "GOGC=50",
                                                      "GOMEMLIMIT=1GiB",
                                                      "ETCD_QUOTA_BACKEND_BYTES=8589934592",
                                                      "ETCD_UNSUPPORTED_ARCH=arm64",
                                                      "AWS_SECRET_ACCESS_KEY=s3cr3t",
                                                      "AWS_ACCESS_KEY_ID=AKIA",
                                                      "KUBERNETES_SERVICE_HOST=10.96.0.1",
                                                      "QUORATE_CONFIG=/etc/quorate.yaml",
                                                      "ETCDCTL_PASSWORD=hunter2",
                                                      "GOOGLE_APPLICATION_CREDENTIALS=/secret.json",
                                                      "SSH_AUTH_SOCK=/tmp/agent",
                                                      "LD_PRELOAD=/evil.so",
                                                      "not-an-entry",
                                                      "=empty-name"});
  CHECK(got.env == Env{{"PATH", "/usr/bin:/bin"},
                       {"HOME", "/root"},
                       {"LANG", "C.UTF-8"},
                       {"LC_ALL", "C"},
                       {"TZ", "UTC"},
                       {"GODEBUG", "x=1"},
                       {"GOMAXPROCS", "2"},
                       {"GOGC", "50"},
                       {"GOMEMLIMIT", "1GiB"},
                       {"ETCD_QUOTA_BACKEND_BYTES", "8589934592"},
                       {"ETCD_UNSUPPORTED_ARCH", "arm64"}});
  CHECK(got.dropped.empty());
}

TEST_CASE("bootstrap variables etcd would combine with quorate's flags are dropped and named") {
  EtcdEnvironment got = SelectEtcdEnvironment(
      kArgv,
      {"ETCD_DISCOVERY=https://discovery.etcd.io/abc", "ETCD_DISCOVERY_SRV=example.com",
       "ETCD_DISCOVERY_PROXY=http://proxy:3128", "ETCD_DISCOVERY_ENDPOINTS=http://10.0.0.9:2379",
       "ETCD_INITIAL_CLUSTER_TOKEN=other", "ETCD_INITIAL_CLUSTER=x=http://10.0.0.9:2380", "ETCD_FORCE_NEW_CLUSTER=true",
       "ETCD_CONFIG_FILE=/etc/etcd.yml", "ETCD_NAME=n1", "ETCD_DATA_DIR=/elsewhere", "ETCD_SNAPSHOT_COUNT=10000"});
  CHECK(got.env == Env{{"ETCD_SNAPSHOT_COUNT", "10000"}});
  CHECK(got.dropped == std::vector<std::string>{"ETCD_CONFIG_FILE", "ETCD_DATA_DIR", "ETCD_DISCOVERY",
                                                "ETCD_DISCOVERY_ENDPOINTS", "ETCD_DISCOVERY_PROXY",
                                                "ETCD_DISCOVERY_SRV", "ETCD_FORCE_NEW_CLUSTER", "ETCD_INITIAL_CLUSTER",
                                                "ETCD_INITIAL_CLUSTER_TOKEN", "ETCD_NAME"});
}

TEST_CASE("a variable is shadowed only by a flag etcd is given") {
  EtcdEnvironment got = SelectEtcdEnvironment({"etcd", "--name=n1"}, {"ETCD_NAME=n1", "ETCD_DATA_DIR=/data"});
  CHECK(got.env == Env{{"ETCD_DATA_DIR", "/data"}});
  CHECK(got.dropped == std::vector<std::string>{"ETCD_NAME"});
}

}  // namespace quorate
