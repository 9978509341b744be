#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "etcd/etcd_config.h"

namespace quorate {

TEST_CASE("etcd settings render as YAML, env and flags alike") {
  Config c;
  c.data_dir = "/var/lib/etcd";
  c.peer_tls = {"/p.crt", "/p.key", "/ca.crt", true};
  Member self{"etcd-0", {"https://etcd-0.etcd.ns.svc:2380"}, {"https://etcd-0.etcd.ns.svc:2379"}};
  EtcdLaunch l = MakeEtcdLaunch(c, self, "tok", "etcd-0=https://etcd-0.etcd.ns.svc:2380", "new");

  YAML::Node y = YAML::Load(RenderEtcdYaml(l));
  CHECK(y["name"].as<std::string>() == "etcd-0");
  CHECK(y["initial-cluster-state"].as<std::string>() == "new");
  CHECK(y["enable-grpc-gateway"].as<bool>());
  // A boolean to etcd's file reader, which refuses the string "true" for it.
  CHECK(RenderEtcdYaml(l).find("\npre-vote: true\n") != std::string::npos);
  // etcd refuses host names in listen URLs.
  CHECK(y["listen-peer-urls"].as<std::string>() == "https://0.0.0.0:2380");
  CHECK(y["peer-transport-security"]["cert-file"].as<std::string>() == "/p.crt");
  CHECK(y["peer-transport-security"]["client-cert-auth"].as<bool>());
  CHECK_FALSE(y["client-transport-security"]);

  std::string env = RenderEtcdEnv(l);
  CHECK(env.find("ETCD_INITIAL_CLUSTER_TOKEN=\"tok\"\n") != std::string::npos);
  CHECK(env.find("ETCD_PEER_CLIENT_CERT_AUTH=\"true\"\n") != std::string::npos);

  auto flags = RenderEtcdFlags(l);
  CHECK(std::find(flags.begin(), flags.end(), "--data-dir=/var/lib/etcd") != flags.end());
  CHECK(std::find(flags.begin(), flags.end(), "--pre-vote=true") != flags.end());
  CHECK(env.find("ETCD_PRE_VOTE=\"true\"\n") != std::string::npos);
}

TEST_CASE("IP listen URLs default to the advertised ones; explicit ones win") {
  Config c;
  Member self{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}};
  YAML::Node y = YAML::Load(RenderEtcdYaml(MakeEtcdLaunch(c, self, "t", "n1=http://127.0.0.1:2380", "new")));
  CHECK(y["listen-peer-urls"].as<std::string>() == "http://127.0.0.1:2380");
  c.listen_client_urls = {"http://0.0.0.0:2379"};
  y = YAML::Load(RenderEtcdYaml(MakeEtcdLaunch(c, self, "t", "n1=http://127.0.0.1:2380", "new")));
  CHECK(y["listen-client-urls"].as<std::string>() == "http://0.0.0.0:2379");
}

TEST_CASE("the ETCD_* variables etcd's flags shadow are named, both --flag value and --flag=value") {
  CHECK(EtcdVariablesShadowedBy({"etcd", "--name", "etcd-0", "--initial-cluster-state=new", "-v", "--"}) ==
        std::vector<std::string>{"ETCD_NAME", "ETCD_INITIAL_CLUSTER_STATE"});
}

TEST_CASE("etcd.env quotes every value: nothing in a value can start a line or a variable of its own") {
  Config c;
  c.data_dir = "/d";
  Member self{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}};
  // What a hostile value would hold, were it not refused where it came in.
  EtcdLaunch l = MakeEtcdLaunch(c, self, "t\"ok\n$(touch /x)`id`\\", "n1=http://127.0.0.1:2380\nETCD_FORCE_NEW_CLUSTER=true",
                                "new");
  std::string env = RenderEtcdEnv(l);
  CHECK(env.find("ETCD_NAME=\"n1\"\n") != std::string::npos);
  CHECK(env.find("ETCD_INITIAL_CLUSTER_TOKEN=\"t\\\"ok\n\\$(touch /x)\\`id\\`\\\\\"\n") != std::string::npos);

  // A POSIX shell reads each value back exactly, and defines no other variable.
  char dir[] = "/tmp/quorate-env-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/etcd.env";
  {
    std::ofstream(path) << env;
  }
  std::string cmd = "env -i sh -c 'set -a; . " + path + "; echo ${ETCD_FORCE_NEW_CLUSTER+set}${ETCD_NAME}'";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[64] = {};
  CHECK(fgets(buf, sizeof buf, p) != nullptr);
  pclose(p);
  CHECK(std::string(buf) == "n1\n");
  cmd = "env -i sh -c 'set -a; . " + path + "; printf %s \"$ETCD_INITIAL_CLUSTER_TOKEN\"'";
  p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string read_back;
  while (fgets(buf, sizeof buf, p) != nullptr) read_back += buf;
  pclose(p);
  CHECK(read_back == "t\"ok\n$(touch /x)`id`\\");
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace quorate
