// The leader's maintenance (docs/DESIGN.md §12): the pure planner rule by rule, then the actor against
// a fake cluster (one member at a time, the leader last, an alarm lowered only once its cause is gone).
#include "core/maintenance.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "node/maintenance.h"
#include "testing/fake_clock.h"
#include "testing/fake_etcd.h"

namespace quorate {
namespace {

constexpr MemberId kN1 = 0x11, kN2 = 0x22, kN3 = 0x33;
constexpr int64_t kMB = 1000 * 1000;

MemberUpkeepFacts Member3(MemberId id, const char* name, int64_t size, int64_t in_use) {
  MemberUpkeepFacts m;
  m.id = id;
  m.name = name;
  m.client_url = std::string("http://") + name + ":2379";
  m.answered = true;
  m.db_size = size;
  m.db_size_in_use = in_use;
  return m;
}

// Three healthy voters, n1 leading, small databases with little free; as n1's quorate sees them.
MaintenanceFacts Healthy() {
  MaintenanceFacts f;
  f.self = kN1;
  f.leader = kN1;
  f.revision = 5000;
  f.members = {Member3(kN1, "n1", 20 * kMB, 19 * kMB), Member3(kN2, "n2", 20 * kMB, 19 * kMB),
               Member3(kN3, "n3", 20 * kMB, 19 * kMB)};
  return f;
}

MaintenanceSettings Settings() {
  MaintenanceSettings s;
  s.quota_bytes = 100 * kMB;
  return s;
}

TEST_CASE("maintenance M1: only the leader's quorate acts, and nothing at all when it is off") {
  MaintenanceFacts f = Healthy();
  f.members[1].db_size = 500 * kMB;  // past every threshold
  f.self = kN2;
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kNone);
  CHECK(PlanMaintenance(f, Settings()).rule == "M1");
  f.self = kN1;
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kDefragment);
  MaintenanceSettings off = Settings();
  off.enabled = false;
  CHECK(PlanMaintenance(f, off).action == MaintenanceAction::kNone);
}

TEST_CASE("maintenance M5: a large, fragmented database is defragmented; a healthy small one is not") {
  MaintenanceFacts f = Healthy();
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kNone);
  // Large but not fragmented (44% free): no.
  f.members[2].db_size = 200 * kMB;
  f.members[2].db_size_in_use = 112 * kMB;
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kNone);
  // Fragmented (50% free) but under 100 MiB: no.
  f.members[2].db_size = 60 * kMB;
  f.members[2].db_size_in_use = 30 * kMB;
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kNone);
  // Both: yes, that member.
  f.members[2].db_size = 200 * kMB;
  f.members[2].db_size_in_use = 100 * kMB;
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDefragment);
  CHECK(d.member == kN3);
  CHECK(d.rule == "M5");
}

TEST_CASE("maintenance M5: followers first, the leader last") {
  MaintenanceFacts f = Healthy();
  for (auto& m : f.members) {
    m.db_size = 300 * kMB;
    m.db_size_in_use = 100 * kMB;
  }
  f.leader = f.self = kN2;
  CHECK(PlanMaintenance(f, Settings()).member == kN1);
  f.members[0].db_size = 100 * kMB;  // n1 done
  CHECK(PlanMaintenance(f, Settings()).member == kN3);
  f.members[2].db_size = 100 * kMB;  // n3 done
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.member == kN2);
  CHECK(d.reason.find("the leader, last") != std::string::npos);
}

TEST_CASE("maintenance: never while a member is silent, a learner, the pause runs, or without margin") {
  MaintenanceFacts f = Healthy();
  f.members[2].db_size = 300 * kMB;
  f.members[2].db_size_in_use = 100 * kMB;
  SUBCASE("a member that does not answer") {
    f.members[1].answered = false;
    MaintenanceDecision d = PlanMaintenance(f, Settings());
    CHECK(d.action == MaintenanceAction::kWait);
    CHECK(d.reason.find("n2 do not answer") != std::string::npos);
  }
  SUBCASE("a learner catching up") {
    f.members.push_back(Member3(0x44, "n4", 1 * kMB, 1 * kMB));
    f.members.back().is_learner = true;
    CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kWait);
  }
  SUBCASE("the pause since the last one") {
    f.since_last_defrag = std::chrono::seconds(3);
    CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kWait);
    f.since_last_defrag = std::chrono::seconds(11);
    CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kDefragment);
  }
  SUBCASE("two voters: without the one defragmented the other is no quorum") {
    f.members.erase(f.members.begin() + 1);
    MaintenanceDecision d = PlanMaintenance(f, Settings());
    CHECK(d.action == MaintenanceAction::kWait);
    CHECK(d.reason.find("no margin") != std::string::npos);
  }
}

TEST_CASE("maintenance M3: NOSPACE compacts, defragments one at a time, and disarms only with room again") {
  MaintenanceFacts f = Healthy();
  for (auto& m : f.members) {
    m.db_size = 101 * kMB;
    m.db_size_in_use = 101 * kMB;
  }
  f.members[1].nospace = true;
  // 1. Compact to the current revision (keeping none by default).
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kCompact);
  CHECK(d.revision == 5000);
  CHECK(d.rule == "M3");
  MaintenanceSettings keep = Settings();
  keep.keep_revisions = 1000;
  CHECK(PlanMaintenance(f, keep).revision == 4000);
  // 2. Compacted: the free pages are taken back member by member, whatever the routine thresholds.
  f.compacted = 5000;
  for (auto& m : f.members) m.db_size_in_use = 10 * kMB;
  d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDefragment);
  CHECK(d.member == kN2);
  f.members[1].db_size = 10 * kMB;
  f.since_last_defrag = std::chrono::seconds(1);
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kWait);  // the pause
  f.since_last_defrag = std::chrono::hours(1);
  CHECK(PlanMaintenance(f, Settings()).member == kN3);
  f.members[2].db_size = 10 * kMB;
  CHECK(PlanMaintenance(f, Settings()).member == kN1);  // the leader last
  f.members[0].db_size = 10 * kMB;
  // 3. Every database back under the quota with room: disarm.
  d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDisarm);
}

// Simulator seed 3442 of 3 nodes: the NOSPACE alarm of a member removed since (etcd keeps it,
// etcd-io/etcd#14379) refused every write for good, as no listed member raised it.
TEST_CASE("maintenance M3: the NOSPACE alarm of a member no longer listed is handled as any other, then disarmed") {
  MaintenanceFacts f = Healthy();
  f.nospace_of_removed = {0x99};
  f.compacted = 5000;
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDisarm);
  CHECK(d.rule == "M3");
  CHECK(d.reason.find("NOSPACE raised by removed member " + IdToHex(0x99)) != std::string::npos);
  f.compacted = 0;
  CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kCompact);
}

TEST_CASE("maintenance M3: one or two voters under NOSPACE are defragmented though none can be spared") {
  for (size_t voters : {size_t{1}, size_t{2}}) {
    CAPTURE(voters);
    MaintenanceFacts f = Healthy();
    f.members.resize(voters);
    for (auto& m : f.members) {
      m.db_size = 101 * kMB;
      m.db_size_in_use = 10 * kMB;
      m.nospace = true;
    }
    f.compacted = f.revision;
    MaintenanceDecision d = PlanMaintenance(f, Settings());
    CHECK_MESSAGE(d.action == MaintenanceAction::kDefragment, d.reason);
    CHECK(d.member == (voters == 1 ? kN1 : kN2));  // the leader last
    // Without the alarm the routine rule keeps its margin: the cluster would halt for it.
    for (auto& m : f.members) m.nospace = false;
    MaintenanceSettings s = Settings();
    s.defrag_min_bytes = 50 * kMB;
    d = PlanMaintenance(f, s);
    CHECK(d.action == MaintenanceAction::kWait);
    CHECK_MESSAGE(d.reason.find("no margin") != std::string::npos, d.reason);
  }
  SUBCASE("but never with a voter silent: three voters, one down, wait") {
    MaintenanceFacts f = Healthy();
    for (auto& m : f.members) {
      m.db_size = 101 * kMB;
      m.db_size_in_use = 10 * kMB;
      m.nospace = true;
    }
    f.compacted = f.revision;
    f.members[2].answered = false;
    CHECK(PlanMaintenance(f, Settings()).action == MaintenanceAction::kWait);
  }
}

TEST_CASE("maintenance M3: an alarm whose cause is still there stays, and says what to do") {
  MaintenanceFacts f = Healthy();
  f.compacted = f.revision;
  for (auto& m : f.members) {
    m.db_size = 95 * kMB;  // all in use: nothing to take back
    m.db_size_in_use = 95 * kMB;
    m.nospace = true;
  }
  // Each member is defragmented once under the alarm, the free pages uncounted or not...
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDefragment);
  // ... and no more.
  for (auto& m : f.members) m.defragmented_under_alarm = true;
  d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kWait);
  CHECK(d.reason.find("its cause is still there") != std::string::npos);
  CHECK(d.reason.find("--quota-backend-bytes") != std::string::npos);
}

TEST_CASE(
    "maintenance M3: after the compaction, a member over the limit is defragmented though its free pages "
    "are not counted yet") {
  // etcd counts pages a compaction freed as in use until its next commit, which NOSPACE holds off.
  MaintenanceFacts f = Healthy();
  f.compacted = f.revision;
  for (auto& m : f.members) {
    m.db_size = 101 * kMB;
    m.db_size_in_use = 101 * kMB;
  }
  f.members[0].nospace = true;
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kDefragment);
  CHECK(d.member == kN2);
}

TEST_CASE("maintenance M2: CORRUPT is reported and never disarmed, and stops every other action") {
  MaintenanceFacts f = Healthy();
  f.members[0].nospace = true;
  f.members[2].corrupt = true;
  MaintenanceDecision d = PlanMaintenance(f, Settings());
  CHECK(d.action == MaintenanceAction::kWait);
  CHECK(d.rule == "M2");
  CHECK(d.reason.find("CORRUPT raised by n3") != std::string::npos);
}

TEST_CASE("maintenance M4: with revisions to keep, the history is compacted past twice that") {
  MaintenanceFacts f = Healthy();
  MaintenanceSettings s = Settings();
  s.keep_revisions = 2000;
  f.revision = 3900;
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
  f.revision = 4100;
  MaintenanceDecision d = PlanMaintenance(f, s);
  CHECK(d.action == MaintenanceAction::kCompact);
  CHECK(d.revision == 2100);
  f.compacted = 2100;
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
}

TEST_CASE("maintenance M6: a learner stalled past the deadline is removed; a voter, or one within it, never") {
  MaintenanceFacts f = Healthy();
  MemberUpkeepFacts learner = Member3(0x44, "n4", 1 * kMB, 1 * kMB);
  learner.is_learner = true;
  learner.answered = false;
  learner.stalled_for = std::chrono::minutes(9);
  f.members.push_back(learner);
  MaintenanceSettings s = Settings();
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);

  f.members[3].stalled_for = std::chrono::minutes(10);
  MaintenanceDecision d = PlanMaintenance(f, s);
  CHECK(d.action == MaintenanceAction::kRemoveLearner);
  CHECK(d.member == 0x44);
  CHECK(d.rule == "M6");
  CHECK(d.reason.find("does not answer") != std::string::npos);

  SUBCASE("only by the leader's quorate") {
    f.self = kN2;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
  }
  SUBCASE("never with --learner-deadline 0") {
    s.learner_deadline = std::chrono::milliseconds(0);
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
  }
  SUBCASE("never a voter, however long it was silent") {
    f.members[3].is_learner = false;
    f.members[3].stalled_for = std::chrono::hours(5);
    CHECK(PlanMaintenance(f, s).action != MaintenanceAction::kRemoveLearner);
  }
  SUBCASE("not while CORRUPT stands") {
    f.members[0].corrupt = true;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kWait);
  }
}

TEST_CASE("maintenance M6: a learner's stall counts from its last progress, as the leader saw it") {
  using namespace std::chrono_literals;
  LearnerWatch watch;
  const LearnerWatch::TimePoint t0{};
  MaintenanceFacts f = Healthy();
  f.leader_raft_index = 1000;
  MemberUpkeepFacts learner = Member3(0x44, "n4", 1 * kMB, 1 * kMB);
  learner.is_learner = true;
  learner.raft_applied_index = 10;
  f.members.push_back(learner);
  auto stalled = [&](LearnerWatch::TimePoint now) {
    watch.Observe(f, now);
    return f.members[3].stalled_for;
  };

  CHECK(stalled(t0) == 0ms);           // first seen: its watch starts now
  CHECK(stalled(t0 + 60s) == 60s);     // the same index, behind the leader's
  f.members[3].raft_applied_index = 400;
  CHECK(stalled(t0 + 90s) == 0ms);     // it applied more: progress
  f.members[3].answered = false;
  CHECK(stalled(t0 + 150s) == 60s);    // silent: no progress
  f.members[3].answered = true;
  f.members[3].raft_applied_index = 1000;
  CHECK(stalled(t0 + 400s) == 0ms);    // caught up with the leader
  CHECK(stalled(t0 + 900s) == 0ms);    // and still caught up, with no writes to apply

  f.members[3].raft_applied_index = 990;
  f.leader_raft_index = 5000;
  CHECK(stalled(t0 + 960s) == 60s);
  watch.Forget();                      // this quorate stopped leading: a new watch starts from nothing
  CHECK(stalled(t0 + 2000s) == 0ms);

  f.members[3].is_learner = false;     // promoted: no longer watched
  CHECK(stalled(t0 + 3000s) == 0ms);
}

// Five members of StatefulSet etcd, etcd-0 leading, as its quorate sees them.
MaintenanceFacts FiveOfAStatefulSet() {
  MaintenanceFacts f;
  f.self = 0x10;
  f.leader = 0x10;
  for (int i = 0; i < 5; ++i) {
    std::string name = "etcd-" + std::to_string(i);
    f.members.push_back(Member3(0x10 + i, name.c_str(), 20 * kMB, 19 * kMB));
  }
  return f;
}

TEST_CASE("maintenance M7: scaled from 5 to 3, the highest ordinal goes first, each while a majority is left") {
  MaintenanceFacts f = FiveOfAStatefulSet();
  MaintenanceSettings s = Settings();
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);  // no StatefulSet known
  f.scale_target = 5;
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);

  f.scale_target = 3;
  MaintenanceDecision d = PlanMaintenance(f, s);
  CHECK(d.action == MaintenanceAction::kRemoveMember);
  CHECK(d.rule == "M7");
  CHECK(d.member == 0x14);  // etcd-4
  f.members.pop_back();
  d = PlanMaintenance(f, s);
  CHECK(d.action == MaintenanceAction::kRemoveMember);
  CHECK(d.member == 0x13);  // etcd-3
  f.members.pop_back();
  CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);

  SUBCASE("going is by ordinal: with a member removed by hand, 5 -> 4 still takes etcd-4") {
    f = FiveOfAStatefulSet();
    f.members.erase(f.members.begin() + 1);  // etcd-1 removed by the operator
    f.scale_target = 4;
    d = PlanMaintenance(f, s);
    CHECK(d.action == MaintenanceAction::kRemoveMember);
    CHECK(d.member == 0x14);
  }
  SUBCASE("not while the voters left would not answer as a majority") {
    f = FiveOfAStatefulSet();
    f.scale_target = 3;
    f.members[1].answered = false;  // etcd-1
    f.members[2].answered = false;  // etcd-2
    // Left after etcd-4: etcd-0..3, of which 2 answer: no majority of 4.
    d = PlanMaintenance(f, s);
    CHECK(d.action == MaintenanceAction::kWait);
    CHECK(d.reason.find("no majority") != std::string::npos);
  }
  SUBCASE("the silent members going do not hold their own removal up") {
    f = FiveOfAStatefulSet();
    f.scale_target = 3;
    f.members[3].answered = false;
    f.members[4].answered = false;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kRemoveMember);
  }
  SUBCASE("the leader's own member waits for another leader") {
    f = FiveOfAStatefulSet();
    f.scale_target = 3;
    f.self = f.leader = 0x14;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kWait);
  }
  SUBCASE("scaled to 0 (paused), names not one StatefulSet's, an unstarted member, or off: nothing") {
    f = FiveOfAStatefulSet();
    f.scale_target = 0;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
    f.scale_target = 3;
    f.members[2].name = "other-2";
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
    f.members[2].name = "";
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
    f.members[2].name = "etcd-2";
    s.scale_in = false;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
  }
  SUBCASE("only by the leader's quorate") {
    f = FiveOfAStatefulSet();
    f.scale_target = 3;
    f.self = 0x11;
    CHECK(PlanMaintenance(f, s).action == MaintenanceAction::kNone);
  }
}

// The actor: n1 leads a fake cluster whose three databases filled the quota.
template <class Client>
struct RigOf {
  FakeClock clock;
  Client cluster;
  Maintainer maintainer{Settings(), clock};
  RigOf() {
    cluster.AddStarted(kN1, "n1", {"http://n1:2380"}, {"http://n1:2379"});
    cluster.AddStarted(kN2, "n2", {"http://n2:2380"}, {"http://n2:2379"});
    cluster.AddStarted(kN3, "n3", {"http://n3:2380"}, {"http://n3:2379"});
    cluster.SetRevision(7000);
    for (MemberId id : {kN1, kN2, kN3}) cluster.SetDatabase(id, 101 * kMB, 8 * kMB);
    cluster.RaiseAlarm({kN2, AlarmKind::kNoSpace});
  }
  void Rounds(int n) {
    for (int i = 0; i < n; ++i) {
      maintainer.Round(cluster, kN1);
      clock.Advance(std::chrono::seconds(5));
    }
  }
  std::vector<std::string> Actions() const {
    std::vector<std::string> out;
    for (const auto& c : cluster.Calls()) {
      if (c.starts_with("Compact") || c.starts_with("Defragment") || c.starts_with("AlarmDisarm")) out.push_back(c);
    }
    return out;
  }
};
using Rig = RigOf<FakeEtcdClient>;

TEST_CASE("maintainer: NOSPACE cleared with no operator: compact, followers then the leader, then disarm") {
  Rig rig;
  rig.Rounds(12);
  CHECK(rig.Actions() == std::vector<std::string>{"Compact 7000", "Defragment http://n2:2379",
                                                  "Defragment http://n3:2379", "Defragment http://n1:2379",
                                                  "AlarmDisarm NOSPACE 22"});
  CHECK(rig.cluster.Alarms().empty());
  CHECK(rig.cluster.CompactedRevision() == 7000);
  std::string metrics = rig.maintainer.RenderMetrics();
  CHECK(metrics.find("quorate_maintenance_actions_total{action=\"defragment\"} 3") != std::string::npos);
  CHECK(metrics.find("quorate_maintenance_actions_total{action=\"disarm\"} 1") != std::string::npos);
}

// Simulator seed 3220 of 3 nodes: the alarm came back before any round saw the cluster without it
// (the looks failed meanwhile), and the members defragmented in the last episode were skipped: the
// leader went first.
TEST_CASE("maintainer: a NOSPACE raised again after quorate disarmed it defragments every member again, followers first") {
  Rig rig;
  for (int round = 0; round < 12 && !rig.cluster.Alarms().empty(); ++round) rig.Rounds(1);
  REQUIRE(rig.cluster.Alarms().empty());
  rig.cluster.SetRevision(9000);
  for (MemberId id : {kN1, kN2, kN3}) rig.cluster.SetDatabase(id, 101 * kMB, 8 * kMB);
  rig.cluster.RaiseAlarm({kN3, AlarmKind::kNoSpace});
  rig.Rounds(12);
  const std::vector<std::string> actions = rig.Actions();
  REQUIRE(actions.size() >= 5);
  std::vector<std::string> again(actions.begin() + 5, actions.end());
  CHECK(again == std::vector<std::string>{"Compact 9000", "Defragment http://n2:2379", "Defragment http://n3:2379",
                                          "Defragment http://n1:2379", "AlarmDisarm NOSPACE 33"});
}

TEST_CASE("maintainer: the NOSPACE alarm of a member removed since is disarmed once the listed members have room") {
  Rig rig;
  REQUIRE(rig.cluster.MemberRemove(kN2).ok());  // etcd keeps the alarm n2 raised
  rig.Rounds(12);
  CHECK(rig.cluster.Alarms().empty());
  const std::vector<std::string> actions = rig.Actions();
  REQUIRE_FALSE(actions.empty());
  CHECK(actions.back() == "AlarmDisarm NOSPACE 22");
}

// Simulator seed 1135 of 3 nodes: n3's member was replaced (rule 4: the same URLs, a new ID) as the
// leader's round began on a list from before, and the new learner's etcd answered at the old voter's
// client URL; the round counted that voter as answering and defragmented with one voter of two left.
struct ReplacedAtN3 : FakeEtcdClient {
  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    auto st = FakeEtcdClient::EndpointStatusOf(endpoint);
    if (st.ok() && endpoint == "http://n3:2379") st->member_id = 0x44;
    return st;
  }
};

TEST_CASE("maintainer: a member whose client URL answers as another member does not answer") {
  RigOf<ReplacedAtN3> rig;
  rig.Rounds(12);
  CHECK(rig.cluster.CountCalls("Compact") == 1);
  CHECK(rig.cluster.CountCalls("Defragment") == 0);
  CHECK_FALSE(rig.cluster.Alarms().empty());
}

TEST_CASE("maintainer: a follower's quorate does nothing, and asks no one but its own etcd") {
  Rig rig;
  rig.maintainer.Round(rig.cluster, kN2);
  CHECK(rig.Actions().empty());
  CHECK(rig.cluster.CountCalls("EndpointStatus") == 1);
}

TEST_CASE("maintainer: a new leader's quorate finishes what the last one began (compaction done already)") {
  Rig rig;
  REQUIRE(rig.cluster.Compact(7000).ok());  // the last leader compacted, then its quorate died
  rig.Rounds(12);
  CHECK(rig.cluster.Alarms().empty());
  CHECK(rig.cluster.CountCalls("Defragment") == 3);
}

TEST_CASE("maintainer: a learner whose node never started is removed after the deadline, and only then") {
  FakeClock clock;
  FakeEtcdClient cluster;
  MaintenanceSettings s = Settings();
  s.learner_deadline = std::chrono::seconds(30);
  Maintainer maintainer(s, clock);
  cluster.AddStarted(kN1, "n1", {"http://n1:2380"}, {"http://n1:2379"});
  cluster.AddStarted(kN2, "n2", {"http://n2:2380"}, {"http://n2:2379"});
  cluster.AddStarted(kN3, "n3", {"http://n3:2380"}, {"http://n3:2379"});
  cluster.AddUnstarted(0x44, {"http://n4:2380"}, /*is_learner=*/true);
  for (int i = 0; i < 6; ++i) {  // 25 s: within the deadline
    maintainer.Round(cluster, kN1);
    clock.Advance(std::chrono::seconds(5));
  }
  CHECK(cluster.CountCalls("MemberRemove") == 0);
  maintainer.Round(cluster, kN1);
  CHECK(cluster.CountCalls("MemberRemove") == 1);
  auto listing = cluster.MemberList();
  REQUIRE(listing.ok());
  CHECK(listing->members.size() == 3);
  // Its record first, so that the learner's node joins again rather than hold (rule 1b).
  const auto calls = cluster.Calls();
  const auto put = std::find(calls.begin(), calls.end(), "Put " + LearnerRemovalKey(0x44));
  CHECK(put < std::find(calls.begin(), calls.end(), "MemberRemove " + IdToHex(0x44)));
  REQUIRE(cluster.keys.count(LearnerRemovalKey(0x44)) == 1);
  auto record = nlohmann::json::parse(cluster.keys[LearnerRemovalKey(0x44)]);
  CHECK(record["state"] == kLearnerRemoving);
  CHECK(record["rule"] == "M6");
  CHECK(record["member"] == IdToHex(0x44));
  CHECK(maintainer.RenderMetrics().find("quorate_maintenance_actions_total{action=\"remove-learner\"} 1") !=
        std::string::npos);
}

TEST_CASE("maintainer: a scale-in removes one member a round, and a scale back up calls the next removal off") {
  FakeClock clock;
  FakeEtcdClient cluster;
  Maintainer maintainer(Settings(), clock);
  for (int i = 0; i < 5; ++i) {
    const std::string name = "etcd-" + std::to_string(i);
    cluster.AddStarted(0x10 + i, name, {"http://" + name + ":2380"}, {"http://" + name + ":2379"});
  }
  size_t replicas = 3;
  int reads = 0;
  maintainer.SetScaleTarget([&]() -> Result<std::optional<size_t>> {
    ++reads;
    return std::optional<size_t>(replicas);
  });
  maintainer.Round(cluster, 0x10);
  CHECK(cluster.CountCalls("MemberRemove") == 1);
  CHECK(cluster.MemberList()->members.size() == 4);
  replicas = 5;  // scaled back up before the next round: etcd-3 stays
  clock.Advance(std::chrono::seconds(5));
  maintainer.Round(cluster, 0x10);
  CHECK(cluster.CountCalls("MemberRemove") == 1);
  CHECK(cluster.MemberList()->members.size() == 4);
  CHECK(reads >= 3);  // read again whenever the members outnumber it, and before each removal
  CHECK(maintainer.RenderMetrics().find("quorate_maintenance_actions_total{action=\"remove-member\"} 1") !=
        std::string::npos);
}

}  // namespace
}  // namespace quorate
