// Certificates over their life (docs/DESIGN.md §13): the pure renewal decision, the renewal actor in
// fake time (a leaf renewed at two thirds of its life, an expired one before etcd starts, one whose
// names changed), what is only watched and never written, the agent and upkeep's client taking a
// renewed leaf, and the options that go together.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "../support/test_certs.h"
#include "agent/agent.h"
#include "cli/options.h"
#include "node/tls_renew.h"
#include "node/upkeep.h"
#include "quorate/fs.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"

namespace quorate {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

const WallTime kT0 = std::chrono::system_clock::from_time_t(1'800'000'000);

CertInfo Valid(WallTime from, WallTime to) {
  CertInfo c;
  c.not_before = from;
  c.not_after = to;
  return c;
}

TEST_CASE("tls renewal: the decision, rule by rule") {
  LeafFacts missing;
  missing.problem = "/p.crt does not exist";
  LeafDecision d = DecideLeaf(missing, kT0);
  CHECK(d.action == LeafAction::kRenew);
  CHECK(d.rule == "T2");
  CHECK(d.reason == "/p.crt does not exist");

  LeafFacts f;
  f.cert = Valid(kT0, kT0 + seconds(300));
  d = DecideLeaf(f, kT0 + seconds(199));
  CHECK(d.action == LeafAction::kKeep);
  CHECK(d.renew_at == kT0 + seconds(200));
  d = DecideLeaf(f, kT0 + seconds(200));
  CHECK(d.action == LeafAction::kRenew);
  CHECK(d.rule == "T1");
  d = DecideLeaf(f, kT0 + seconds(300));
  CHECK(d.action == LeafAction::kRenew);
  CHECK(d.rule == "T2");
  CHECK(d.reason.find("it expired at") == 0);

  f.names = Status::FailedPrecondition("/p.crt does not name IP:10.0.0.2");
  d = DecideLeaf(f, kT0 + seconds(1));
  CHECK(d.action == LeafAction::kRenew);
  CHECK(d.rule == "T3");
  CHECK(d.reason == "/p.crt does not name IP:10.0.0.2");
}

// A CA from the openssl command, a leaf folder, and a wall clock that moves with the fake one.
struct RenewRig {
  TestCerts certs;
  FakeClock clock;
  Clock::TimePoint start = clock.Now();
  WallTime wall_start = kT0;
  Config config;
  std::string dir;

  bool Ready() {
    if (!certs.ok()) return false;
    dir = certs.Path("leaves");
    REQUIRE(MakeDirs(dir).ok());
    config.name = "n1";
    config.tls_ca = {certs.Path("ca.crt"), certs.Path("ca.key"), "", false};
    config.peer_tls = {dir + "/peer.crt", dir + "/peer.key", certs.Path("ca.crt"), true};
    config.initial_advertise_peer_urls = {"https://127.0.0.1:2380"};
    config.tls_leaves = {"peer"};
    config.tls_leaf_lifetime = seconds(90);
    // The test CA was made for 2 days from now: fake wall time starts now.
    wall_start = std::chrono::floor<seconds>(std::chrono::system_clock::now());
    return true;
  }
  TlsRenewer::WallClock Wall() {
    return [this] { return wall_start + std::chrono::duration_cast<WallTime::duration>(clock.Now() - start); };
  }
  std::unique_ptr<TlsRenewer> Make() {
    auto r = TlsRenewer::Create(config, clock, Wall());
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    REQUIRE(*r != nullptr);
    return std::move(*r);
  }
  CertInfo Peer() {
    auto c = ReadCertFile(dir + "/peer.crt");
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    return *c;
  }
};

TEST_CASE("tls renewal: a missing leaf is issued before etcd starts, then renewed at two thirds of its life") {
  RenewRig rig;
  if (!rig.Ready()) return;
  auto renewer = rig.Make();
  REQUIRE(renewer->BeforeStart().ok());
  CertInfo first = rig.Peer();
  CHECK(first.ips == std::vector<std::string>{"127.0.0.1"});
  CHECK(first.subject == "CN=n1");
  // 90 s of life, 9 s of it backdated: due 66 s after not-before, 57 s from now.
  CHECK(RenewalTime(first) == first.not_before + seconds(66));
  auto key = ReadFile(rig.dir + "/peer.key");
  REQUIRE(key.ok());

  renewer->Round();
  rig.clock.Advance(seconds(56));
  renewer->Round();
  CHECK(rig.Peer().serial == first.serial);
  rig.clock.Advance(seconds(2));
  renewer->Round();
  CertInfo second = rig.Peer();
  CHECK(second.serial != first.serial);
  CHECK(second.not_after > first.not_after);
  CHECK(*ReadFile(rig.dir + "/peer.key") == *key);  // the key kept: the swap was one rename

  std::string metrics = renewer->RenderMetrics();
  CHECK(metrics.find("quorate_tls_renewals_total{kind=\"peer\"} 2\n") != std::string::npos);
  CHECK(metrics.find("quorate_tls_renewal_failures_total{kind=\"peer\"} 0\n") != std::string::npos);
  CHECK(metrics.find(fmt::format("quorate_tls_not_after_seconds{{file=\"{}/peer.crt\",kind=\"peer\"}} {}\n", rig.dir,
                                 std::chrono::system_clock::to_time_t(second.not_after))) != std::string::npos);
  CHECK(metrics.find("kind=\"peer-ca\"") != std::string::npos);
  CHECK(metrics.find("kind=\"issuing-ca\"") == std::string::npos);  // the same file as the peer CA: one series
}

TEST_CASE("tls renewal: a leaf that expired while the node was off is renewed before etcd starts") {
  RenewRig rig;
  if (!rig.Ready()) return;
  auto renewer = rig.Make();
  REQUIRE(renewer->BeforeStart().ok());
  const CertInfo old = rig.Peer();
  // Off for two minutes: past the leaf's end, and no round ran meanwhile.
  rig.clock.Advance(seconds(120));
  REQUIRE(renewer->BeforeStart().ok());
  CertInfo renewed = rig.Peer();
  CHECK(renewed.serial != old.serial);
  CHECK(renewed.not_after > rig.Wall()());
}

TEST_CASE("tls renewal: a leaf that no longer names the advertised hosts is renewed with the new names") {
  RenewRig rig;
  if (!rig.Ready()) return;
  REQUIRE(rig.Make()->BeforeStart().ok());
  rig.config.initial_advertise_peer_urls = {"https://127.0.0.2:2380", "https://n1.etcd.test:2380"};
  rig.config.listen_peer_urls = {"https://0.0.0.0:2380"};
  rig.config.tls_extra_names = {"127.0.0.1", "127.0.0.2"};
  REQUIRE(rig.Make()->BeforeStart().ok());
  CertInfo renewed = rig.Peer();
  CHECK(renewed.ips == std::vector<std::string>{"127.0.0.2", "127.0.0.1"});
  CHECK(renewed.dns_names == std::vector<std::string>{"n1.etcd.test"});
}

TEST_CASE("tls renewal: without the CA's key nothing is written; expiry is reported and warned of") {
  RenewRig rig;
  if (!rig.Ready()) return;
  // cert-manager's files: a leaf valid for 2 days, watched with a 3-day warning.
  rig.config.tls_ca = {};
  rig.config.tls_leaves = {};
  rig.config.peer_tls = rig.certs.Peer();
  rig.config.tls_expiry_warning = hours(72);
  struct stat before {};
  REQUIRE(stat(rig.config.peer_tls.cert_file.c_str(), &before) == 0);
  auto renewer = rig.Make();
  renewer->Round();
  std::string warnings = renewer->Warnings();
  CHECK(warnings.find("warning: peer certificate " + rig.config.peer_tls.cert_file + " expires in ") !=
        std::string::npos);
  CHECK(renewer->RenderMetrics().find("quorate_tls_renewals_total") == std::string::npos);

  // Past its end: reported as due, still not written.
  rig.clock.Advance(hours(72));
  renewer->Round();
  CHECK(renewer->Warnings().find(" ago") != std::string::npos);
  struct stat after {};
  REQUIRE(stat(rig.config.peer_tls.cert_file.c_str(), &after) == 0);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  CHECK(after.st_ino == before.st_ino);

  rig.config.tls_expiry_warning = hours(1);
  rig.wall_start -= hours(72);
  auto calm = rig.Make();
  calm->Round();
  CHECK(calm->Warnings().empty());
}

TEST_CASE("tls renewal: a CA whose key is not its own is bad input") {
  RenewRig rig;
  if (!rig.Ready()) return;
  rig.config.tls_ca.key_file = rig.certs.Path("other-ca.key");
  auto r = TlsRenewer::Create(rig.config, rig.clock, rig.Wall());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  CHECK(r.status().message().find("--tls-ca-cert-file, --tls-ca-key-file: CA key") == 0);
}

TEST_CASE("tls renewal: a new leaf that fails its check is not swapped in") {
  RenewRig rig;
  if (!rig.Ready()) return;
  REQUIRE(rig.Make()->BeforeStart().ok());
  const CertInfo old = rig.Peer();
  // The folder made read-only: the new leaf cannot be written; the old one stays whole.
  REQUIRE(chmod(rig.dir.c_str(), 0500) == 0);
  rig.clock.Advance(seconds(120));
  auto renewer = rig.Make();
  Status s = renewer->BeforeStart();
  REQUIRE(chmod(rig.dir.c_str(), 0700) == 0);
  if (geteuid() == 0) return;  // root writes anyway
  CHECK(s.message().find("failed, nothing written") != std::string::npos);
  CHECK(rig.Peer().serial == old.serial);
  CHECK(renewer->RenderMetrics().find("quorate_tls_renewal_failures_total{kind=\"peer\"} 1\n") != std::string::npos);
}

TEST_CASE("tls options: the CA, the leaves and their files go together; bad combinations are refused") {
  TestCerts certs;
  if (!certs.ok()) return;
  const std::vector<std::string> keys = {"name",          "initial-advertise-peer-urls", "advertise-client-urls",
                                         "peer-cert-file", "peer-key-file",              "cert-file",
                                         "key-file",      "tls-ca-cert-file",            "tls-ca-key-file",
                                         "tls-leaves",    "tls-leaf-lifetime",           "tls-expiry-warning",
                                         "tls-extra-names"};
  const std::string fresh = certs.Path("new-peer.crt");
  FlagValues base = {{"name", "n1"},
                     {"initial-advertise-peer-urls", "https://127.0.0.1:2380"},
                     {"peer-cert-file", fresh},
                     {"peer-key-file", certs.Path("new-peer.key")},
                     {"tls-ca-cert-file", certs.Path("ca.crt")},
                     {"tls-ca-key-file", certs.Path("ca.key")}};
  auto c = ResolveConfig(keys, base, {});
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  CHECK(c->tls_leaves == std::vector<std::string>{"peer"});
  CHECK(c->tls_leaf_lifetime == hours(24 * 90));
  CHECK(c->tls_expiry_warning == hours(24 * 7));

  auto with = [&](std::map<std::string, std::string> changes, std::map<std::string, std::string> env = {}) {
    FlagValues flags = base;
    for (const auto& [k, v] : changes) {
      if (v.empty()) {
        flags.erase(k);
      } else {
        flags[k] = v;
      }
    }
    return ResolveConfig(keys, flags, env);
  };
  auto from_env = with({{"tls-leaf-lifetime", ""}}, {{"QUORATE_TLS_LEAF_LIFETIME", "36h"}});
  REQUIRE(from_env.ok());
  CHECK(from_env->tls_leaf_lifetime == hours(36));

  struct Bad {
    std::map<std::string, std::string> changes;
    const char* says;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{{"tls-ca-key-file", ""}}, "--tls-ca-cert-file and --tls-ca-key-file go together"},
           {{{"tls-ca-key-file", ""}, {"tls-ca-cert-file", ""}}, "--peer-cert-file: cannot read file"},
           {{{"tls-leaves", "client"}}, "--tls-leaves client: give --cert-file and --key-file"},
           {{{"tls-leaves", "server"}}, "is not a leaf: peer or client"},
           {{{"initial-advertise-peer-urls", ""}}, "--tls-leaves peer: give --initial-advertise-peer-urls"},
           {{{"tls-leaf-lifetime", "5s"}}, "is not a duration from 10s to 3650d"},
           {{{"tls-extra-names", "10.0.0.1,a b"}}, "'a b' is neither an IP address nor a DNS name"},
           {{{"tls-leaf-lifetime", "3651d"}}, "is not a duration from 10s to 3650d"},
           {{{"tls-expiry-warning", "7w"}}, "is not a duration from 10s to 3650d"},
           {{{"peer-cert-file", "/nonexistent-dir/p.crt"}}, "--peer-cert-file: cannot read file"},
       }) {
    auto r = with(bad.changes);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK_MESSAGE(r.status().message().find(bad.says) != std::string::npos, r.status().message());
    CHECK(r.status().message().find('\n') == std::string::npos);
  }
  // --tls-leaves without a CA: quorate would have nothing to issue them from.
  auto no_ca = ResolveConfig(keys,
                             {{"name", "n1"},
                              {"peer-cert-file", certs.Path("peer.crt")},
                              {"peer-key-file", certs.Path("peer.key")},
                              {"tls-leaves", "peer"}},
                             {});
  REQUIRE_FALSE(no_ca.ok());
  CHECK(no_ca.status().message().find("--tls-leaves and --tls-extra-names are for leaves quorate issues") == 0);

  // A Secret's mount (kubelet's ..data link beside the files) is never written.
  const std::string secret = certs.Path("secret");
  REQUIRE(MakeDirs(secret + "/..data").ok());
  auto mounted = with({{"peer-cert-file", secret + "/tls.crt"}, {"peer-key-file", secret + "/tls.key"}});
  REQUIRE_FALSE(mounted.ok());
  CHECK(mounted.status().message().find("is in a mounted Secret") != std::string::npos);
  CHECK_FALSE(PathExists(fresh));  // bad input wrote nothing
}


TEST_CASE("tls renewal: the agent serves a renewed peer leaf without a restart") {
  RenewRig rig;
  if (!rig.Ready()) return;
  auto renewer = rig.Make();
  REQUIRE(renewer->BeforeStart().ok());
  auto agent = AgentServer::Start("127.0.0.1:0", rig.config.peer_tls, [] { return AgentState{}; });
  REQUIRE_MESSAGE(agent.ok(), agent.status().message());
  const std::string url = "https://127.0.0.1:" + std::to_string((*agent)->port());
  auto served = ReadServerCertificate(url, rig.config.peer_tls, std::chrono::seconds(5));
  REQUIRE_MESSAGE(served.ok(), served.status().message());
  CHECK(served->serial == rig.Peer().serial);

  rig.clock.Advance(seconds(58));
  renewer->Round();
  const std::string renewed = rig.Peer().serial;
  REQUIRE(renewed != served->serial);
  // The agent reads its files again every second: real time, a few tries.
  bool taken = false;
  for (int i = 0; i < 50 && !taken; ++i) {
    auto now = ReadServerCertificate(url, rig.config.peer_tls, std::chrono::seconds(5));
    taken = now.ok() && now->serial == renewed;
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(taken);
}


TEST_CASE("tls renewal: upkeep makes its etcd client again after a swap, so it presents the new leaf") {
  RenewRig rig;
  if (!rig.Ready()) return;
  FakeEtcdClient cluster;
  cluster.AddStarted(0x11, "n1", {"https://127.0.0.1:2380"}, {"https://127.0.0.1:2379"});
  int made = 0;
  auto renewer = rig.Make();
  REQUIRE(renewer->BeforeStart().ok());
  Metrics metrics;
  UpkeepOptions options{std::chrono::seconds(1), &rig.clock, [&](const EtcdClientOptions& o) {
                          ++made;
                          return cluster.Factory()(o);
                        }};
  options.tls = renewer.get();
  Upkeep upkeep(rig.config, metrics, options);
  upkeep.SetSelf({"n1", {"https://127.0.0.1:2380"}, {"https://127.0.0.1:2379"}}, {});
  CHECK(made == 1);
  CHECK(upkeep.Tick().ok());
  CHECK(made == 1);
  rig.clock.Advance(seconds(58));
  renewer->Round();
  CHECK(upkeep.Tick().ok());
  CHECK(made == 2);
  CHECK(upkeep.Tick().ok());
  CHECK(made == 2);
}

}  // namespace
}  // namespace quorate
