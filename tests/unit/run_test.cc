// `quorate run` (RunNode) end to end on its seams: the fake clock and launcher, FakePeers and
// FakeEtcdClient for the cluster, the probes as the status server would ask them, a real SIGTERM to
// end it.
#include <doctest/doctest.h>

#include <signal.h>

#include "node/run.h"
#include "testing/fake_process.h"
#include "testing/fake_wal.h"
#include "tests/unit/init_rig.h"

namespace quorate {
namespace {

using std::chrono::seconds;

// What /healthz and /readyz answered at one moment.
struct Probed {
  std::string when;
  Status live;
  Status ready;
};

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("quorate run: a removal seen while etcd ran holds it stopped, alive and not ready saying why, decided once, until SIGTERM") {
  // n1 has data of the cluster the three run; the operator removes n1 while its etcd runs, so once
  // that etcd has exited (with 0, as etcd 3.4 and 3.5 do when removed), rule 1b holds it stopped.
  InitRig rig;
  REQUIRE(WriteWal(rig.config.data_dir, rig.Id("n1"), rig.cluster.View().cluster_id).ok());
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  FakeClock& clock = rig.clock;
  FakeProcessLauncher launcher(clock);
  launcher.Plan(FakeRun::ExitAfter(seconds(5), ExitStatus::Exited(0)));

  StatusChecks checks;
  Metrics* metrics = nullptr;
  std::vector<Probed> probed;
  auto probe = [&](const std::string& when) { probed.push_back({when, checks.live(), checks.ready()}); };
  int stray_stops = 0;
  RunSeams seams;
  seams.clock = &clock;
  seams.launcher = &launcher;
  seams.serve_status = [&](Metrics& served, StatusChecks asked) -> Result<std::shared_ptr<void>> {
    metrics = &served;
    checks = std::move(asked);
    return std::shared_ptr<void>();
  };
  seams.find_etcd = [](const std::string&) { return Status::Ok(); };
  // Before init's first decision and before every re-decision: the probes are asked there too.
  seams.stop_stray_etcd = [&](const std::string&) {
    probe(++stray_stops == 1 ? "before the first decision" : "before a re-decision");
    return Status::Ok();
  };
  seams.init = rig.Options();
  seams.init.serve_agent = [](std::function<AgentState()>) { return std::shared_ptr<void>(); };
  seams.upkeep.etcd_clients = rig.cluster.Factory();
  // No rounds: what /readyz says of a running etcd is upkeep's (upkeep_test.cc).
  seams.run_upkeep = [](Upkeep&) { return std::shared_ptr<void>(); };
  const auto start = clock.Now();
  clock.At(start + seconds(2), [&] { probe("etcd running"); });
  clock.At(start + seconds(3), [&] { REQUIRE(rig.cluster.MemberRemove(rig.Id("n1")).ok()); });
  // RunNode's metrics end with it: read while it runs.
  std::string rendered;
  clock.At(start + seconds(20), [&] {
    probe("held");
    rendered = metrics->Render();
  });
  clock.At(start + seconds(40), [] { ::raise(SIGTERM); });

  Status ended = RunNode(rig.config, {}, std::move(seams));

  CHECK(ended.ok());
  CHECK(launcher.starts().size() == 1);
  REQUIRE(probed.size() >= 4);
  CHECK(probed[0].when == "before the first decision");
  CHECK(probed[0].live.ok());
  CHECK(probed[0].ready.message() == "deciding how to start etcd");
  CHECK(probed[1].when == "etcd running");
  CHECK(probed[1].live.ok());
  CHECK(probed[2].when == "before a re-decision");
  CHECK(probed[2].live.ok());
  CHECK(probed[2].ready.IsUnavailable());
  // Asked again after each backoff while held: alive, and /readyz keeps saying why.
  for (size_t i = 3; i < probed.size(); ++i) {
    CAPTURE(probed[i].when);
    CHECK(probed[i].live.ok());
    CHECK(probed[i].ready.IsUnavailable());
    CHECK(Contains(probed[i].ready.message(), "was removed"));
  }
  CHECK(stray_stops >= 4);
  CHECK(Contains(rendered, "quorate_decisions_total{decision=\"wait\"} 1\n"));
  CHECK(Contains(rendered, "quorate_decisions_total{decision=\"restart\"} 1\n"));
  // A removed member's etcd ending is no error of etcd's.
  CHECK(!Contains(rendered, "quorate_last_error_info{"));
}

TEST_CASE("quorate upkeep: the member its bucket names, alive and not ready before any round, until told to stop") {
  InitRig rig;
  rig.AgentsAgree();
  auto decided = rig.Run();  // init writes the bucket, as before etcd's container starts
  REQUIRE_MESSAGE(decided.ok(), decided.status().message());

  StatusChecks checks;
  Upkeep* looked_after = nullptr;
  std::vector<Probed> probed;
  UpkeepNodeSeams seams;
  seams.clock = &rig.clock;
  seams.serve_status = [&](Metrics&, StatusChecks asked) -> Result<std::shared_ptr<void>> {
    checks = std::move(asked);
    return std::shared_ptr<void>();
  };
  seams.upkeep.etcd_clients = rig.cluster.Factory();
  seams.run_upkeep = [&](Upkeep& upkeep) {
    looked_after = &upkeep;
    return std::shared_ptr<void>();
  };
  seams.wait_for_stop = [&] {
    probed.push_back({"upkeep started", checks.live(), checks.ready()});
    return Status::Ok();
  };
  CHECK(UpkeepNode(rig.config, std::move(seams)).ok());
  CHECK(looked_after != nullptr);
  REQUIRE(probed.size() == 1);
  CHECK(probed[0].live.ok());  // etcd is another container's to watch
  CHECK(probed[0].ready.IsUnavailable());
}

TEST_CASE("quorate upkeep: a --name its bucket does not name is bad input, and nothing is served") {
  InitRig rig;
  rig.AgentsAgree();
  REQUIRE(rig.Run().ok());
  rig.config.name = "n9";
  bool served = false;
  UpkeepNodeSeams seams;
  seams.clock = &rig.clock;
  seams.serve_status = [&](Metrics&, StatusChecks) -> Result<std::shared_ptr<void>> {
    served = true;
    return std::shared_ptr<void>();
  };
  seams.wait_for_stop = [] { return Status::Ok(); };
  CHECK(UpkeepNode(rig.config, std::move(seams)).IsInvalidArgument());
  CHECK_FALSE(served);
}

}  // namespace
}  // namespace quorate
