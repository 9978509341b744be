#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>

#include <fmt/format.h>

#include "node/backup_job.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"
#include "testing/fake_snapshot.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

constexpr MemberId kN1 = 0x11, kN2 = 0x22, kN3 = 0x33;
const std::string kUrl1 = "http://127.0.0.1:2379", kUrl2 = "http://127.0.0.2:2379";

// Three started voters; the fake's leader is the first listed, n1.
struct Scheduled {
  Scheduled() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-schedule-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    cluster.AddStarted(kN1, "n1", {"http://127.0.0.1:2380"}, {kUrl1});
    cluster.AddStarted(kN2, "n2", {"http://127.0.0.2:2380"}, {kUrl2});
    cluster.AddStarted(kN3, "n3", {"http://127.0.0.3:2380"}, {"http://127.0.0.3:2379"});
    settings.store_url = "file://" + dir;
    settings.cluster = "main";
    snapshot.db_bytes = 64 * 1024;
  }
  ~Scheduled() { fs::remove_all(dir); }

  std::unique_ptr<BackupSchedule> For(const std::string& endpoint, SnapshotSourceFactory sources = {}) {
    auto store = OpenVfs(settings.store_url);
    REQUIRE(store.ok());
    BackupScheduleOptions options;
    options.clock = &clock;
    options.wall_clock = [this] { return wall; };
    options.etcd_clients = cluster.Factory();
    options.sources = sources ? sources : [this](const std::string&) { return snapshot.Source(); };
    auto schedule = std::make_unique<BackupSchedule>(config, settings, std::move(*store), options);
    schedule->SetSelf({endpoint});
    return schedule;
  }

  size_t Listed() {
    auto store = OpenVfs(settings.store_url);
    REQUIRE(store.ok());
    auto backups = ListBackups(**store, settings.store_url, "main");
    REQUIRE(backups.ok());
    return backups->size();
  }

  std::string dir;
  Config config;
  BackupSettings settings;
  FakeClock clock;
  FakeEtcdClient cluster;
  FakeSnapshot snapshot;
  SystemTime wall = std::chrono::system_clock::from_time_t(1795000000);
};

TEST_CASE("only the leader's quorate takes the scheduled backup") {
  Scheduled s;
  auto follower = s.For(kUrl2);
  auto round = follower->Tick();
  REQUIRE(round.ok());
  CHECK_FALSE(round->has_value());
  CHECK(s.Listed() == 0);

  auto leader = s.For(kUrl1);
  round = leader->Tick();
  REQUIRE(round.ok());
  REQUIRE(round->has_value());
  CHECK((*round)->member_count == 3);
  CHECK((*round)->source == "snapshot of " + std::string("http://fake:2379"));
  CHECK(s.Listed() == 1);
  const std::string metrics = leader->RenderMetrics();
  CHECK(metrics.find(fmt::format("quorate_backup_last_size_bytes {}\n", (*round)->stored_bytes)) != std::string::npos);
  CHECK(metrics.find("quorate_backup_last_success_timestamp_seconds 1795000000.000\n") != std::string::npos);
  CHECK(metrics.find("quorate_backup_stale 0\n") != std::string::npos);
  // The follower sees the leader's backup in the store.
  REQUIRE(follower->Tick().ok());
  CHECK(follower->RenderMetrics().find("quorate_backup_newest_timestamp_seconds 1795000000.000\n") != std::string::npos);
  CHECK(follower->RenderMetrics().find("quorate_backup_last_success_timestamp_seconds 0.000\n") != std::string::npos);
  // Two schedules later with no new backup, it is stale, for every node.
  s.config.backup_schedule = std::chrono::minutes(30);
  s.wall += std::chrono::minutes(61);
  REQUIRE(follower->Tick().ok());
  CHECK(follower->RenderMetrics().find("quorate_backup_stale 1\n") != std::string::npos);
}

TEST_CASE("each scheduled backup's client takes the TLS files its source says now") {
  // A CA rotation of the client side moves quorate's client from the operator's files to its bundle
  // and leaves (DESIGN §14): a backup falling due then must present what etcd accepts at that phase.
  Scheduled s;
  s.config.client_tls.cert_file = "/pki/client.crt";
  std::vector<std::string> presented;
  BackupScheduleOptions options;
  auto inner = s.cluster.Factory();
  options.clock = &s.clock;
  options.wall_clock = [&] { return s.wall; };
  options.etcd_clients = [&](const EtcdClientOptions& o) {
    presented.push_back(o.tls.cert_file);
    return inner(o);
  };
  options.sources = [&](const std::string&) { return s.snapshot.Source(); };
  auto store = OpenVfs(s.settings.store_url);
  REQUIRE(store.ok());
  BackupSchedule backups(s.config, s.settings, std::move(*store), options);
  backups.SetSelf({kUrl1});
  REQUIRE(backups.Tick().ok());
  backups.SetClientTls([&] {
    TlsFiles tls = s.config.client_tls;
    tls.cert_file = "/state/tls/client.crt";
    return tls;
  });
  REQUIRE(backups.Tick().ok());
  REQUIRE(presented.size() == 2);
  CHECK(presented[0] == "/pki/client.crt");
  CHECK(presented[1] == "/state/tls/client.crt");
}

TEST_CASE("a leader that loses its place during the backup drops it") {
  Scheduled s;
  auto leader = s.For(kUrl1, [&](const std::string&) -> SnapshotSource {
    return [&](const SnapshotSink& sink) {
      // n1 leaves mid-stream: n2, the next started voter, leads now.
      REQUIRE(s.cluster.MemberRemove(kN1).ok());
      return s.snapshot.Source()(sink);
    };
  });
  auto round = leader->Tick();
  CHECK_FALSE(round.ok());
  CHECK(s.Listed() == 0);
  CHECK(leader->RenderMetrics().find("quorate_backup_failures_total{reason=") != std::string::npos);
  auto store = OpenVfs(s.settings.store_url);
  REQUIRE(store.ok());
  auto keys = (*store)->List("");
  REQUIRE(keys.ok());
  CHECK(keys->empty());
}

TEST_CASE("retention runs after every scheduled backup") {
  Scheduled s;
  s.settings.retention.hourly = std::chrono::hours(0);
  s.settings.retention.daily = std::chrono::hours(0);
  auto leader = s.For(kUrl1);
  for (int i = 0; i < 6; ++i) {
    auto round = leader->Tick();
    REQUIRE(round.ok());
    s.wall += std::chrono::minutes(30);
    s.clock.Advance(std::chrono::minutes(30));
  }
  // Kept: those of the last hour (taken 30 minutes apart, the newest 30 minutes ago at the last prune).
  CHECK(s.Listed() == 2);
}

}  // namespace
}  // namespace quorate
