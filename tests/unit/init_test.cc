// The init job end to end against fakes: FakePeers for the other members, FakeEtcdClient for the
// cluster, FakeClock for every wait, a temporary data and state dir for the files.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>

#include "backup/backup.h"
#include "core/bucket.h"
#include "core/maintenance.h"
#include "core/rolling.h"
#include "etcd/etcd_config.h"
#include "node/init.h"
#include "node/rotation.h"
#include "quorate/fs.h"
#include "quorate/provider.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"
#include "testing/fake_peers.h"
#include "testing/fake_snapshot.h"
#include "testing/fake_wal.h"
#include "tests/unit/init_rig.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Thrown from the fake cluster to end a run where a kill would.
struct Killed {};

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("init: the agent answers while etcd --version is still being asked") {
  InitRig rig;
  rig.AgentsAgree();
  rig.config.agent_listen = "127.0.0.1:2382";
  InitOptions options = rig.Options();
  std::promise<void> served;
  auto agent_up = served.get_future();
  options.serve_agent = [&](std::function<AgentState()>) {
    served.set_value();
    return std::shared_ptr<void>();
  };
  // The real ask forks and execs a Go binary, seconds on a loaded machine, while peers ask the agent.
  options.etcd_version = [&](const std::string&) -> Result<EtcdVersion> {
    if (agent_up.wait_for(seconds(20)) != std::future_status::ready) {
      return Status::Unavailable("the agent was not served while etcd --version ran");
    }
    return EtcdVersion{3, 4, 23};
  };
  InitJob job(rig.config, options);
  auto out = job.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  REQUIRE(out->etcd_version);
  CHECK(*out->etcd_version == EtcdVersion{3, 4, 23});
}

TEST_CASE("init: the agent answers from the job's state and its etcd's WAL, keeping only what the log said") {
  InitRig rig;
  rig.AgentsAgree();
  rig.config.agent_listen = "127.0.0.1:2382";
  InitOptions options = rig.Options();
  options.agent_mode = InitOptions::AgentMode::kAlways;
  std::function<AgentState()> answer;
  bool served = true;
  options.serve_agent = [&](std::function<AgentState()> a) {
    answer = std::move(a);
    return std::shared_ptr<void>(&served, [](void* flag) { *static_cast<bool*>(flag) = false; });
  };
  {
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    REQUIRE(answer);
    CHECK(answer().data_state == DataState::kEmpty);
    CHECK(answer().token == "tok");

    // etcd launched on empty data, its WAL not written yet: running, not past the bootstrap.
    job.SetRunning(true);
    CHECK(answer().data_state == DataState::kRunning);
    CHECK_FALSE(answer().log_past_bootstrap);
    REQUIRE(WriteWal(rig.config.data_dir, out->member_id, out->cluster_id).ok());
    CHECK_FALSE(answer().log_past_bootstrap);
    // A leader's entry reached its log: past, and kept.
    REQUIRE(AppendWalEntry(rig.config.data_dir, 2, 4).ok());
    CHECK(answer().log_past_bootstrap);
    job.SetRunning(false);
    CHECK(answer().data_state == DataState::kHasData);
    CHECK(answer().log_past_bootstrap);
    CHECK(served);
  }
  // The job is gone, and its agent with it.
  CHECK_FALSE(served);
}

TEST_CASE("init: every member empty and agreeing starts a new cluster with the computed member ID") {
  InitRig rig;
  rig.AgentsAgree();
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(out->decision.action == Action::kNew);
  CHECK(out->member_id == rig.Id("n1"));
  CHECK(out->cluster_id == rig.expected.cluster_id());
  CHECK(Contains(rig.EtcdConfig(), "initial-cluster-state: new"));
  CHECK(Contains(rig.EtcdConfig(), rig.expected.InitialCluster()));
  auto bucket = LoadBucket(rig.config.state_dir);
  REQUIRE(bucket.ok());
  CHECK(bucket->members.cluster_id() == rig.expected.cluster_id());
  CHECK(rig.cluster.ClientsMade() == 0);
}

TEST_CASE("init: a new member that is not the first peer waits for it, at most 5s, in fake time") {
  InitRig rig;
  rig.config.name = "n2";
  rig.peers.SetAgent("n1", {true, "", DataState::kEmpty, "tok", rig.expected.cluster_id()});
  rig.peers.SetAgent("n3", {true, "", DataState::kEmpty, "tok", rig.expected.cluster_id()});
  auto start = rig.clock.Now();
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(out->decision.action == Action::kNew);
  CHECK(out->member_id == rig.Id("n2"));
  CHECK(rig.clock.Now() - start == seconds(5));
  auto probed = rig.peers.Probed();
  CHECK(std::count(probed.begin(), probed.end(), kN1) > 100);
}

TEST_CASE("init: listed as an initial member that never started: late-initial, once every other voter answers") {
  InitRig rig;
  FakeEtcdClient bootstrapped(rig.expected.cluster_id());
  FakePeers peers(&bootstrapped);
  bootstrapped.AddUnstarted(rig.Id("n1"), {kN1}, false);
  bootstrapped.AddStarted(rig.Id("n2"), "n2", {kN2}, {rig.ClientUrl("n2")});
  bootstrapped.AddStarted(rig.Id("n3"), "n3", {kN3}, {rig.ClientUrl("n3")});
  peers.SetRunning(kN2, true);
  InitOptions options = rig.Options();
  options.peers = &peers;
  options.etcd_clients = bootstrapped.Factory();

  SUBCASE("every voter answers: state new, our expected ID") {
    peers.SetRunning(kN3, true);
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE(out.ok());
    CHECK(out->decision.action == Action::kLateInitial);
    CHECK(out->member_id == rig.Id("n1"));
    CHECK(Contains(rig.EtcdConfig(), "initial-cluster-state: new"));
    CHECK(bootstrapped.ClientsMade() == 0);
  }
  SUBCASE("a silent voter may be the one whose view lists us as started: wait") {
    rig.config.timeout = seconds(2);
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
    CHECK(Contains(out.status().message(), "n3 does not answer on its peer URL"));
    CHECK_FALSE(PathExists(rig.config.state_dir + "/" + kEtcdConfigFile));
  }
}

TEST_CASE("init: a view where no member has started may lag its log: looked at twice before a late-initial start") {
  InitRig rig;
  FakeEtcdClient replaying(rig.expected.cluster_id());
  FakePeers peers(&replaying);
  for (const char* name : {"n1", "n2", "n3"}) {
    replaying.AddUnstarted(rig.Id(name), {rig.expected.FindByName(name)->peer_urls}, false);
  }
  peers.SetRunning(kN2, true);
  InitOptions options = rig.Options();
  options.peers = &peers;
  options.etcd_clients = replaying.Factory();

  // n3 is empty: n1 starts as the late initial member; how long deciding took.
  auto late_start = [&] {
    peers.SetAgent("n3", {true, "", DataState::kEmpty, "tok", rig.expected.cluster_id()});
    auto started = rig.clock.Now();
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kLateInitial);
    return rig.clock.Now() - started;
  };
  SUBCASE("the second look agrees: a genuine late member starts as itself") {
    // n2's agent is silent (init mode runs none beside etcd): its view alone, which may lag its log.
    CHECK(late_start() >= milliseconds(250));
    CHECK(peers.Asks() == 4);  // n2 and n3, twice
  }
  SUBCASE("n2's agent read its log and found no leader's entry: its view hides no start, one look") {
    peers.SetAgent("n2", {true, "", DataState::kRunning, "tok", rig.expected.cluster_id()});
    CHECK(late_start() == milliseconds(0));
    CHECK(peers.Asks() == 2);
  }
  SUBCASE("n2 was replaying its log: a moment later n1 shows as started before, and is replaced") {
    rig.clock.At(rig.clock.Now() + milliseconds(100), [&] {
      replaying.Start(rig.Id("n1"), "n1", {rig.ClientUrl("n1")});
      replaying.Start(rig.Id("n2"), "n2", {rig.ClientUrl("n2")});
    });
    peers.SetRunning(kN3, true);
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kReplace);
    CHECK(out->member_id != rig.Id("n1"));
  }
}

TEST_CASE("init: local data restarts etcd on it without asking the cluster for anything") {
  InitRig rig;
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(out->decision.action == Action::kRestart);
  CHECK(out->member_id == rig.Id("n1"));
  CHECK(LoadBucket(rig.config.state_dir).ok());
  CHECK(rig.cluster.ClientsMade() == 0);
}

// n1 has data; its peers answer as etcd at these versions, the cluster at `cluster`.
void RestartAmong(InitRig& rig, EtcdVersion peers, std::optional<EtcdVersion> cluster) {
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  rig.peers.SetVersion("n2", {peers, cluster});
  rig.peers.SetVersion("n3", {peers, cluster});
}

TEST_CASE("init: rule 6: a binary older than the cluster version is refused before etcd starts, exit 1, one line") {
  InitRig rig;
  RestartAmong(rig, {3, 5, 30}, EtcdVersion{3, 5, 0});
  auto started = rig.clock.Now();
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().exit_code() == ExitCode::kFailure);
  CHECK(out.status().message() ==
        "etcd 3.4.23 (--etcd) is older than the cluster version 3.5, which etcd never goes back from: run etcd 3.5 or "
        "later here");
  CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kEtcdConfigFile));
  CHECK(rig.clock.Now() == started);  // refused at once: waiting cures nothing
}

TEST_CASE("init: rule 6: a rolling upgrade restarts as usual; the bucket records the versions, which bind later") {
  InitRig rig;
  RestartAmong(rig, {3, 4, 23}, EtcdVersion{3, 4, 0});
  auto before = rig.Run();
  REQUIRE_MESSAGE(before.ok(), before.status().message());
  CHECK(before->version_change.empty());
  rig.binary = EtcdVersion{3, 5, 30};  // the first member moves to 3.5
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kRestart);
  CHECK(*out->etcd_version == EtcdVersion{3, 5, 30});
  CHECK(*out->cluster_version == EtcdVersion{3, 4, 0});
  CHECK(out->version_change == "3.4.23 to 3.5.30");
  // The others followed, and the cluster moved to 3.5.
  rig.peers.SetVersion("n2", {{3, 5, 30}, EtcdVersion{3, 5, 0}});
  rig.peers.SetVersion("n3", {{3, 5, 30}, EtcdVersion{3, 5, 0}});
  auto after = rig.Run();
  REQUIRE(after.ok());
  CHECK(after->version_change.empty());  // recorded: a restart on the same binary is no change
  auto bucket = LoadBucket(rig.config.state_dir);
  REQUIRE(bucket.ok());
  CHECK(*bucket->cluster.etcd_version == EtcdVersion{3, 5, 30});
  CHECK(*bucket->cluster.cluster_version == EtcdVersion{3, 5, 0});

  // Every peer down (a full restart) and the old binary back: the bucket remembers the cluster.
  rig.peers.SetRunning(kN2, false);
  rig.peers.SetRunning(kN3, false);
  rig.binary = EtcdVersion{3, 4, 23};
  auto again = rig.Run();
  REQUIRE_FALSE(again.ok());
  CHECK(Contains(again.status().message(), "older than the cluster version 3.5"));

  // An init container without etcd: the rules go by what the peers say.
  rig.binary.reset();
  auto unknown = rig.Run();
  REQUIRE_MESSAGE(unknown.ok(), unknown.status().message());
  CHECK_FALSE(unknown->etcd_version);
}

TEST_CASE("init: a re-decision with nothing new writes nothing; under run an unwritable etcd file is a warning") {
  InitRig rig;
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  REQUIRE(rig.Run().ok());
  std::map<std::string, ino_t> inodes;
  for (const char* f : {kBucketFile, kEtcdConfigFile, kEtcdEnvFile}) {
    struct stat st;
    REQUIRE(stat((rig.config.state_dir + "/" + f).c_str(), &st) == 0);
    inodes[f] = st.st_ino;
  }
  REQUIRE(rig.Run().ok());
  for (const auto& entry : inodes) {  // no structured binding: clang 14 cannot capture one in CHECK
    struct stat st;
    REQUIRE(stat((rig.config.state_dir + "/" + entry.first).c_str(), &st) == 0);
    CHECK_MESSAGE(st.st_ino == entry.second, entry.first, " was rewritten with the same content");
  }

  // A directory where etcd.env goes: no write of it can succeed, for root too.
  std::string env = rig.config.state_dir + "/" + kEtcdEnvFile;
  std::filesystem::remove(env);
  std::filesystem::create_directory(env);
  auto init = rig.Run();
  CHECK_FALSE(init.ok());  // `quorate init` hands that file to etcd: failing to write it fails the job
  InitOptions under_run = rig.Options();
  under_run.etcd_files_required = false;
  InitJob job(rig.config, under_run);
  auto run = job.Run();
  REQUIRE_MESSAGE(run.ok(), run.status().message());
  CHECK(run->decision.action == Action::kRestart);
}

// Found by the simulator (tests/sim, seed 19 of 3 nodes): a removal seen while etcd ran held etcd
// stopped only while a majority kept saying so; once one of them went down, the next re-decision
// restarted etcd on the removed member's data.
TEST_CASE("init: a removal seen while etcd ran holds etcd stopped, even once the majority that said so is gone") {
  InitRig rig;
  REQUIRE(WriteWal(rig.config.data_dir, rig.Id("n1"), rig.cluster.View().cluster_id).ok());
  InitJob job(rig.config, rig.Options());
  auto start = [&] {
    auto started = job.Run();
    REQUIRE_MESSAGE(started.ok(), started.status().message());
    CHECK(started->decision.action == Action::kRestart);
    job.SetRunning(true);
  };
  rig.PeersRun();
  SUBCASE("the views listed it as a voter at its start") {
    rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
    start();
  }
  // Simulator seeds 47 and 311 of 3 nodes, 13 of 5 with --maintenance yes: the operator removed a
  // member whose start no view listed; nothing places that removal before the process.
  SUBCASE("no view answered at its start") {
    rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
    rig.peers.SetRunning(kN2, false);
    rig.peers.SetRunning(kN3, false);
    start();
    rig.peers.SetRunning(kN2, true);
    rig.peers.SetRunning(kN3, true);
  }
  // Simulator seed 1713 of 3 nodes: the operator removed a learner that this fresh process had
  // restarted; no record of rule M6 names it, so the removal is the operator's.
  SUBCASE("the views listed it as a learner at its start") {
    rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")}, /*is_learner=*/true);
    start();
  }
  SUBCASE("rule M6's record of it says its removal was abandoned") {
    rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")}, /*is_learner=*/true);
    start();
    rig.cluster.keys[LearnerRemovalKey(rig.Id("n1"))] = R"({"rule":"M6","state":"abandoned"})";
  }
  REQUIRE(rig.cluster.MemberRemove(rig.Id("n1")).ok());  // the operator's, while etcd runs
  job.SetRunning(false);
  auto held = job.Run();
  REQUIRE(held.status().IsUnavailable());
  CHECK(Contains(held.status().message(), "was removed"));
  CHECK(Contains(held.status().message(), "not rejoining"));
  rig.peers.SetRunning(kN3, false);  // one voter of two answers: no majority says so any more
  rig.cluster.SetQuorum(false);
  auto again = job.Run();
  REQUIRE(again.status().IsUnavailable());
  CHECK(Contains(again.status().message(), "was removed"));
  CHECK(HasEtcdData(rig.config.data_dir));
  // Simulator seed 1589 of 3 nodes: the two voters left then lose their data, and nothing of the
  // cluster runs; the emptied nodes can only wait for this node's data, so the hold says it.
  rig.peers.SetRunning(kN2, false);
  rig.AgentsAgree();
  auto lost = job.Run();
  REQUIRE(lost.status().IsUnavailable());
  CHECK(Contains(lost.status().message(), "was removed"));
  CHECK(Contains(lost.status().message(), "2 of its 2 voters (n2, n3) left with their instances or lost their data"));
  CHECK(Contains(lost.status().message(), "not restarting etcd"));
  CHECK(HasEtcdData(rig.config.data_dir));
  for (const char* name : {"n2", "n3"}) {
    rig.peers.SetAgent(name, {true, "", DataState::kHasData, "tok", rig.expected.cluster_id()});
  }
  auto back = job.Run();
  REQUIRE(back.status().IsUnavailable());
  CHECK(Contains(back.status().message(), "not rejoining"));
}

// Found by the simulator (tests/sim, seed 50724 of 3 nodes and 100357 of 5): a learner rule M6 removed
// while its node was down, restarted by a fresh process on its stale data, was held for good once
// that etcd was refused, as if the operator had removed it under this process. M6's record tells.
TEST_CASE("init: a learner rule M6 removed, as its record in etcd says, joins again whenever its node finds out") {
  InitRig rig;
  REQUIRE(WriteWal(rig.config.data_dir, rig.Id("n1"), rig.cluster.View().cluster_id).ok());
  rig.PeersRun();
  InitJob job(rig.config, rig.Options());
  auto m6_removes = [&] {
    rig.cluster.keys[LearnerRemovalKey(rig.Id("n1"))] = R"({"rule":"M6","state":"removing"})";
    REQUIRE(rig.cluster.MemberRemove(rig.Id("n1")).ok());
  };
  SUBCASE("the views listed it as a learner, and M6 removed it while its etcd ran here") {
    rig.cluster.AddUnstarted(rig.Id("n1"), {kN1}, /*is_learner=*/true);
    auto started = job.Run();
    REQUIRE_MESSAGE(started.ok(), started.status().message());
    CHECK(started->decision.action == Action::kRestart);
    job.SetRunning(true);
    m6_removes();
  }
  // Simulator seed 100402 of 5 nodes: M6 removed it 16 s before its quorate started again.
  SUBCASE("M6 removed it before this process started, and no member list could be read with quorum to confirm it") {
    rig.cluster.AddUnstarted(rig.Id("n1"), {kN1}, /*is_learner=*/true);
    m6_removes();
    rig.cluster.SetQuorum(false);
    auto started = job.Run();
    REQUIRE_MESSAGE(started.ok(), started.status().message());
    CHECK(started->decision.action == Action::kRestart);
    job.SetRunning(true);
    rig.cluster.SetQuorum(true);
  }
  job.SetRunning(false);  // that etcd was refused as removed
  auto out = job.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kJoin);
  CHECK(Contains(out->decision.reason, "rule M6's record says it removed that learner"));
  CHECK(Contains(out->decision.reason, "moving its data aside"));
  CHECK_FALSE(std::filesystem::exists(rig.config.data_dir + "/member/wal"));
  CHECK(rig.OursInCluster().size() == 1);
}

// Simulator seed 50724 of 3 nodes: a member list read with quorum showed the member removed (the
// cluster full, so it waited as extra); a partition later left no quorum to read one, and rule 1
// restarted etcd on the removed member's data.
TEST_CASE("init: a removal a member list read with quorum showed is not forgotten when no quorum answers later") {
  InitRig rig;
  REQUIRE(WriteWal(rig.config.data_dir, rig.Id("n1"), rig.cluster.View().cluster_id).ok());
  rig.PeersRun();
  rig.cluster.AddStarted(0x4444, "n4", {"http://127.0.0.4:2380"}, {"http://127.0.0.4:2379"});
  rig.config.timeout = seconds(2);
  InitJob job(rig.config, rig.Options());
  auto extra = job.Run();
  REQUIRE_FALSE(extra.ok());
  CHECK(Contains(extra.status().message(), "was removed"));
  rig.cluster.SetQuorum(false);
  auto again = job.Run();
  REQUIRE_FALSE(again.ok());
  CHECK(Contains(again.status().message(), "as a member list read with quorum showed before"));
  CHECK(HasEtcdData(rig.config.data_dir));
}

TEST_CASE("init: a cluster below its size that does not list us is joined as a learner, once") {
  InitRig rig;
  rig.PeersRun();
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(out->decision.action == Action::kJoin);
  auto ours = rig.OursInCluster();
  REQUIRE(ours.size() == 1);
  CHECK(ours[0].is_learner);
  CHECK(out->member_id == ours[0].id);
  CHECK(out->member_id != rig.Id("n1"));
  CHECK(rig.cluster.CountCalls("MemberAdd") == 1);
  CHECK(rig.cluster.ClientOptions().at(0).endpoints ==
        std::vector<std::string>{rig.ClientUrl("n2"), rig.ClientUrl("n3")});
  std::string yml = rig.EtcdConfig();
  CHECK(Contains(yml, "initial-cluster-state: existing"));
  CHECK(Contains(yml, "n2=" + kN2 + ",n3=" + kN3 + ",n1=" + kN1));
}

TEST_CASE("init: started before but its data is gone: the stale ID is removed and we are added back as a learner") {
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(out->decision.action == Action::kReplace);
  // The voters counted again on a list read with quorum before the removal.
  CHECK(rig.cluster.Calls().at(0) == "MemberListLinearizable");
  CHECK(rig.cluster.Calls().at(1) == "MemberRemove " + IdToHex(rig.Id("n1")));
  auto ours = rig.OursInCluster();
  REQUIRE(ours.size() == 1);
  CHECK(ours[0].is_learner);
  CHECK(ours[0].id != rig.Id("n1"));
  CHECK(out->member_id == ours[0].id);
  CHECK(rig.cluster.Members().size() == 3);
  CHECK(Contains(rig.EtcdConfig(), "initial-cluster-state: existing"));
}

// Simulator seed 1334 of 3 nodes: the views counted 2 of 3 voters answering, one of them a removed
// member's etcd restarted on data that never saw its removal; the cluster had 1 of 3. With no member
// list read with quorum, rule 4 asked MemberRemove on that count.
TEST_CASE("init: rule 4 removes nothing while no member list can be read with quorum to count the voters on") {
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  rig.cluster.SetQuorum(false);
  rig.config.timeout = seconds(2);
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(Contains(out.status().message(), "no member list could be read with quorum to count the voters on before "
                                         "member " + IdToHex(rig.Id("n1")) + " is removed"));
  // Said at --timeout as a removal no quorum commits is: a majority may be lost.
  CHECK(out.status().reason() == Reason::kNoQuorumCommits);
  CHECK(Contains(out.status().message(), "a majority of the cluster may be lost"));
  CHECK(rig.cluster.CountCalls("MemberRemove") == 0);
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
  CHECK_FALSE(PathExists(rig.config.state_dir + "/" + kEtcdConfigFile));
}

namespace {

const std::string kN4 = "http://127.0.0.4:2380";

// A scaling group as a cloud provider lists it whole: n1, n2 and n3.
class WholeGroup : public DiscoveryProvider {
 public:
  Result<std::vector<Member>> Discover() override {
    std::vector<Member> members;
    for (const auto& [name, url] : {std::pair{"n1", kN1}, {"n2", kN2}, {"n3", kN3}}) {
      members.push_back({name, {url}, {DefaultClientUrl(*ParseUrl(url))}});
    }
    return members;
  }
  bool ListsWholeGroup() const override { return true; }
  std::string Describe() const override { return "the test's whole group"; }
};

// The same group, which has since its first listing grown by the instance at kN4: a newcomer that
// listed it, added its member and has yet to start its etcd.
int growing_group_calls = 0;
class GrowingGroup : public WholeGroup {
 public:
  Result<std::vector<Member>> Discover() override {
    auto members = WholeGroup::Discover();
    if (growing_group_calls++ > 0) members->push_back({"n4", {kN4}, {"http://127.0.0.4:2379"}});
    return members;
  }
};

// A provider whose every call fails, as an API that is down does.
class FailingDiscovery : public DiscoveryProvider {
 public:
  Result<std::vector<Member>> Discover() override { return Status::Unavailable("the test's API is down"); }
  std::string Describe() const override { return "the test's failing discovery"; }
};

// The time the last provider created as "test-failing" was given for its calls.
std::chrono::steady_clock::duration failing_budget{};

const RegisterProvider kFailing("test-failing", [](ProviderParams& params) -> Result<std::unique_ptr<DiscoveryProvider>> {
  if (Status s = params.CheckAllTaken({}); !s.ok()) return s;
  failing_budget = params.context().deadline - std::chrono::steady_clock::now();
  return std::unique_ptr<DiscoveryProvider>(new FailingDiscovery());
});

const RegisterProvider kWholeGroup("test-whole-group", [](ProviderParams& params) -> Result<std::unique_ptr<DiscoveryProvider>> {
  if (Status s = params.CheckAllTaken({}); !s.ok()) return s;
  return std::unique_ptr<DiscoveryProvider>(new WholeGroup());
});

const RegisterProvider kGrowingGroup("test-growing-group", [](ProviderParams& params) -> Result<std::unique_ptr<DiscoveryProvider>> {
  if (Status s = params.CheckAllTaken({}); !s.ok()) return s;
  growing_group_calls = 0;
  return std::unique_ptr<DiscoveryProvider>(new GrowingGroup());
});

// n2 and n3 run with n4, whose instance the group replaced by n1's; n4's etcd is gone.
void ChurnedCluster(InitRig& rig) {
  rig.PeersRun();
  rig.cluster.AddStarted(0x4444, "n4", {kN4}, {"http://127.0.0.4:2379"});
}

// The same, seen by n1 through discovery of the whole group, with a short --timeout for the waits.
void ChurnedGroup(InitRig& rig) {
  rig.config.timeout = seconds(2);
  rig.config.initial_cluster.clear();
  rig.config.discovery = "provider=test-whole-group";
  ChurnedCluster(rig);
}

}  // namespace

TEST_CASE("init: rule 9: a newcomer of a whole group removes the silent member of a departed instance and joins") {
  InitRig rig;
  rig.config.initial_cluster.clear();
  rig.config.discovery = "provider=test-whole-group";
  ChurnedCluster(rig);
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kJoin);
  CHECK(rig.cluster.Calls().at(0) == "MemberRemove 4444");
  auto ours = rig.OursInCluster();
  REQUIRE(ours.size() == 1);
  CHECK(ours[0].is_learner);
  CHECK(rig.cluster.Members().size() == 3);
  const auto probed = rig.peers.Probed();
  CHECK(std::find(probed.begin(), probed.end(), kN4) != probed.end());
  CHECK(Contains(rig.EtcdConfig(), "n2=" + kN2 + ",n3=" + kN3 + ",n1=" + kN1));
}

// Simulator seed 40 of 3 nodes: a learner's node lost its volume just after its member published
// itself, while its peers' lists still showed that member unstarted; the node took it for an add of
// its own that stopped mid-way and started etcd as it, with an empty data dir.
TEST_CASE("init: an added member the views show unstarted is started as only while a member list read with quorum agrees") {
  InitRig rig;
  rig.PeersRun();
  rig.cluster.AddStarted(0x1111, "n1", {kN1}, {rig.ClientUrl("n1")}, /*is_learner=*/true);
  ClusterView lagging = rig.cluster.View();
  for (auto& m : lagging.members) {
    if (m.id != 0x1111) continue;
    m.name.clear();
    m.client_urls.clear();
  }
  rig.peers.SetStaleView(kN2, lagging);
  rig.peers.SetStaleView(kN3, lagging);
  rig.config.timeout = seconds(2);
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CAPTURE(out.status().message());
  CHECK(Contains(out.status().message(), "the cluster lists n1 as started member 1111, which the "
                                         "decision's view showed never started; deciding again"));
  CHECK_FALSE(PathExists(rig.config.state_dir + "/" + kEtcdConfigFile));
  SUBCASE("unstarted in the list read with quorum too: an add of ours that stopped mid-way, started as") {
    REQUIRE(rig.cluster.MemberRemove(0x1111).ok());
    MemberId added = 0;
    REQUIRE(rig.cluster.MemberAdd({kN1}, /*is_learner=*/true, &added).ok());
    rig.peers.SetStaleView(kN2, std::nullopt);
    rig.peers.SetStaleView(kN3, std::nullopt);
    auto again = rig.Run();
    REQUIRE_MESSAGE(again.ok(), again.status().message());
    CHECK(again->member_id == added);
    CHECK(Contains(rig.EtcdConfig(), "initial-cluster-state: existing"));
  }
}

TEST_CASE("init: rule 9: a seat another newcomer took first is not joined beside") {
  // The views still list n4, but another newcomer removed it between our decision and our call:
  // MemberRemove finds no such member, and adding ourselves anyway would outgrow the cluster.
  InitRig rig;
  ChurnedGroup(rig);
  const ClusterView before = rig.cluster.View();
  rig.peers.SetStaleView(kN2, before);
  rig.peers.SetStaleView(kN3, before);
  REQUIRE(rig.cluster.MemberRemove(0x4444).ok());
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CAPTURE(out.status().message());
  CHECK(Contains(out.status().message(), "member 4444 was already removed (another node may have taken its seat)"));
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
}

TEST_CASE("init: rule 9: a removal whose retry finds the member gone decides again rather than join beside") {
  // Our MemberRemove timed out; meanwhile another newcomer (n5, outside our list of the group, but
  // answering) removed n4 and took its seat. The retry's NotFound could be our own removal: only the
  // membership tells, and it is full.
  InitRig rig;
  ChurnedGroup(rig);
  const std::string n5 = "http://127.0.0.5:2380";
  rig.cluster.TimeOutNextRemove([&] {
    REQUIRE(rig.cluster.MemberRemove(0x4444).ok());
    rig.cluster.AddStarted(0x5555, "n5", {n5}, {"http://127.0.0.5:2379"});
    rig.peers.SetRunning(n5, true);
  });
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CAPTURE(out.status().message());
  CHECK(Contains(out.status().message(), "does not list n1"));
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
  CHECK(rig.cluster.Members().size() == 3);
}

TEST_CASE("init: with data, an answer of discovery that lists us is newer than the bucket's addresses") {
  // The bucket was written when n2 was at another address; the group has replaced it since. Asking
  // only the old address, a removal of our member would never be seen (rule 1b).
  InitRig rig;
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  auto old = MemberSet::Create({{"n1", {kN1}, {"http://127.0.0.1:2379"}},
                                {"n2", {"http://127.0.0.9:2380"}, {"http://127.0.0.9:2379"}},
                                {"n3", {kN3}, {"http://127.0.0.3:2379"}}},
                               "tok");
  REQUIRE(old.ok());
  REQUIRE(MakeDirs(rig.config.state_dir).ok());
  REQUIRE(SaveBucket(rig.config.state_dir, Bucket{*old, {"new", ""}}).ok());
  rig.config.initial_cluster.clear();
  rig.config.discovery = "provider=test-whole-group";
  SUBCASE("discovery answers: its addresses") {
    auto out = rig.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kRestart);
    CHECK(Contains(rig.EtcdConfig(), "n2=" + kN2));
    CHECK_FALSE(Contains(rig.EtcdConfig(), "127.0.0.9"));
  }
  SUBCASE("discovery fails: the bucket stands in, and the restart does not wait on it") {
    rig.config.discovery = "provider=test-failing";
    auto started = rig.clock.Now();
    auto out = rig.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kRestart);
    CHECK(Contains(rig.EtcdConfig(), "n2=http://127.0.0.9:2380"));
    CHECK(rig.clock.Now() == started);
    // An API that hangs or throttles holds the restart 5 s at most, not --timeout.
    rig.config.timeout = std::chrono::minutes(5);
    REQUIRE(rig.Run().ok());
    CHECK(failing_budget <= seconds(5));
    CHECK(failing_budget > seconds(1));
  }
}

TEST_CASE("init: rule 9 takes no seat from a member that answers, nor from a list that may be partial") {
  InitRig rig;
  rig.config.timeout = seconds(2);
  ChurnedCluster(rig);
  SUBCASE("the departed member's peer URL answers") {
    rig.config.initial_cluster.clear();
    rig.config.discovery = "provider=test-whole-group";
    rig.peers.SetRunning(kN4, true);
  }
  SUBCASE("a static list is no whole group") {}
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(Contains(out.status().message(), "does not list n1"));
  CHECK(rig.cluster.CountCalls("MemberRemove") == 0);
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
}

TEST_CASE("init: rule 9: a silent member at an instance the group lists only since our first listing is not departed") {
  // n4 was added after n1 listed the group, by an instance that listing lacked; its etcd has not
  // started yet. Taken for departed, its removal would undo that instance's join (seed 608 of 5).
  InitRig rig;
  rig.config.timeout = seconds(2);
  rig.config.initial_cluster.clear();
  rig.config.discovery = "provider=test-growing-group";
  rig.PeersRun();
  rig.cluster.AddUnstarted(0x4444, {kN4}, /*is_learner=*/true);
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CAPTURE(out.status().message());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(growing_group_calls > 1);
  CHECK(rig.cluster.CountCalls("MemberRemove") == 0);
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
}

TEST_CASE("init: with --backup-to, a backup is taken before the stale member is removed, and its failure holds nothing up") {
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  const std::string store = "file://" + rig.dir + "/backups";
  REQUIRE(MakeDirs(rig.dir + "/backups").ok());
  rig.config.backup_to = store;
  FakeSnapshot snapshot;
  snapshot.db_bytes = 4096;
  InitOptions options = rig.Options();
  SUBCASE("the backup is in the store, taken before MemberRemove") {
    options.snapshot_sources = [&](const std::string&) { return snapshot.Source(); };
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kReplace);
    auto vfs = OpenVfs(store);
    REQUIRE(vfs.ok());
    auto backups = ListBackups(**vfs, store, "main");
    REQUIRE(backups.ok());
    CHECK(backups->size() == 1);
    const auto calls = rig.cluster.Calls();
    auto remove = std::find(calls.begin(), calls.end(), "MemberRemove " + IdToHex(rig.Id("n1")));
    auto status = std::find_if(calls.begin(), calls.end(), [](const std::string& c) { return c.rfind("EndpointStatus", 0) == 0; });
    REQUIRE(remove != calls.end());
    CHECK(status < remove);
  }
  SUBCASE("a snapshot whose hash is wrong: no backup, the replace goes on") {
    snapshot.wrong_hash = true;
    options.snapshot_sources = [&](const std::string&) { return snapshot.Source(); };
    InitJob job(rig.config, options);
    auto out = job.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kReplace);
    CHECK(rig.cluster.CountCalls("MemberRemove") == 1);
    auto vfs = OpenVfs(store);
    REQUIRE(vfs.ok());
    auto backups = ListBackups(**vfs, store, "main");
    REQUIRE(backups.ok());
    CHECK(backups->empty());
  }
}

TEST_CASE("init: a peer's view that lacks our member is no removal until a member list read with quorum lacks it too") {
  // Our data is that of a member n2's view lacks. n2's peer URL lists only n2, as etcd 3.4 answers
  // GET /members while it still replays its WAL after all members restarted at once.
  InitRig rig;
  const ClusterId cluster_id = 0xc1d;
  const MemberId ours = 0xd900;
  FakeEtcdClient cluster(cluster_id);
  FakePeers peers(&cluster);
  cluster.AddStarted(rig.Id("n2"), "n2", {kN2}, {rig.ClientUrl("n2")});
  peers.SetRunning(kN2, true);
  REQUIRE(WriteWal(rig.config.data_dir, ours, cluster_id).ok());
  InitOptions options = rig.Options();
  options.peers = &peers;
  options.etcd_clients = cluster.Factory();

  SUBCASE("no quorum to confirm it: restart on our data, which stays where it is") {
    cluster.SetQuorum(false);
    auto out = InitJob(rig.config, options).Run();
    REQUIRE(out.ok());
    CHECK(out->decision.action == Action::kRestart);
    CHECK(cluster.CountCalls("MemberListLinearizable") == 1);
    CHECK(std::filesystem::exists(rig.config.data_dir + "/member/wal"));
  }
  SUBCASE("the member list read with quorum lists us: restart on our data, no removal") {
    cluster.AddStarted(ours, "n1", {kN1}, {rig.ClientUrl("n1")});
    peers.SetStaleView(kN2, ClusterView{cluster_id, {cluster.Members().front()}});  // n2's replay lists only n2
    auto out = InitJob(rig.config, options).Run();
    REQUIRE(out.ok());
    CHECK(out->decision.action == Action::kRestart);
    CHECK(cluster.CountCalls("MemberListLinearizable") == 1);
    CHECK(std::filesystem::exists(rig.config.data_dir + "/member/wal"));
  }
  SUBCASE("confirmed with quorum: removed, so the data goes aside and we join as a new learner") {
    auto out = InitJob(rig.config, options).Run();
    REQUIRE(out.ok());
    CHECK(out->decision.action == Action::kJoin);
    CHECK(Contains(out->decision.reason, "a member list read with quorum lacks it"));
    CHECK_FALSE(std::filesystem::exists(rig.config.data_dir + "/member"));
    CHECK(cluster.CountCalls("MemberAdd") == 1);
  }
}

TEST_CASE("init: a join decided on a view that lacked our started old member is decided again, never started as it") {
  // n1 lost its data; n2 and n3 answer GET /members with a view that lacks n1 (replaying their WALs),
  // so the plan is a join. MemberAdd then meets n1's old member at our peer URL, started.
  InitRig rig;
  rig.PeersRun();
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  ClusterView partial;
  partial.cluster_id = rig.cluster.View().cluster_id;
  for (const auto& m : rig.cluster.Members()) {
    if (m.name != "n1") partial.members.push_back(m);
  }
  rig.peers.SetStaleView(kN2, partial);
  rig.peers.SetStaleView(kN3, partial);

  SUBCASE("the views stay stale until --timeout: exit 1, nothing changed, nothing written") {
    rig.config.timeout = seconds(2);
    auto out = rig.Run();
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().IsUnavailable());
    CHECK(Contains(out.status().message(), "deciding again"));
    CHECK(rig.OursInCluster().size() == 1);
    CHECK(rig.cluster.CountCalls("MemberRemove") == 0);
    CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kEtcdConfigFile));
  }
  SUBCASE("the peers finish replaying their WALs: the same run decides again and replaces our old member") {
    rig.clock.At(rig.clock.Now() + milliseconds(100), [&] {
      rig.peers.SetStaleView(kN2, std::nullopt);
      rig.peers.SetStaleView(kN3, std::nullopt);
    });
    auto out = rig.Run();
    REQUIRE(out.ok());
    CHECK(out->decision.action == Action::kReplace);
    REQUIRE(rig.OursInCluster().size() == 1);
    CHECK(rig.OursInCluster().front().id != rig.Id("n1"));
  }
}

TEST_CASE("init: a peer URL that is not this machine's is refused before MemberAdd, as bad input") {
  InitRig rig;
  rig.PeersRun();
  InitOptions options = rig.Options();
  options.is_own_address = [](const PeerUrl&) -> Result<bool> { return false; };
  InitJob job(rig.config, options);
  auto out = job.Run();
  CHECK(out.status().IsInvalidArgument());
  CHECK(rig.cluster.CountCalls("MemberAdd") == 0);
}

// docs/DESIGN.md §4 "every step is idempotent": a run killed between any two steps of join or replace,
// then a fresh run on the same dirs against the same cluster, leaves us a learner exactly once.
TEST_CASE("init: killed between any two steps of join or replace, the next run converges") {
  struct Case {
    const char* scenario;
    const char* killed_after;  // a change of the fake cluster, or "apply" for after the membership change
  };
  for (Case c : {Case{"replace", "MemberRemove"}, Case{"replace", "MemberAdd"}, Case{"replace", "apply"},
                 Case{"join", "MemberAdd"}, Case{"join", "apply"}}) {
    CAPTURE(c.scenario);
    CAPTURE(c.killed_after);
    InitRig rig;
    bool replace = std::string(c.scenario) == "replace";
    if (replace) rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
    rig.PeersRun();

    if (std::string(c.killed_after) == "apply") {
      // Killed after the cluster changed, before any file was written.
      REQUIRE(rig.Run().ok());
      std::filesystem::remove_all(rig.config.state_dir);
    } else {
      std::string at = c.killed_after;
      rig.cluster.AfterChange([at](const std::string& call) {
        if (call == at) throw Killed{};
      });
      CHECK_THROWS_AS((void)rig.Run(), Killed);
      rig.cluster.AfterChange(nullptr);
      CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kEtcdConfigFile));
    }

    auto again = rig.Run();
    REQUIRE(again.ok());
    CHECK(again->decision.action == Action::kJoin);
    auto ours = rig.OursInCluster();
    REQUIRE(ours.size() == 1);
    CHECK(ours[0].is_learner);
    CHECK(again->member_id == ours[0].id);
    CHECK(rig.cluster.Members().size() == 3);
    std::string yml = rig.EtcdConfig();
    CHECK(Contains(yml, "initial-cluster-state: existing"));
    CHECK(Contains(yml, "n1=" + kN1));
    CHECK(LoadBucket(rig.config.state_dir).ok());
  }
}

TEST_CASE("init: 'unhealthy cluster' is asked again every 500 ms until MemberAdd goes through") {
  InitRig rig;
  rig.PeersRun();
  rig.cluster.FailAddsUnhealthy(3);
  auto start = rig.clock.Now();
  auto out = rig.Run();
  REQUIRE(out.ok());
  CHECK(rig.cluster.CountCalls("MemberAdd") == 4);
  CHECK(rig.clock.Now() - start == milliseconds(3 * 500));
  CHECK(rig.OursInCluster().size() == 1);
}

TEST_CASE("init: 'unhealthy cluster' for etcd's 5 s is added within half a second of its end, not at the backoff's 7.5 s") {
  // plain-to-tls on etcd 3.5, step 4: n3 replaces its member right after n1's etcd restarted, and
  // etcd refuses the add until the member asked has been connected to n1 for 5 s (HealthInterval).
  // The doubling backoff asked at 0, 0.5, 1.5, 3.5 and 7.5 s.
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  const auto start = rig.clock.Now();
  milliseconds remove_refused{0};
  int removes = 1;
  SUBCASE("MemberAdd") {}
  SUBCASE("MemberRemove as well, for 2 s before it") {
    remove_refused = seconds(2);
    removes = 5;  // at 0, 0.5, 1, 1.5 and 2 s
    rig.cluster.RefuseChangesUnhealthyUntil(rig.clock, start + remove_refused);
  }
  rig.cluster.AfterChange([&](const std::string& call) {
    if (call == "MemberRemove") rig.cluster.RefuseChangesUnhealthyUntil(rig.clock, rig.clock.Now() + seconds(5));
  });
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kReplace);
  CHECK(rig.OursInCluster().size() == 1);
  CHECK(rig.clock.Now() - start >= remove_refused + seconds(5));
  CHECK(rig.clock.Now() - start <= remove_refused + milliseconds(5500));
  CHECK(rig.cluster.CountCalls("MemberRemove") == removes);
  // Every try of the add read the membership with quorum first.
  const std::vector<std::string> calls = rig.cluster.Calls();
  int adds = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].rfind("MemberAdd", 0) != 0) continue;
    ++adds;
    REQUIRE(i > 0);
    CHECK(calls[i - 1] == "MemberListLinearizable");
  }
  CHECK(adds == 11);  // refused at 0, 0.5, ... 4.5 s after the removal, made at 5 s
}

TEST_CASE("init: other refusals keep the doubling backoff (no quorum for the read before MemberAdd)") {
  InitRig rig;
  rig.PeersRun();
  const auto start = rig.clock.Now();
  rig.clock.At(start + milliseconds(100), [&] { rig.cluster.SetQuorum(false); });
  rig.clock.At(start + seconds(3), [&] { rig.cluster.SetQuorum(true); });
  rig.cluster.FailAddsUnhealthy(1);
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  // Refused as unhealthy at 0 and asked again at 0.5 s; then no quorum for the read at 0.5, 1 and
  // 2 s (waits of 0.5, 1 and 2 s): it goes through at 4 s.
  CHECK(rig.clock.Now() - start == milliseconds(500 + 500 + 1000 + 2000));
  CHECK(rig.OursInCluster().size() == 1);
}

TEST_CASE("init: a seat another node took while our MemberAdd was refused is not added past --cluster-size") {
  // Simulator seed 13 of 3 nodes: n1 replaces its member (removed, then added back), its add is
  // refused ("unhealthy cluster"), and before the retry another node adds itself into the seat.
  // MemberAdd checks no size: a retry on the decision's facts would grow the cluster to four.
  InitRig rig;
  rig.config.timeout = seconds(3);
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  rig.cluster.FailAddsUnhealthy(1);
  rig.clock.At(rig.clock.Now() + milliseconds(100),
               [&] { rig.cluster.AddStarted(0x4444, "n4", {"http://127.0.0.4:2380"}, {"http://127.0.0.4:2379"}); });
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CAPTURE(out.status().message());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(Contains(out.status().message(), "already has 3 of 3 members and does not list n1"));
  CHECK(rig.cluster.CountCalls("MemberAdd") == 1);
  CHECK(rig.cluster.Members().size() == 3);
  CHECK(rig.OursInCluster().empty());
}

TEST_CASE("init: a node outside the discovered set that joins records itself in its member bucket") {
  // Simulator seed 128 of 3 nodes in init mode: `quorate upkeep` takes its member from the bucket
  // init wrote, and refused to start on one without it, so the learner was never promoted. The
  // operator removed n1, whose node does not answer: its seat is free for a stray.
  InitRig rig;
  const std::string n4 = "http://127.0.0.4:2380";
  rig.config.name = "n4";
  rig.config.initial_advertise_peer_urls = {n4};
  rig.PeersRun();
  InitOptions options = rig.Options();
  options.is_own_address = [](const PeerUrl& url) -> Result<bool> { return url.host == "127.0.0.4"; };
  auto out = InitJob(rig.config, options).Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kJoin);
  auto bucket = LoadBucket(rig.config.state_dir);
  REQUIRE_MESSAGE(bucket.ok(), bucket.status().message());
  const Member* self = bucket->members.FindByName("n4");
  REQUIRE(self != nullptr);
  CHECK(self->peer_urls == std::vector<std::string>{n4});
  CHECK(self->client_urls == std::vector<std::string>{"http://127.0.0.4:2379"});
  CHECK(bucket->members.FindByName("n1") != nullptr);
}

TEST_CASE("init: a replace whose removal no quorum commits by --timeout says so by its reason; on_decision sees the decision") {
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  // Every removal times out, as with a voter counted live that was removed without learning it.
  std::function<void()> again = [&] { rig.cluster.TimeOutNextRemove(again); };
  rig.cluster.TimeOutNextRemove(again);
  std::vector<Action> decided;
  InitOptions options = rig.Options();
  options.on_decision = [&decided](const Decision& d) { decided.push_back(d.action); };
  InitJob job(rig.config, options);
  auto out = job.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(out.status().reason() == Reason::kNoQuorumCommits);
  REQUIRE(decided.size() == 1);
  CHECK(decided[0] == Action::kReplace);
  CHECK(rig.cluster.Members().size() == 3);
}

TEST_CASE("init: 'unhealthy cluster' until --timeout gives up at the deadline, exit 1, saying why") {
  InitRig rig;
  rig.PeersRun();
  rig.cluster.FailAddsUnhealthy(1000);
  auto start = rig.clock.Now();
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(out.status().exit_code() == ExitCode::kFailure);
  CHECK(Contains(out.status().message(), "unhealthy cluster"));
  CHECK(rig.clock.Now() - start == rig.config.timeout);
  CHECK(rig.OursInCluster().empty());
  CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kEtcdConfigFile));
}

// A pipe standing for the SignalWatcher's: a byte in it is a signal.
struct StopPipe {
  int fds[2] = {-1, -1};
  StopPipe() { REQUIRE(pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0); }
  ~StopPipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void Signal() const { REQUIRE(write(fds[1], "x", 1) == 1); }
};

TEST_CASE("init: a stop while waiting for peers ends the wait at once, saying no membership change was under way") {
  InitRig rig;  // no agent answers: the job waits for its peers
  StopPipe pipe;
  rig.stop = {pipe.fds[0], nullptr};
  auto start = rig.clock.Now();
  rig.clock.At(start + seconds(3), [&] { pipe.Signal(); });
  auto out = rig.Run();
  REQUIRE(out.status().IsCancelled());
  CHECK(rig.clock.Now() - start == seconds(3));
  CHECK(Contains(out.status().message(), "no membership change was under way"));
  CHECK(Contains(out.status().message(), "waiting for n2"));
  CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kEtcdConfigFile));
}

TEST_CASE("init: a stop during a replace says the change is half done and what the next start does") {
  InitRig rig;
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {kN1}, {rig.ClientUrl("n1")});
  rig.PeersRun();
  rig.cluster.FailAddsUnhealthy(1000);
  StopPipe pipe;
  rig.stop = {pipe.fds[0], nullptr};
  auto start = rig.clock.Now();
  rig.clock.At(start + seconds(2), [&] { pipe.Signal(); });
  auto out = rig.Run();
  REQUIRE(out.status().IsCancelled());
  CHECK(rig.clock.Now() - start == seconds(2));
  CHECK(Contains(out.status().message(), "half done"));
  CHECK(Contains(out.status().message(), IdToHex(rig.Id("n1"))));
}

TEST_CASE("init: a wake-up of the stop fd that is not a stop (SIGCHLD on the same pipe) lets the wait go on") {
  InitRig rig;
  StopPipe pipe;
  int wakeups = 0;
  rig.stop = {pipe.fds[0], [&] {
                char drained;
                while (read(pipe.fds[0], &drained, 1) == 1) ++wakeups;
                return false;
              }};
  auto start = rig.clock.Now();
  rig.clock.At(start + seconds(1), [&] { pipe.Signal(); });
  auto out = rig.Run();
  CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
  CHECK(wakeups == 1);
  CHECK(rig.clock.Now() - start == rig.config.timeout);
}

// A URL's https twin at port 2381, as the move to TLS gives it.
std::string Https(const std::string& http) { return "https://" + http.substr(7, http.size() - 7 - 5) + ":2381"; }

// n1's quorate recorded `phase` of the move to TLS; its peer TLS files are given (init reads none).
void MovingToHttps(InitRig& rig, int phase) {
  REQUIRE(MakeDirs(rig.config.state_dir + "/tls").ok());
  REQUIRE(WriteFileAtomic(rig.config.state_dir + "/tls/peer-https.json",
                          "{\"id\":\"port 2381\",\"phase\":" + std::to_string(phase) + "}")
              .ok());
  rig.config.peer_tls = {"/pki/peer.crt", "/pki/peer.key", "/pki/ca.crt", true};
}

// n2 and n3 run etcd listed at their https twins, and answer only there.
void PeersRunAtHttps(InitRig& rig) {
  for (const auto& [name, url] : {std::pair{"n2", kN2}, {"n3", kN3}}) {
    rig.cluster.AddStarted(rig.Id(name), name, {Https(url)}, {rig.ClientUrl(name)});
    rig.peers.SetRunning(Https(url), true);
  }
}

TEST_CASE("init: part way through the move to TLS, without the peer TLS files etcd is not started: bad input") {
  InitRig rig;
  MovingToHttps(rig, kHttpsPhaseBoth);
  rig.config.peer_tls = {};
  auto out = rig.Run();
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().IsInvalidArgument());
  CHECK(Contains(out.status().message(), "phase both of the move to TLS"));
  CHECK(Contains(out.status().message(), "--peer-cert-file"));
  CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/" + kBucketFile));
}

TEST_CASE("init: moving to TLS with its data lost, the member listed under its name at either twin is ours") {
  // Without the twins, "a member named n1 with peer URLs not ours" would hold it for ever.
  InitRig rig;
  PeersRunAtHttps(rig);
  std::string listed;
  SUBCASE("done: listed at https, probed there") {
    MovingToHttps(rig, kHttpsPhaseHttps);
    listed = Https(kN1);
  }
  SUBCASE("advertised recorded, its MemberUpdate not yet made: still listed at http") {
    MovingToHttps(rig, kHttpsPhaseAdvertised);
    listed = kN1;
  }
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {listed}, {rig.ClientUrl("n1")});
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kReplace);
  // The voters counted again on a list read with quorum before the removal.
  CHECK(rig.cluster.Calls().at(0) == "MemberListLinearizable");
  CHECK(rig.cluster.Calls().at(1) == "MemberRemove " + IdToHex(rig.Id("n1")));
  // Added back where the phase says the membership lists it.
  std::vector<ClusterMember> ours;
  for (const auto& m : rig.cluster.Members()) {
    if (SharesUrl(m.peer_urls, {Https(kN1)})) ours.push_back(m);
  }
  REQUIRE(ours.size() == 1);
  CHECK(ours[0].is_learner);
  CHECK(Contains(rig.EtcdConfig(), "initial-advertise-peer-urls: " + Https(kN1)));
}

TEST_CASE("init: listed at https part way through the move to TLS, etcd still listens on both twins") {
  InitRig rig;
  MovingToHttps(rig, kHttpsPhaseAdvertised);
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  rig.config.initial_advertise_peer_urls = {kN1};
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->self.peer_urls == std::vector<std::string>{Https(kN1)});
  CHECK(Contains(rig.EtcdConfig(), "listen-peer-urls: " + Https(kN1) + "," + kN1));
}

TEST_CASE("init: moved to TLS, a restart on the old http flags advertises https, and the bucket lists every member there") {
  InitRig rig;
  MovingToHttps(rig, kHttpsPhaseHttps);
  REQUIRE(MakeDirs(rig.config.data_dir + "/member/wal").ok());
  std::ofstream(rig.config.data_dir + "/member/wal/0.wal") << "not read by the planner's restart rule";
  REQUIRE(SaveBucket(rig.config.state_dir, Bucket{rig.expected, {"new", ""}}).ok());
  rig.config.initial_advertise_peer_urls = {kN1};
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {Https(kN1)}, {rig.ClientUrl("n1")});
  PeersRunAtHttps(rig);
  auto out = rig.Run();
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  CHECK(out->decision.action == Action::kRestart);
  CHECK(out->self.peer_urls == std::vector<std::string>{Https(kN1)});
  auto bucket = LoadBucket(rig.config.state_dir);
  REQUIRE(bucket.ok());
  for (const auto& m : bucket->members.members()) {
    CAPTURE(m.name);
    REQUIRE(m.peer_urls.size() == 1);
    CHECK(m.peer_urls[0] == Https(rig.expected.FindByName(m.name)->peer_urls[0]));
  }
  CHECK(rig.cluster.CountCalls("MemberUpdate") == 0);
}

TEST_CASE("init: moved to TLS, a node that lost its volume (its phase with it) on the old http flags follows the move") {
  // Its peers answer only at their https twins, their agents on another member set (their twins'
  // IDs); the cluster's records say the move is done, so it takes its twins and replaces its member.
  InitRig rig;
  rig.config.peer_tls = {"/pki/peer.crt", "/pki/peer.key", "/pki/ca.crt", true};
  PeersRunAtHttps(rig);
  rig.cluster.AddStarted(rig.Id("n1"), "n1", {Https(kN1)}, {rig.ClientUrl("n1")});
  for (const char* name : {"n2", "n3"}) rig.peers.SetAgent(name, {true, "", DataState::kRunning, "tok", 0x5eed});
  SUBCASE("done on every member") {
    REQUIRE(rig.cluster.Put(kPeerHttpsIntentKey, "{\"port\":2381}").ok());
    for (const char* name : {"n1", "n2", "n3"}) {
      REQUIRE(rig.cluster
                  .Put(std::string(kPeerHttpsMembersPrefix) + name,
                       fmt::format("{{\"name\":\"{}\",\"id\":\"port 2381\",\"phase\":3}}", name))
                  .ok());
    }
    auto out = rig.Run();
    REQUIRE_MESSAGE(out.ok(), out.status().message());
    CHECK(out->decision.action == Action::kReplace);
    CHECK(out->self.peer_urls == std::vector<std::string>{Https(kN1)});
    CHECK(LoadPeerHttps(rig.config.state_dir).phase == kHttpsPhaseHttps);
    CHECK(LoadPeerHttps(rig.config.state_dir).port == 2381);
    CHECK(Contains(rig.EtcdConfig(), "initial-advertise-peer-urls: " + Https(kN1)));
  }
  SUBCASE("no move asked: nothing is recorded, and the node waits as before (the peers are on another set)") {
    rig.config.timeout = std::chrono::seconds(2);
    auto out = rig.Run();
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == Status::Code::kDeadlineExceeded);
    CHECK_FALSE(std::filesystem::exists(rig.config.state_dir + "/tls/peer-https.json"));
  }
}

}  // namespace
}  // namespace quorate
