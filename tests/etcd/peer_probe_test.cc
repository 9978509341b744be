// The peer probe (GET /members on a peer URL) against a real etcd 3.4, before it has quorum and
// once it has started: what init reads from peers that run etcd.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "../support/etcd_node.h"
#include "../support/ports.h"
#include "etcd/peer_probe.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// This test's own loopback address; ports are picked free so that two test runs on one machine do
// not collide.
const std::string kIp = "127.0.1.1";

// Waits until etcd's peer endpoint answers with `members` members, `started` of them started.
Result<ClusterView> ProbeUntil(EtcdNode& etcd, const std::string& peer_url, size_t members, size_t started) {
  auto deadline = Clock::now() + seconds(15);
  Result<ClusterView> view = Status::Unavailable("not probed yet");
  while (Clock::now() < deadline) {
    REQUIRE_MESSAGE(!etcd.Exited(), ("etcd exited early:\n" + etcd.Log()));
    view = ProbeMembers(peer_url, {}, milliseconds(500));
    if (view.ok() && view->members.size() == members &&
        std::count_if(view->members.begin(), view->members.end(),
                      [](const ClusterMember& m) { return m.started(); }) == static_cast<ptrdiff_t>(started)) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  REQUIRE_MESSAGE(view.ok(), (view.status().message() + "\netcd log:\n" + etcd.Log()));
  return view;
}

TEST_CASE("probing a real etcd 3.4 peer URL, before quorum and once started") {
  auto url = [] { return "http://" + kIp + ":" + std::to_string(FreePort(kIp)); };
  const std::string token = "quorate-probe-test";

  SUBCASE("a single node starts and publishes its client URL") {
    const std::string peer_url = url(), client_url = url();
    const MemberId id = ComputeMemberId({peer_url}, token);
    EtcdNode etcd("infra1", peer_url, client_url, "infra1=" + peer_url, token);
    auto view = ProbeUntil(etcd, peer_url, 1, 1);
    CHECK(view->cluster_id == ComputeClusterId({id}));
    const ClusterMember& m = view->members[0];
    CHECK(m.id == id);
    CHECK(m.name == "infra1");
    CHECK(m.peer_urls == std::vector<std::string>{peer_url});
    CHECK(m.client_urls == std::vector<std::string>{client_url});
    CHECK_FALSE(m.is_learner);
    // GET /version on the peer URL: the server's version, and the cluster's once a leader decided it.
    auto deadline = Clock::now() + seconds(15);
    Result<VersionAnswer> version = Status::Unavailable("not probed yet");
    while (Clock::now() < deadline && !(version.ok() && version->cluster)) {
      version = ProbeVersion(peer_url, {}, milliseconds(500));
      std::this_thread::sleep_for(milliseconds(50));
    }
    REQUIRE_MESSAGE(version.ok(), version.status().message());
    CHECK(version->server.major == 3);
    REQUIRE(version->cluster);
    CHECK(version->cluster->Minor() == version->server.Minor());
  }
  SUBCASE("one node of two has no quorum, yet its peer URL lists the initial cluster") {
    const std::string peer1 = url(), client1 = url(), peer2 = url();
    const MemberId id1 = ComputeMemberId({peer1}, token), id2 = ComputeMemberId({peer2}, token);
    EtcdNode etcd("infra1", peer1, client1, "infra1=" + peer1 + ",infra2=" + peer2, token);
    auto view = ProbeUntil(etcd, peer1, 2, 0);
    CHECK(view->cluster_id == ComputeClusterId({id1, id2}));
    // Members of the initial cluster carry their names from --initial-cluster before they start.
    for (const ClusterMember& m : view->members) {
      INFO(m.name);
      CHECK(((m.id == id1 && m.name == "infra1" && m.peer_urls == std::vector<std::string>{peer1}) ||
             (m.id == id2 && m.name == "infra2" && m.peer_urls == std::vector<std::string>{peer2})));
      CHECK_FALSE(m.is_learner);
    }
    // Without a leader the cluster version is not decided, and etcd says so in words.
    auto version = ProbeVersion(peer1, {}, milliseconds(500));
    REQUIRE_MESSAGE(version.ok(), version.status().message());
    CHECK_FALSE(version->cluster);
  }
  SUBCASE("nothing listening: unavailable, as for GET /members") {
    CHECK(ProbeVersion(url(), {}, milliseconds(500)).status().IsUnavailable());
  }
}

}  // namespace
}  // namespace quorate
