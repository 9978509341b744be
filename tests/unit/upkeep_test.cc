// The member's upkeep against a fake cluster: promotion once caught up, one MemberUpdate for changed
// peer URLs, and one client for many rounds.
#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

#include "node/upkeep.h"
#include "quorate/fs.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"

namespace quorate {
namespace {

constexpr MemberId kN1 = 0x11, kN2 = 0x22, kN3 = 0x33;

// n1 (us) beside the voters n2 and n3.
struct UpkeepRig {
  FakeClock clock;
  FakeEtcdClient cluster;
  Config config;
  Metrics metrics;
  Member self{"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}};
  std::vector<std::string> peer_clients{"http://127.0.0.2:2379", "http://127.0.0.3:2379"};

  explicit UpkeepRig(bool learner) {
    cluster.AddStarted(kN2, "n2", {"http://127.0.0.2:2380"}, {peer_clients[0]});
    cluster.AddStarted(kN3, "n3", {"http://127.0.0.3:2380"}, {peer_clients[1]});
    cluster.AddStarted(kN1, "n1", self.peer_urls, self.client_urls, learner);
  }
  UpkeepOptions Options() { return {std::chrono::seconds(1), &clock, cluster.Factory()}; }
  bool IsLearner() const {
    for (const auto& m : cluster.Members()) {
      if (m.id == kN1) return m.is_learner;
    }
    return false;
  }
};

TEST_CASE("upkeep: a learner is promoted once it caught up, and not before") {
  UpkeepRig rig(/*learner=*/true);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetSelf(rig.self, rig.peer_clients);
  for (int i = 0; i < 3; ++i) {
    Status s = upkeep.Tick();
    CHECK(s.IsUnavailable());
    CHECK(s.message().find("not yet promoted") != std::string::npos);
  }
  CHECK(rig.IsLearner());
  rig.cluster.SetCaughtUp(kN1, true);
  CHECK(upkeep.Tick().ok());
  CHECK_FALSE(rig.IsLearner());
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberPromote") == 4);
}

TEST_CASE("upkeep: under NOSPACE a caught-up learner is still promoted, and the member is not ready") {
  UpkeepRig rig(/*learner=*/true);
  rig.cluster.SetCaughtUp(kN1, true);
  rig.cluster.RaiseAlarm({kN1, AlarmKind::kNoSpace});
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetSelf(rig.self, rig.peer_clients);
  Status s = upkeep.Tick();
  CHECK_FALSE(rig.IsLearner());
  CHECK(s.IsUnavailable());
  CHECK_MESSAGE(s.message().find("NOSPACE") != std::string::npos, s.message());
  SUBCASE("but not under CORRUPT") {
    UpkeepRig corrupt(/*learner=*/true);
    corrupt.cluster.SetCaughtUp(kN1, true);
    corrupt.cluster.RaiseAlarm({kN1, AlarmKind::kCorrupt});
    Upkeep other(corrupt.config, corrupt.metrics, corrupt.Options());
    other.SetSelf(corrupt.self, corrupt.peer_clients);
    CHECK(other.Tick().IsUnavailable());
    CHECK(corrupt.IsLearner());
  }
}

TEST_CASE("upkeep: changed peer URLs are sent with exactly one MemberUpdate") {
  UpkeepRig rig(/*learner=*/false);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  Member moved = rig.self;
  moved.peer_urls = {"http://127.0.0.9:2380"};
  upkeep.SetSelf(moved, rig.peer_clients);
  for (int i = 0; i < 5; ++i) CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 1);
  CHECK(rig.cluster.Calls().end() !=
        std::find(rig.cluster.Calls().begin(), rig.cluster.Calls().end(), "MemberUpdate 11 http://127.0.0.9:2380"));
}

TEST_CASE("upkeep: during the move to TLS the membership keeps the URL the member's phase says, not the flags'") {
  UpkeepRig rig(/*learner=*/false);
  char tmpl[] = "/tmp/quorate-upkeep-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  rig.config.state_dir = tmpl;
  REQUIRE(MakeDirs(rig.config.state_dir + "/tls").ok());
  auto phase = [&](int p) {
    REQUIRE(WriteFileAtomic(rig.config.state_dir + "/tls/peer-https.json",
                            "{\"id\":\"port 2381\",\"phase\":" + std::to_string(p) + "}")
                .ok());
  };
  RollingChanges changes(rig.config, [] {});
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetRotation(&changes);
  upkeep.SetSelf(rig.self, rig.peer_clients);  // the flags' http URL, as init gave it before the move
  phase(kHttpsPhaseBoth);
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 0);
  // Listed at https (the phase taken live): kept there, however often upkeep looks.
  phase(kHttpsPhaseAdvertised);
  REQUIRE(rig.cluster.MemberUpdate(kN1, {"https://127.0.0.1:2381"}).ok());
  for (int i = 0; i < 3; ++i) CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 1);
  // Recorded but not yet listed (killed before its MemberUpdate): upkeep lists it.
  REQUIRE(rig.cluster.MemberUpdate(kN1, rig.self.peer_urls).ok());
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 3);
  CHECK(rig.cluster.Calls().back() == "MemberUpdate 11 https://127.0.0.1:2381");
  std::filesystem::remove_all(rig.config.state_dir);
}

TEST_CASE("upkeep: during a client CA rotation its client is made again on the files of each phase, once per phase") {
  UpkeepRig rig(/*learner=*/false);
  char tmpl[] = "/tmp/quorate-upkeep-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  rig.config.state_dir = dir + "/state";
  rig.config.client_tls = {dir + "/pki/client.crt", dir + "/pki/client.key", dir + "/pki/client-ca.crt", true};
  // next/ beside --trusted-ca-file: the client side takes part.
  REQUIRE(WriteFileAtomic(dir + "/pki/next/client-ca.crt", "new CA").ok());
  REQUIRE(MakeDirs(rig.config.state_dir + "/tls").ok());
  auto phase = [&](int p) {
    REQUIRE(WriteFileAtomic(rig.config.state_dir + "/tls/ca-rotation.json",
                            "{\"id\":\"" + std::string(64, 'a') + "\",\"phase\":" + std::to_string(p) + "}")
                .ok());
  };
  RollingChanges changes(rig.config, [] {});
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetRotation(&changes);
  upkeep.SetSelf(rig.self, rig.peer_clients);
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.ClientsMade() == 1);
  CHECK(rig.cluster.ClientOptions().back().tls.trusted_ca_file == rig.config.client_tls.trusted_ca_file);
  phase(1);
  for (int i = 0; i < 3; ++i) CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.ClientsMade() == 2);
  const TlsFiles bundle = rig.cluster.ClientOptions().back().tls;
  CHECK(bundle.trusted_ca_file == rig.config.state_dir + "/tls/client-ca.crt");
  CHECK(bundle.cert_file == rig.config.state_dir + "/tls/client.crt");
  // leaves: the same paths, another leaf in them: read again.
  phase(2);
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.ClientsMade() == 3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("upkeep: the same peer URLs in another order are no change") {
  UpkeepRig rig(/*learner=*/false);
  rig.self.peer_urls = {"http://127.0.0.1:2380", "http://127.0.0.1:2390"};
  rig.cluster.Start(kN1, "n1", rig.self.client_urls);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetSelf(rig.self, rig.peer_clients);
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 1);  // the cluster had one URL: updated once
  rig.self.peer_urls = {"http://127.0.0.1:2390", "http://127.0.0.1:2380"};
  upkeep.SetSelf(rig.self, rig.peer_clients);
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 1);
}

TEST_CASE("upkeep: one client serves every round; it is remade only when the endpoints change") {
  UpkeepRig rig(/*learner=*/false);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetSelf(rig.self, rig.peer_clients);
  for (int i = 0; i < 20; ++i) {
    CHECK(upkeep.Tick().ok());
    upkeep.SetSelf(rig.self, rig.peer_clients);  // as `run` does before every etcd restart
  }
  CHECK(rig.cluster.ClientsMade() == 1);
  // Voters first: a learner cannot serve the membership calls.
  CHECK(rig.cluster.ClientOptions().at(0).endpoints ==
        std::vector<std::string>{"http://127.0.0.2:2379", "http://127.0.0.3:2379", "http://127.0.0.1:2379"});
  upkeep.SetSelf(rig.self, {"http://127.0.0.2:2379", "http://127.0.0.9:2379"});
  CHECK(upkeep.Tick().ok());
  CHECK(rig.cluster.ClientsMade() == 2);
}

TEST_CASE("upkeep: the members the cluster lists are asked first, beside the ones it was given") {
  // The bucket named n2 only; n3 is a voter at an address discovery did not give when the bucket was
  // written. Once n2 leaves, a learner that asked n2 alone would never reach a leader to promote it
  // (seed 964 of 3 nodes).
  UpkeepRig rig(/*learner=*/true);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  upkeep.SetSelf(rig.self, {rig.peer_clients[0], "http://127.0.0.8:2379"});
  CHECK(upkeep.Tick().IsUnavailable());
  REQUIRE(rig.cluster.ClientsMade() == 2);
  CHECK(rig.cluster.ClientOptions().at(1).endpoints ==
        std::vector<std::string>{"http://127.0.0.2:2379", "http://127.0.0.3:2379", "http://127.0.0.8:2379",
                                 "http://127.0.0.1:2379"});
  // A round that lists the same members again, and run's next SetSelf, keep that client.
  CHECK(upkeep.Tick().IsUnavailable());
  upkeep.SetSelf(rig.self, {rig.peer_clients[0], "http://127.0.0.8:2379"});
  CHECK(rig.cluster.ClientsMade() == 2);
}

TEST_CASE("upkeep: etcd not answering, or without a leader, is not ready") {
  UpkeepRig rig(/*learner=*/false);
  Upkeep upkeep(rig.config, rig.metrics, rig.Options());
  CHECK(upkeep.Tick().IsUnavailable());  // no member yet
  Member stranger = rig.self;
  stranger.client_urls = {"http://127.0.0.7:2379"};
  upkeep.SetSelf(stranger, rig.peer_clients);
  Status s = upkeep.Tick();
  CHECK(s.message().find("etcd does not answer") != std::string::npos);
}

TEST_CASE("upkeep: the loop runs rounds on its own thread until stopped, and reports readiness") {
  UpkeepRig rig(/*learner=*/false);
  UpkeepOptions options{std::chrono::milliseconds(5), &RealClock(), rig.cluster.Factory()};
  Upkeep upkeep(rig.config, rig.metrics, options);
  upkeep.SetSelf(rig.self, rig.peer_clients);
  CHECK(upkeep.Ready().IsUnavailable());
  upkeep.Start();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!upkeep.Ready().ok() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(upkeep.Ready().ok());
  upkeep.Stop();
  CHECK(rig.cluster.CountCalls("EndpointStatus") >= 1);
  CHECK(rig.cluster.ClientsMade() == 1);
}

TEST_CASE("upkeep: while etcd is stopped the loop makes no round and is not ready") {
  UpkeepRig rig(/*learner=*/false);
  UpkeepOptions options{std::chrono::milliseconds(5), &RealClock(), rig.cluster.Factory()};
  Upkeep upkeep(rig.config, rig.metrics, options);
  upkeep.SetSelf(rig.self, rig.peer_clients);
  upkeep.SetEtcdRunning(false);
  upkeep.Start();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (upkeep.Ready().message() != "etcd is not running" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  upkeep.Stop();
  CHECK(upkeep.Ready().message() == "etcd is not running");
  CHECK(rig.cluster.Calls().empty());
}

TEST_CASE("upkeep: an etcd that exits, or starts again, is not ready at once, not only after the next round") {
  UpkeepRig rig(/*learner=*/false);
  UpkeepOptions options{std::chrono::milliseconds(5), &RealClock(), rig.cluster.Factory()};
  Upkeep upkeep(rig.config, rig.metrics, options);
  upkeep.SetSelf(rig.self, rig.peer_clients);
  upkeep.Start();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!upkeep.Ready().ok() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  upkeep.Stop();  // no round from here on: what Ready() says next comes from the exit alone
  REQUIRE(upkeep.Ready().ok());
  upkeep.SetEtcdRunning(false);
  CHECK(upkeep.Ready().message() == "etcd is not running");
  upkeep.SetEtcdRunning(true);  // started again: not ready until a round finds it a healthy voter
  CHECK(upkeep.Ready().message() == "etcd has not answered yet");
}

}  // namespace
}  // namespace quorate
