// The init job's rig for unit tests: one node, n1, of an expected three, against fakes (FakePeers for
// the other members, FakeEtcdClient for the cluster, FakeClock for every wait) and a temporary data and
// state dir. Shared by the tests of init (init_test.cc) and of `quorate run` (run_test.cc), which runs
// the same job.
#pragma once

#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "etcd/etcd_config.h"
#include "node/init.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"
#include "testing/fake_peers.h"

namespace quorate {

inline const std::string kN1 = "http://127.0.0.1:2380";
inline const std::string kN2 = "http://127.0.0.2:2380";
inline const std::string kN3 = "http://127.0.0.3:2380";

// One node, n1, of an expected three, with its own data and state dir.
struct InitRig {
  std::string dir;
  FakeClock clock;
  FakeEtcdClient cluster;
  FakePeers peers{&cluster};
  Config config;
  MemberSet expected;
  StopSource stop;
  std::optional<EtcdVersion> binary = EtcdVersion{3, 4, 23};  // what `etcd --version` says; nullopt: no etcd

  InitRig() {
    char tmpl[] = "/tmp/quorate-init-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    config.name = "n1";
    config.data_dir = dir + "/data";
    config.state_dir = dir + "/state";
    config.initial_cluster = "n1=" + kN1 + ",n2=" + kN2 + ",n3=" + kN3;
    config.initial_cluster_token = "tok";
    config.timeout = std::chrono::seconds(10);
    config.etcd_path = "etcd";
    std::vector<Member> members;
    for (const auto& [name, url] : {std::pair{"n1", kN1}, {"n2", kN2}, {"n3", kN3}}) {
      members.push_back({name, {url}, {DefaultClientUrl(*ParseUrl(url))}});
    }
    expected = *MemberSet::Create(members, "tok");
  }
  ~InitRig() { std::filesystem::remove_all(dir); }

  InitOptions Options() {
    InitOptions options;
    options.clock = &clock;
    options.peers = &peers;
    options.etcd_clients = cluster.Factory();
    options.is_own_address = [](const PeerUrl& url) -> Result<bool> { return url.host == "127.0.0.1"; };
    options.stop = stop;
    options.etcd_version = [this](const std::string& path) -> Result<EtcdVersion> {
      if (!binary) return Status::NotFound(path + ": no such file");
      return *binary;
    };
    return options;
  }
  Result<InitOutcome> Run() {
    InitJob job(config, Options());
    return job.Run();
  }

  MemberId Id(const std::string& name) const { return expected.IdOf(*expected.FindByName(name)); }
  std::string ClientUrl(const std::string& name) const { return expected.FindByName(name)->client_urls.front(); }
  // n2 and n3 answer through their agents: empty, same token and member set.
  void AgentsAgree() {
    for (const char* name : {"n2", "n3"}) {
      peers.SetAgent(name, {true, "", DataState::kEmpty, "tok", expected.cluster_id()});
    }
  }
  // n2 and n3 run etcd in the fake cluster as started voters (IDs as a bootstrap gave them).
  void PeersRun() {
    cluster.AddStarted(Id("n2"), "n2", {kN2}, {ClientUrl("n2")});
    cluster.AddStarted(Id("n3"), "n3", {kN3}, {ClientUrl("n3")});
    peers.SetRunning(kN2, true);
    peers.SetRunning(kN3, true);
  }
  std::string EtcdConfig() const {
    std::ifstream in(config.state_dir + "/" + kEtcdConfigFile);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::vector<ClusterMember> OursInCluster() const {
    std::vector<ClusterMember> ours;
    for (const auto& m : cluster.Members()) {
      if (SharesUrl(m.peer_urls, {kN1})) ours.push_back(m);
    }
    return ours;
  }
};

}  // namespace quorate
