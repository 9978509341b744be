#include <doctest/doctest.h>

#include <set>
#include <string>

#include "core/planner.h"

namespace quorate {
namespace {

std::string PeerUrlOf(int k) { return "http://127.0.0." + std::to_string(k) + ":2380"; }
std::string ClientUrlOf(int k) { return "http://127.0.0." + std::to_string(k) + ":2379"; }
std::string NameOf(int k) { return "n" + std::to_string(k); }

Member MemberNo(int k) { return Member{NameOf(k), {PeerUrlOf(k)}, {ClientUrlOf(k)}}; }

// Members n<k> on http://127.0.0.<k>:2380 for every k in `ks`.
MemberSet MakeSetOf(const std::vector<int>& ks, const std::string& token = "tok") {
  std::vector<Member> members;
  for (int k : ks) members.push_back(MemberNo(k));
  auto set = MemberSet::Create(members, token);
  REQUIRE(set.ok());
  return *set;
}

MemberSet MakeSet(int n, const std::string& token = "tok") {
  std::vector<int> ks;
  for (int k = 1; k <= n; ++k) ks.push_back(k);
  return MakeSetOf(ks, token);
}

AgentReport AgentOk(const MemberSet& set) {
  AgentReport a;
  a.reachable = true;
  a.data_state = DataState::kEmpty;
  a.token = set.token();
  a.expected_cluster_id = set.cluster_id();
  return a;
}

// Self is n<self_k>; every other expected member reports an empty, agreeing agent and no cluster.
PlanInput MakeInput(const MemberSet& set, int self_k = 1) {
  PlanInput in;
  in.self = MemberNo(self_k);
  in.expected = set;
  in.cluster_size = set.size();
  for (const auto& m : set.members()) {
    if (m.name == in.self.name) continue;
    in.peers.push_back(PeerFacts{m.name, AgentOk(set), std::nullopt, {}, std::nullopt});
  }
  return in;
}

PeerFacts& PeerNamed(PlanInput& in, const std::string& name) {
  for (auto& p : in.peers) {
    if (p.name == name) return p;
  }
  FAIL("no peer " << name);
  return in.peers.front();
}

ClusterMember CMember(const MemberSet& set, int k, bool started, bool named = true) {
  ClusterMember m;
  m.id = set.IdOf(MemberNo(k));
  if (named || started) m.name = NameOf(k);
  m.peer_urls = {PeerUrlOf(k)};
  if (started) m.client_urls = {ClientUrlOf(k)};
  return m;
}

// The cluster `set` bootstrapped into, with the members in `started` already published.
ClusterView ViewOf(const MemberSet& set, const std::set<int>& started) {
  ClusterView v;
  v.cluster_id = set.cluster_id();
  for (const auto& m : set.members()) {
    int k = std::stoi(m.name.substr(1));
    v.members.push_back(CMember(set, k, started.count(k) != 0));
  }
  return v;
}

void GiveAllViews(PlanInput& in, const ClusterView& v) {
  for (auto& p : in.peers) p.cluster = v;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("ActionName names every action") {
  CHECK(std::string(ActionName(Action::kRestart)) == "restart");
  CHECK(std::string(ActionName(Action::kJoin)) == "join");
  CHECK(std::string(ActionName(Action::kLateInitial)) == "late-initial");
  CHECK(std::string(ActionName(Action::kReplace)) == "replace");
  CHECK(std::string(ActionName(Action::kNew)) == "new");
  CHECK(std::string(ActionName(Action::kWait)) == "wait");
}

// ---- rule 5: new ----

TEST_CASE("a single-member set with no peers starts new") {
  MemberSet set = MakeSet(1);
  PlanInput in = MakeInput(set);
  REQUIRE(in.peers.empty());
  Decision d = Plan(in);
  CHECK(d.action == Action::kNew);
  CHECK(d.wait == WaitKind::kNone);
  CHECK(d.initial_cluster_state == "new");
  CHECK(d.initial_cluster == "n1=http://127.0.0.1:2380");
  CHECK(d.cluster_id == set.cluster_id());
  CHECK_FALSE(d.add_member);
  CHECK_FALSE(d.remove_id.has_value());
}

TEST_CASE("three empty, agreeing members each decide new with the same initial cluster") {
  MemberSet set = MakeSet(3);
  for (int self = 1; self <= 3; ++self) {
    CAPTURE(self);
    Decision d = Plan(MakeInput(set, self));
    CHECK(d.action == Action::kNew);
    CHECK(d.initial_cluster_state == "new");
    CHECK(d.initial_cluster == set.InitialCluster());
    CHECK(d.initial_cluster ==
          "n1=http://127.0.0.1:2380,n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380");
    CHECK(d.cluster_id == set.cluster_id());
    CHECK(d.endpoints.empty());
  }
}

TEST_CASE("new needs every peer: each kind of disagreement waits and names the peer") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);

  SUBCASE("unreachable agent, with its error") {
    PeerNamed(in, "n2").agent = AgentReport{false, "connection refused", DataState::kUnknown, "", 0};
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: agent unreachable (connection refused)"));
    CHECK_FALSE(Contains(d.reason, "n3"));
    CHECK(d.initial_cluster_state.empty());
  }
  SUBCASE("other token") {
    PeerNamed(in, "n3").agent.token = "other";
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n3: different token 'other'"));
  }
  SUBCASE("other member set") {
    PeerNamed(in, "n2").agent.expected_cluster_id = MakeSet(4).cluster_id();
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: different member set"));
    CHECK(Contains(d.reason, IdToHex(set.cluster_id())));
  }
  SUBCASE("has data but etcd not answering") {
    PeerNamed(in, "n2").agent.data_state = DataState::kHasData;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: has data but its etcd is not answering"));
  }
  SUBCASE("running but not answering") {
    PeerNamed(in, "n3").agent.data_state = DataState::kRunning;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n3: runs etcd but it is not answering"));
  }
  SUBCASE("data state unknown") {
    PeerNamed(in, "n3").agent.data_state = DataState::kUnknown;
    CHECK(Plan(in).wait == WaitKind::kPeersNotReady);
  }
  SUBCASE("missing from the peers list") {
    in.peers.erase(in.peers.begin());  // n2
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: no report"));
  }
  SUBCASE("an empty peers list for a three-member set") {
    in.peers.clear();
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: no report"));
    CHECK(Contains(d.reason, "n3: no report"));
  }
  SUBCASE("a duplicate report that disagrees blocks") {
    PeerFacts dup = PeerNamed(in, "n2");
    dup.agent.token = "other";
    in.peers.push_back(dup);
    CHECK(Plan(in).wait == WaitKind::kPeersNotReady);
  }
  SUBCASE("every blocker at once, on one line") {
    PeerNamed(in, "n2").agent = AgentReport{false, "deadline\nexceeded", DataState::kUnknown, "", 0};
    PeerNamed(in, "n3").agent.token = "x";
    PeerNamed(in, "n3").agent.data_state = DataState::kHasData;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "n2: agent unreachable (deadline exceeded)"));
    CHECK(Contains(d.reason, "n3: has data"));
    CHECK(Contains(d.reason, "different token 'x'"));
    CHECK_FALSE(Contains(d.reason, "\n"));
  }
}

TEST_CASE("a peer URL answering as etcd never does is unknown, never 'no cluster'") {
  // The agent of n2 says empty and agreeing, but something answers on its etcd peer URL: HTTP 500,
  // not JSON, no cluster ID. Taking that for "no etcd there" could start a second cluster.
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  PeerNamed(in, "n2").foreign_answer = "http://127.0.0.2:2380/members answered HTTP 500, not 200";
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "n2: its etcd peer URL answered as etcd never does"));
  CHECK(Contains(d.reason, "HTTP 500"));
  CHECK_FALSE(Contains(d.reason, "n3"));

  SUBCASE("beside a disagreement, both are said") {
    PeerNamed(in, "n2").agent.token = "other";
    Decision both = Plan(in);
    CHECK(Contains(both.reason, "different token 'other'"));
    CHECK(Contains(both.reason, "HTTP 500"));
  }
  SUBCASE("a cluster another peer reports is still joined: the foreign answer hides no cluster from it") {
    PlanInput big = MakeInput(MakeSet(4), 4);
    big.cluster_size = 4;
    MemberSet three = MakeSet(3);
    PeerNamed(big, "n1").cluster = ViewOf(three, {1, 2, 3});
    PeerNamed(big, "n2").foreign_answer = "http://127.0.0.2:2380/members is not an etcd peer answer: body is not JSON";
    // n1's view lacks n4, so n4 joins the cluster n1 reports (3 of 4 members).
    Decision j = Plan(big);
    CHECK(j.action == Action::kJoin);
    CHECK(j.cluster_id == three.cluster_id());
  }
}

TEST_CASE("reports from peers outside the expected set do not block new") {
  MemberSet set = MakeSet(2);
  PlanInput in = MakeInput(set);
  in.peers.push_back(PeerFacts{"stranger", AgentReport{}, std::nullopt, {}, std::nullopt});
  CHECK(Plan(in).action == Action::kNew);
}

TEST_CASE("without a cluster, a node outside the expected set is extra") {
  MemberSet set = MakeSetOf({2, 3});
  PlanInput in = MakeInput(set, 1);  // n1 is not in {n2, n3}
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kExtra);
  CHECK(Contains(d.reason, "n1 is not in the expected member set (n2,n3)"));
}

TEST_CASE("without a cluster, self advertising other peer URLs than discovery waits") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  in.self.peer_urls = {"http://127.0.0.9:2380"};
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "http://127.0.0.9:2380"));
}

// ---- rule 1: restart ----

TEST_CASE("local data restarts with state new and the expected initial cluster") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  in.has_local_data = true;
  Decision d = Plan(in);
  CHECK(d.action == Action::kRestart);
  CHECK(d.wait == WaitKind::kNone);
  CHECK(d.initial_cluster_state == "new");
  CHECK(d.initial_cluster == set.InitialCluster());
  CHECK(Contains(d.reason, "local data"));
  CHECK_FALSE(d.add_member);
  CHECK_FALSE(d.remove_id.has_value());
}

TEST_CASE("restart beats every other rule") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  in.has_local_data = true;

  SUBCASE("conflicting clusters") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {2, 3});
    PeerNamed(in, "n3").cluster = ViewOf(MakeSet(3, "other"), {2, 3});
    Decision d = Plan(in);
    CHECK(d.action == Action::kRestart);
    CHECK_FALSE(d.cluster_id.has_value());
  }
  SUBCASE("listed as started without quorum") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {1, 2, 3});
    Decision d = Plan(in);
    CHECK(d.action == Action::kRestart);
    CHECK(d.cluster_id == set.cluster_id());
    CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(1), ClientUrlOf(2), ClientUrlOf(3)});
  }
  SUBCASE("listed but never started") {
    GiveAllViews(in, ViewOf(set, {2, 3}));
    CHECK(Plan(in).action == Action::kRestart);
  }
  SUBCASE("full cluster that does not list us") {
    MemberSet other = MakeSetOf({2, 3, 4});
    GiveAllViews(in, ViewOf(other, {2, 3, 4}));
    CHECK(Plan(in).action == Action::kRestart);
  }
  SUBCASE("peers unreachable") {
    for (auto& p : in.peers) p.agent = AgentReport{false, "down", DataState::kUnknown, "", 0};
    CHECK(Plan(in).action == Action::kRestart);
  }
  SUBCASE("self outside the expected set: still restarts, and the config names self") {
    in.self = MemberNo(7);
    Decision d = Plan(in);
    CHECK(d.action == Action::kRestart);
    CHECK(d.initial_cluster == set.InitialCluster() + ",n7=http://127.0.0.7:2380");
  }
}

// ---- rule 1c: local data of a cluster the peers no longer run (a restore passed this node by) ----

TEST_CASE("rule 1c: an old member that missed a restore waits and says how to join") {
  MemberSet old_set = MakeSet(3);
  MemberSet restored = MakeSet(3, "tok-2");
  PlanInput in = MakeInput(old_set);
  in.has_local_data = true;
  in.local = WalIdentity{old_set.IdOf(MemberNo(1)), old_set.cluster_id()};
  SUBCASE("a majority of the new cluster answers: wait, etcd not started") {
    GiveAllViews(in, ViewOf(restored, {1, 2, 3}));
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(Contains(d.reason, "a restore or a recovery made a new cluster"));
    CHECK(Contains(d.reason, IdToHex(restored.cluster_id())));
    CHECK(Contains(d.reason, "--restore-from"));
  }
  SUBCASE("one of three answers: not enough to say, restart as ever") {
    PeerNamed(in, "n2").cluster = ViewOf(restored, {1, 2, 3});
    CHECK(Plan(in).action == Action::kRestart);
  }
  SUBCASE("the peers run our own cluster: restart") {
    GiveAllViews(in, ViewOf(old_set, {1, 2, 3}));
    CHECK(Plan(in).action == Action::kRestart);
  }
}

// ---- rule 1b: local data of a member the cluster removed ----

// n5 with data of its bootstrap ID in `set` (5 members); peers n<k> for k in `answering` report the
// cluster as `members` (all started), the others do not answer on their peer URLs; a linearizable
// member list confirms that membership.
PlanInput RemovedInput(const MemberSet& set, const std::set<int>& members, const std::set<int>& answering) {
  PlanInput in = MakeInput(set, 5);
  in.has_local_data = true;
  in.local = WalIdentity{set.IdOf(MemberNo(5)), set.cluster_id()};
  ClusterView v;
  v.cluster_id = set.cluster_id();
  for (int k : members) v.members.push_back(CMember(set, k, true));
  for (auto& p : in.peers) {
    if (answering.count(std::stoi(p.name.substr(1)))) p.cluster = v;
  }
  in.quorum_view = v;
  return in;
}

TEST_CASE("rule 1b: views that lack us are no removal until a linearizable member list confirms it") {
  // All restarted at once on etcd 3.4: a peer URL answers GET /members while its etcd replays its WAL,
  // listing only the members added so far. Taken for a removal, that moved a healthy member's data aside.
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set, 3);
  in.has_local_data = true;
  in.local = WalIdentity{set.IdOf(MemberNo(3)), set.cluster_id()};
  ClusterView replaying;
  replaying.cluster_id = set.cluster_id();
  replaying.members.push_back(CMember(set, 1, true));
  for (auto& p : in.peers) p.cluster = replaying;
  SUBCASE("no quorum yet to confirm: restart on our data") {
    Decision d = Plan(in);
    CHECK(d.action == Action::kRestart);
    CHECK_FALSE(d.move_data_aside);
  }
  SUBCASE("the quorum view lists us: restart on our data") {
    ClusterView whole = replaying;
    whole.members.push_back(CMember(set, 2, true));
    whole.members.push_back(CMember(set, 3, true));
    in.quorum_view = whole;
    Decision d = Plan(in);
    CHECK(d.action == Action::kRestart);
    CHECK_FALSE(d.move_data_aside);
  }
  SUBCASE("the quorum view is of another cluster: restart on our data") {
    ClusterView other = replaying;
    other.cluster_id = 0x1234;
    in.quorum_view = other;
    CHECK(Plan(in).action == Action::kRestart);
  }
  SUBCASE("the quorum view lacks us too: removed") {
    in.quorum_view = replaying;
    Decision d = Plan(in);
    CHECK(d.action == Action::kJoin);
    CHECK(d.move_data_aside);
    CHECK(Contains(d.reason, "a member list read with quorum lacks it"));
  }
}

TEST_CASE("removed while etcd ran here: wait, never restart etcd, never rejoin") {
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {1, 2, 3});
  in.etcd_ran = true;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kRemoved);
  CHECK(Contains(d.reason, "member " + IdToHex(set.IdOf(MemberNo(5))) + " (n5) was removed from cluster " +
                               IdToHex(set.cluster_id()) + ": a member list read with quorum lacks it"));
  CHECK(Contains(d.reason, "not restarting etcd"));
  CHECK_FALSE(d.move_data_aside);
  CHECK_FALSE(d.add_member);
  CHECK(d.data_removed);
}

TEST_CASE("rule 1b's hold, asked again: it stands, and says when the cluster it was removed from lost a majority") {
  // n5 was removed from a cluster of n1, n2 and n3 (seed 1589 of 3 nodes: the voters left after the
  // operator's removal then lost their volumes; no etcd ran anywhere, the emptied nodes waited for
  // the removed node's data to answer, and nobody said a majority was lost).
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {});
  in.held_removal = in.quorum_view;
  in.quorum_view.reset();
  for (auto& p : in.peers) p.agent.data_state = DataState::kHasData;
  auto hold_stands = [&] {
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kRemoved);
    CHECK(Contains(d.reason, "a member list read with quorum lacks it: not restarting etcd"));
    CHECK_FALSE(d.add_member);
    CHECK_FALSE(d.move_data_aside);
    CHECK(d.data_removed);
  };
  SUBCASE("its voters hold data: the hold stands, even with etcd_ran unknown to this decision") {
    hold_stands();
  }
  SUBCASE("one of three emptied: two still make a majority") {
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    hold_stands();
  }
  SUBCASE("two of three emptied, their etcds silent: a majority is lost, and the hold stands") {
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    PeerNamed(in, "n2").agent.data_state = DataState::kEmpty;
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "was removed from cluster " + IdToHex(set.cluster_id())));
    CHECK(Contains(d.reason, "2 of its 3 voters (n1, n2)"));
    CHECK(Contains(d.reason, "not restarting etcd"));
    CHECK(Contains(d.reason, "--restore-from"));
    CHECK_FALSE(d.add_member);
    CHECK(d.data_removed);
  }
  SUBCASE("an emptied one whose agent is down now counts as it last said") {
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    PeerNamed(in, "n2").agent = AgentReport{};
    PeerNamed(in, "n2").empty_when_last_answered = true;
    CHECK(Plan(in).wait == WaitKind::kMajorityLost);
  }
  SUBCASE("an empty voter whose etcd answers is no loss: it rejoined") {
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    PeerNamed(in, "n2").agent.data_state = DataState::kEmpty;
    PeerNamed(in, "n2").cluster = *in.held_removal;
    hold_stands();
  }
  SUBCASE("an empty voter that never started is no loss: rule 3 may still start it") {
    for (auto& m : in.held_removal->members) {
      if (m.name == "n2") m.client_urls.clear();
    }
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    PeerNamed(in, "n2").agent.data_state = DataState::kEmpty;
    hold_stands();
  }
  SUBCASE("a voter whose instance left a whole group counts with an emptied one") {
    in.expected_is_whole_group = true;
    in.silent_outsiders = {set.IdOf(MemberNo(3))};
    PeerNamed(in, "n1").agent.data_state = DataState::kEmpty;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "2 of its 3 voters (n1, n3)"));
  }
}

TEST_CASE("removed by rule M6 (its record says so) while etcd ran here: a stuck learner's node joins again, its data aside") {
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {1, 2, 3});
  in.etcd_ran = true;
  in.removed_by_learner_deadline = true;
  Decision d = Plan(in);
  CHECK(d.action == Action::kJoin);
  CHECK(d.move_data_aside);
  CHECK(d.data_removed);
  CHECK(Contains(d.reason, "rule M6's record says it removed that learner, stuck past --learner-deadline"));
}

TEST_CASE("removed, as a decision of this process found before, and no quorum view now: wait, never restart") {
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {1, 2, 3});
  in.quorum_view.reset();  // a partition: no member list read with quorum
  in.removed_before = true;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(d.data_removed);
  CHECK(Contains(d.reason, "as a member list read with quorum showed before: not restarting etcd"));
  in.removed_before = false;
  CHECK(Plan(in).action == Action::kRestart);  // rule 1, as ever, without a removal seen
}

TEST_CASE("removed, and started afresh below --cluster-size: data aside, join as a learner") {
  MemberSet set = MakeSet(5);
  Decision d = Plan(RemovedInput(set, {1, 2, 3}, {1, 2, 3}));
  CHECK(d.action == Action::kJoin);
  CHECK(d.move_data_aside);
  CHECK(d.data_removed);
  CHECK(d.add_member);
  CHECK(d.initial_cluster_state == "existing");
  CHECK(d.initial_cluster ==
        "n1=http://127.0.0.1:2380,n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n5=http://127.0.0.5:2380");
  CHECK(d.cluster_id == set.cluster_id());
  CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(1), ClientUrlOf(2), ClientUrlOf(3)});
  CHECK(Contains(d.reason, "was removed from cluster"));
  CHECK(Contains(d.reason, "moving its data aside (kept, not deleted)"));
  CHECK(Contains(d.reason, "has 3 of 5 members"));
}

TEST_CASE("removed, and started afresh at --cluster-size: wait as extra, saying it was removed") {
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {1, 2, 3});
  in.cluster_size = 3;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kExtra);
  CHECK(Contains(d.reason, "was removed from cluster"));
  CHECK(Contains(d.reason, "raise --cluster-size"));
  CHECK_FALSE(d.move_data_aside);
}

TEST_CASE("removed, and our peer URLs since added back under a new ID") {
  MemberSet set = MakeSet(5);
  PlanInput in = RemovedInput(set, {1, 2, 3}, {1, 2, 3});
  ClusterMember readded;
  readded.id = 0xabc;
  readded.peer_urls = {PeerUrlOf(5)};
  for (auto& p : in.peers) {
    if (p.cluster) p.cluster->members.push_back(readded);
  }
  in.quorum_view->members.push_back(readded);
  SUBCASE("not started yet: an earlier rejoin stopped mid-way, so resume it with the data aside") {
    Decision d = Plan(in);
    CHECK(d.action == Action::kJoin);
    CHECK(d.move_data_aside);
    CHECK_FALSE(d.add_member);
  }
  SUBCASE("started: someone else runs there; wait") {
    for (auto& p : in.peers) {
      if (p.cluster) p.cluster->members.back().client_urls = {ClientUrlOf(5)};
    }
    in.quorum_view->members.back().client_urls = {ClientUrlOf(5)};
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK_FALSE(d.move_data_aside);
  }
}

TEST_CASE("a removal is only concluded from our own cluster's member list read with quorum, lacking our ID") {
  // 4 voters n1..n4 without n5; n5's data says member n5 of the set's cluster. Every combination of
  // which voters answer GET /members, whether the WAL names this cluster, whether the cluster still
  // lists our ID (as a voter or a learner), whether etcd ran here, the size, and the quorum view.
  MemberSet set = MakeSet(5);
  int combinations = 0;
  for (int mask = 0; mask < 16; ++mask) {
    std::set<int> answering;
    for (int k = 1; k <= 4; ++k) {
      if (mask & (1 << (k - 1))) answering.insert(k);
    }
    for (bool same_cluster : {true, false}) {
      for (int listed = 0; listed < 3; ++listed) {  // 0: not listed, 1: as a voter, 2: as a learner
        for (bool etcd_ran : {false, true}) {
          for (size_t size : {4, 5}) {
            for (bool wal_read : {true, false}) {
             for (int quorum = 0; quorum < 3; ++quorum) {  // 0: confirms the views, 1: none, 2: lists us
              ++combinations;
              PlanInput in = RemovedInput(set, {1, 2, 3, 4}, answering);
              in.etcd_ran = etcd_ran;
              in.cluster_size = size;
              if (!same_cluster) in.local->cluster_id = 0x1234;
              if (!wal_read) in.local.reset();
              if (listed != 0) {
                ClusterMember self = CMember(set, 5, true);
                self.is_learner = listed == 2;
                for (auto& p : in.peers) {
                  if (p.cluster) p.cluster->members.push_back(self);
                }
                in.quorum_view->members.push_back(self);
              }
              if (quorum == 1) in.quorum_view.reset();
              if (quorum == 2 && listed == 0) in.quorum_view->members.push_back(CMember(set, 5, true));
              Decision d = Plan(in);
              CAPTURE(quorum);
              CAPTURE(mask);
              CAPTURE(same_cluster);
              CAPTURE(listed);
              CAPTURE(etcd_ran);
              CAPTURE(size);
              CAPTURE(wal_read);
              CAPTURE(d.reason);
              bool removed = wal_read && same_cluster && listed == 0 && quorum == 0;
              // Rule 1c: a majority of another cluster that does not list us: a restore passed us by.
              size_t voters = 4 + (listed == 1);  // n1..n4, plus n5 when it is listed as one
              bool stranded = wal_read && !same_cluster && listed == 0 && answering.size() >= voters / 2 + 1;
              // Never a bootstrap, and data goes aside only to join an existing cluster.
              CHECK(d.action != Action::kNew);
              CHECK(d.action != Action::kLateInitial);
              CHECK(d.action != Action::kReplace);
              if (d.move_data_aside) CHECK((d.action == Action::kJoin && d.initial_cluster_state == "existing"));
              if (stranded) {
                CHECK(d.wait == WaitKind::kConflict);
              } else if (!removed) {
                CHECK(d.action == Action::kRestart);
              } else if (etcd_ran) {
                CHECK(d.wait == WaitKind::kRemoved);
              } else if (size == 5) {
                CHECK(d.action == Action::kJoin);
                CHECK(d.move_data_aside);
                CHECK(d.add_member);
              } else {
                CHECK(d.wait == WaitKind::kExtra);
              }
             }
            }
          }
        }
      }
    }
  }
  CHECK(combinations == 16 * 2 * 3 * 2 * 2 * 2 * 3);
}

// ---- rule 2: conflict ----

TEST_CASE("peers in different clusters: wait and never pick one") {
  MemberSet set = MakeSet(3);
  MemberSet other = MakeSet(3, "other");
  PlanInput in = MakeInput(set);
  PeerNamed(in, "n2").cluster = ViewOf(set, {1, 2, 3});
  PeerNamed(in, "n3").cluster = ViewOf(other, {2, 3});
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kConflict);
  CHECK(Contains(d.reason, "n2"));
  CHECK(Contains(d.reason, "n3"));
  CHECK(Contains(d.reason, IdToHex(set.cluster_id())));
  CHECK(Contains(d.reason, IdToHex(other.cluster_id())));
  CHECK(d.initial_cluster_state.empty());
  CHECK_FALSE(d.cluster_id.has_value());
}

// ---- rule 3: late initial member ----

TEST_CASE("listed with our expected ID and never started: late initial, state new") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);

  SUBCASE("peers already started") {
    GiveAllViews(in, ViewOf(set, {2, 3}));
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.initial_cluster_state == "new");
    CHECK(d.initial_cluster == set.InitialCluster());
    CHECK(d.cluster_id == set.cluster_id());
    CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(2), ClientUrlOf(3)});
    CHECK_FALSE(d.add_member);
    CHECK(Contains(d.reason, "never started"));
  }
  SUBCASE("peers still bootstrapping (nobody published yet)") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {});
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.endpoints.empty());
  }
  SUBCASE("one peer answers, the other is unreachable: its view may be the one that lists us as started") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {2});
    PeerNamed(in, "n3").agent = AgentReport{false, "down", DataState::kUnknown, "", 0};
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "but n3 does not answer on its peer URL"));
  }
  SUBCASE("one peer answers, the other has no data: n2 published, so one of the empty two had started") {
    // n2's start was committed by 2 of 3: by n1 or n3, which both hold nothing now (finding 1).
    PeerNamed(in, "n2").cluster = ViewOf(set, {2});
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "only 1 of its 3 voters hold data and n2 logged past the bootstrap"));
    CHECK(Contains(d.reason, "quorate recover --from-member n2"));
  }
  SUBCASE("the only peer with data never heard from a leader: a bootstrap where two died before etcd ran") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {});
    PeerNamed(in, "n2").agent.data_state = DataState::kRunning;
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    // The same, but its WAL holds a leader's entry: members that started lost their data.
    PeerNamed(in, "n2").agent.log_past_bootstrap = true;
    d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "a start `new` would cut committed entries"));
    // Its agent silent (init mode runs none beside etcd): its view, in which no member started, decides.
    PeerNamed(in, "n2").agent = AgentReport{false, "down", DataState::kUnknown, "", 0};
    CHECK(Plan(in).action == Action::kLateInitial);
    // And a view listing a started member shows a leader's commit.
    PeerNamed(in, "n2").cluster = ViewOf(set, {2});
    d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "n2 logged past the bootstrap"));
  }
  SUBCASE("two of three hold data: a quorum kept its logs, and the late member starts whatever they logged") {
    GiveAllViews(in, ViewOf(set, {2, 3}));
    PeerNamed(in, "n2").agent.log_past_bootstrap = true;
    PeerNamed(in, "n3").agent.log_past_bootstrap = true;
    CHECK(Plan(in).action == Action::kLateInitial);
  }
  SUBCASE("one peer answers, the other has data but its etcd is silent") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {2});
    PeerNamed(in, "n3").agent.data_state = DataState::kHasData;
    CHECK(Plan(in).wait == WaitKind::kPeersNotReady);
  }
  SUBCASE("the expected set calls our URLs by another name: --name still appears") {
    in.self.name = "renamed";
    GiveAllViews(in, ViewOf(set, {2, 3}));
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.initial_cluster ==
          "renamed=http://127.0.0.1:2380,n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380");
  }
}

TEST_CASE("rule 3 never starts new under a member ID this process set out to replace (rule 4)") {
  // The node replaced its own member, which had started, and decides again (its new etcd exited)
  // while the peers replay their logs: their views list that ID unstarted, older than its start.
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  GiveAllViews(in, ViewOf(set, {2, 3}));
  REQUIRE(Plan(in).action == Action::kLateInitial);
  in.replaced_here.insert(set.IdOf(set.members()[0]));
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "set out to replace"));
}

TEST_CASE("rule 3 never starts new under an initial member ID a view no longer lists (removed since)") {
  // Sim seed 264 of 5 nodes: n1 lost its volume and replaced its member (rule 4: MemberRemove of its
  // old ID, MemberAdd of a learner), then its volume was lost again and its quorate started anew, which
  // knows nothing of that replace. n3, restarting, replays its log and lists the bootstrap's members,
  // none started; n2's view, past the replace, lists n1's old ID no more. The merged view held n1's
  // old ID unstarted from n3's alone, and rule 3 started `new` under it over logs past the bootstrap.
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  PeerNamed(in, "n3").cluster = ViewOf(set, {});
  PeerNamed(in, "n3").agent.data_state = DataState::kRunning;
  PeerNamed(in, "n3").agent.log_past_bootstrap = true;
  ClusterView past_replace = ViewOf(set, {2, 3});
  past_replace.members.erase(past_replace.members.begin());
  PeerNamed(in, "n2").cluster = past_replace;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "but n2's view of it does not"));
  // Once n3 has replayed past the removal too, n1 is no member: it joins as a learner (rule 2).
  PeerNamed(in, "n3").cluster = past_replace;
  CHECK(Plan(in).action == Action::kJoin);
}

TEST_CASE("late initial waits while the view lacks an initial member, even one that lists the peer answering it") {
  // Sim seed 2880 of 3 nodes, init mode: n2 lost its data, n1 restarted on its log past the bootstrap
  // and, replaying it, listed n1 and n2 so far, none started; n3 was down. Both looks saw every voter
  // the view held answer with no start, and n2 started `new` under the ID it had started with.
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set, 2);
  ClusterView replayed = ViewOf(set, {});
  replayed.members.resize(2);
  PeerNamed(in, "n1").cluster = replayed;
  PeerNamed(in, "n1").agent = AgentReport{false, "connection refused", DataState::kUnknown, "", 0};
  PeerNamed(in, "n3").agent = AgentReport{false, "connection refused", DataState::kUnknown, "", 0};
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "do not list initial member " + IdToHex(set.IdOf(MemberNo(3))) + " (n3)"));
  // Replayed whole, the view lists n3, which does not answer: still no start.
  PeerNamed(in, "n1").cluster = ViewOf(set, {});
  CHECK(Plan(in).action == Action::kWait);
}

TEST_CASE("late initial waits while the only view is a part of the membership a peer replaying its log lists") {
  // Sim seed 265 of 5 nodes: n1 and n3 started and lost their data, n2 never started, n4 and n5 kept
  // logs past the bootstrap. n5, replaying its WAL, lists n1, n2 and n3 so far, none started; n4 is
  // silent. On that view every voter answered and none held data, so n3 started `new` beside two
  // empty members: a quorum of 3 of 5 from empty logs, cutting what n4 and n5 committed.
  MemberSet set = MakeSet(5);
  PlanInput in = MakeInput(set, 3);
  ClusterView replayed = ViewOf(set, {});
  replayed.members.resize(3);
  PeerNamed(in, "n5").cluster = replayed;
  PeerNamed(in, "n5").agent.data_state = DataState::kRunning;
  PeerNamed(in, "n5").agent.log_past_bootstrap = true;
  PeerNamed(in, "n4").agent = AgentReport{false, "deadline exceeded", DataState::kUnknown, "", 0};
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, "do not list initial member " + IdToHex(set.IdOf(MemberNo(4))) + " (n4)"));
  // Replayed whole, the view lists n4 and n5: n4 is unheard, and then too few voters hold data.
  PeerNamed(in, "n5").cluster = ViewOf(set, {});
  CHECK(Plan(in).wait == WaitKind::kPeersNotReady);
  PeerNamed(in, "n4").agent = AgentOk(set);
  PeerNamed(in, "n4").agent.data_state = DataState::kHasData;
  PeerNamed(in, "n4").agent.log_past_bootstrap = true;
  PeerNamed(in, "n4").cluster = ViewOf(set, {});
  CHECK(Plan(in).wait == WaitKind::kMajorityLost);
}

TEST_CASE("late initial on views where no member started looks again unless the peers' agents read their logs") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  SUBCASE("a fresh bootstrap: n2's agent read its log and found no leader's entry, so its view hides no start") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {});
    PeerNamed(in, "n2").agent.data_state = DataState::kRunning;
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK_FALSE(d.look_again);
  }
  SUBCASE("n2's log holds a leader's entry: its etcd may still be replaying the starts it records") {
    GiveAllViews(in, ViewOf(set, {}));
    for (const char* name : {"n2", "n3"}) {
      PeerNamed(in, name).agent.data_state = DataState::kRunning;
      PeerNamed(in, name).agent.log_past_bootstrap = true;
    }
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.look_again);
  }
  SUBCASE("n2's agent is silent (init mode) or says nothing of a log: its view alone, which may lag") {
    PeerNamed(in, "n2").cluster = ViewOf(set, {});
    PeerNamed(in, "n2").agent = AgentReport{false, "down", DataState::kUnknown, "", 0};
    CHECK(Plan(in).look_again);
    PeerNamed(in, "n2").agent = AgentOk(set);  // "empty" beside a view: no log was read
    CHECK(Plan(in).look_again);
  }
  SUBCASE("a view listing a started member is no replay's first lines: no second look") {
    GiveAllViews(in, ViewOf(set, {2, 3}));
    PeerNamed(in, "n2").agent = AgentReport{false, "down", DataState::kUnknown, "", 0};
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK_FALSE(d.look_again);
  }
}

TEST_CASE("late initial rebuilds the initial cluster from the cluster when the expected set moved on") {
  MemberSet boot = MakeSet(3);      // what the cluster was bootstrapped with
  MemberSet expected = MakeSet(4);  // discovery now sees one more member, same token
  REQUIRE(boot.cluster_id() != expected.cluster_id());
  PlanInput in = MakeInput(expected);
  ClusterView v = ViewOf(boot, {2, 3});
  v.members[0].name.clear();  // n1, self: unnamed
  GiveAllViews(in, v);

  SUBCASE("names come from the cluster, then the expected set by ID, then self") {
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.initial_cluster_state == "new");
    CHECK(d.initial_cluster == boot.InitialCluster());
    CHECK(d.cluster_id == boot.cluster_id());
  }
  SUBCASE("an unnamed other member gets its expected name") {
    v = ViewOf(boot, {2});
    v.members[2].name.clear();  // n3, not started
    GiveAllViews(in, v);
    Decision d = Plan(in);
    CHECK(d.action == Action::kLateInitial);
    CHECK(d.initial_cluster == boot.InitialCluster());
  }
  SUBCASE("a voter the expected set no longer has cannot be heard: wait, naming it by its ID") {
    MemberSet boot2 = MakeSetOf({1, 2, 8});
    MemberSet exp2 = MakeSetOf({1, 2, 3});
    PlanInput in2 = MakeInput(exp2);
    ClusterView v2 = ViewOf(boot2, {2});
    v2.members[2].name.clear();  // n8
    GiveAllViews(in2, v2);
    Decision d = Plan(in2);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "but " + IdToHex(boot2.IdOf(MemberNo(8))) + " does not answer"));
  }
}

TEST_CASE("late initial whose cluster's membership changed since bootstrap takes its member's place") {
  // The initial cluster `new` needs cannot be written from the views any more; the member never ran,
  // so it is replaced as rule 4 replaces one whose data is gone: remove its ID, add us as a learner.
  MemberSet boot = MakeSet(3);
  MemberSet expected = MakeSet(4);
  PlanInput in = MakeInput(expected);
  const MemberId ours = boot.IdOf(MemberNo(1));

  SUBCASE("a member was added") {
    ClusterView v = ViewOf(boot, {2, 3});
    ClusterMember added = CMember(expected, 4, true);
    added.id = 0x1234;  // MemberAdd IDs are not the bootstrap hash
    v.members.push_back(added);
    GiveAllViews(in, v);
    Decision d = Plan(in);
    CHECK(d.action == Action::kReplace);
    CHECK(d.remove_id == ours);
    CHECK(d.add_member);
    CHECK(d.initial_cluster_state == "existing");
    CHECK(Contains(d.reason, "membership changed since bootstrap"));
    CHECK(d.cluster_id == boot.cluster_id());
    SUBCASE("without a majority of the voters answering, it waits") {
      PeerNamed(in, "n2").cluster.reset();
      PeerNamed(in, "n3").cluster.reset();
      Decision w = Plan(in);
      CHECK(w.wait == WaitKind::kPeersNotReady);
      CHECK(Contains(w.reason, "only 1 of 4 voters answer"));
    }
  }
  SUBCASE("a member's peer URLs were updated: no expected member answers at n2's new ones, so no quorum shows") {
    ClusterView v = ViewOf(boot, {2, 3});
    v.members[1].peer_urls = {"http://127.0.0.22:2380"};
    GiveAllViews(in, v);
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "membership changed since bootstrap"));
    CHECK(Contains(d.reason, "only 1 of 3 voters answer"));
    CHECK_FALSE(d.remove_id.has_value());
  }
}

// ---- rule 3: resume a join or replace after MemberAdd ----

TEST_CASE("listed under another ID and never started: an earlier MemberAdd, resume the join") {
  MemberSet set = MakeSet(3);
  MemberSet pair = MakeSetOf({2, 3});
  PlanInput in = MakeInput(set);
  ClusterView v = ViewOf(pair, {2, 3});
  ClusterMember added;
  added.id = 0xabcdef;
  added.peer_urls = {PeerUrlOf(1)};
  added.is_learner = true;
  v.members.push_back(added);
  GiveAllViews(in, v);

  Decision d = Plan(in);
  CHECK(d.action == Action::kJoin);
  CHECK(d.initial_cluster_state == "existing");
  CHECK_FALSE(d.add_member);
  CHECK_FALSE(d.remove_id.has_value());
  CHECK(d.initial_cluster ==
        "n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n1=http://127.0.0.1:2380");
  CHECK(d.cluster_id == pair.cluster_id());
  CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(2), ClientUrlOf(3)});
  CHECK(Contains(d.reason, IdToHex(0xabcdef)));

  SUBCASE("another unnamed, unstarted member takes its expected name by peer URL") {
    MemberSet four = MakeSet(4);
    PlanInput in4 = MakeInput(four);
    ClusterView v4 = v;
    ClusterMember other;
    other.id = 0x77;
    other.peer_urls = {PeerUrlOf(4)};
    v4.members.push_back(other);
    GiveAllViews(in4, v4);
    Decision d4 = Plan(in4);
    CHECK(d4.action == Action::kJoin);
    CHECK(Contains(d4.initial_cluster, "n4=http://127.0.0.4:2380"));
  }
}

// ---- rule 3: replace ----

TEST_CASE("started member without data is replaced only with quorum (3 members)") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  ClusterView v = ViewOf(set, {1, 2, 3});

  SUBCASE("both other voters answer") {
    GiveAllViews(in, v);
    Decision d = Plan(in);
    CHECK(d.action == Action::kReplace);
    CHECK(d.initial_cluster_state == "existing");
    CHECK(d.add_member);
    REQUIRE(d.remove_id.has_value());
    CHECK(*d.remove_id == set.IdOf(MemberNo(1)));
    CHECK(d.initial_cluster ==
          "n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n1=http://127.0.0.1:2380");
    CHECK(d.cluster_id == set.cluster_id());
    CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(1), ClientUrlOf(2), ClientUrlOf(3)});
  }
  SUBCASE("one other voter answers: 1 of 3 is not a majority") {
    PeerNamed(in, "n2").cluster = v;
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "1 of 3 voters"));
    CHECK(Contains(d.reason, "majority of 2"));
    CHECK(Contains(d.reason, "snapshot"));
    // The survivor is named, with the command that recovers from its data, and etcd's own way.
    CHECK(Contains(d.reason, "quorate recover --from-member n2"));
    CHECK(Contains(d.reason, "--force-new-cluster"));
    CHECK_FALSE(d.remove_id.has_value());
    CHECK_FALSE(d.add_member);
  }
}

TEST_CASE("replace counts the voters on the member list read with quorum, not on older views") {
  // Simulator seed 1347 of 5 nodes: the views list every initial member a voter (a removed member's
  // etcd, restarted on data that never saw its removal), and n3 and n4 answer at their peer URLs;
  // the cluster itself is n1 (this node, its data gone), n2 and n5, of which only n2 answers.
  MemberSet set = MakeSet(5);
  PlanInput in = MakeInput(set);
  GiveAllViews(in, ViewOf(set, {1, 2, 3, 4, 5}));
  PeerNamed(in, "n5").cluster.reset();
  Decision on_views = Plan(in);
  REQUIRE(on_views.action == Action::kReplace);
  CHECK(Contains(on_views.reason, "3 of 5 voters answer"));

  ClusterView listed = ViewOf(set, {1, 2, 3, 4, 5});
  std::erase_if(listed.members, [&](const ClusterMember& m) {
    return m.id == set.IdOf(MemberNo(3)) || m.id == set.IdOf(MemberNo(4));
  });
  in.quorum_view = listed;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kMajorityLost);
  CHECK(Contains(d.reason, "only 1 of 3 voters answer"));
  CHECK_FALSE(d.remove_id.has_value());

  SUBCASE("a list of another cluster is not counted on") {
    in.quorum_view->cluster_id ^= 1;
    CHECK(Plan(in).action == Action::kReplace);
  }
}

TEST_CASE("replace counts a voter outside the discovered set whose peer URL answers") {
  // The cluster is n1 (this node, its data gone), n2 and n4, a node outside the discovered set that
  // joined by rule 2 into the seat of n3, which the operator removed; n3 holds its data, stopped.
  // n2 and n4 answer: a majority, though only n2 is a discovered member (simulator seed 35 of 3
  // nodes with an extra node, which waited for ever saying a majority was lost).
  MemberSet set = MakeSet(3);
  MemberSet cluster = MakeSetOf({1, 2, 4});
  PlanInput in = MakeInput(set);
  GiveAllViews(in, ViewOf(cluster, {1, 2, 4}));
  PeerNamed(in, "n3").cluster.reset();
  PeerNamed(in, "n3").agent.data_state = DataState::kHasData;
  Decision wait = Plan(in);
  CHECK(wait.wait == WaitKind::kMajorityLost);
  CHECK(Contains(wait.reason, "only 1 of 3 voters answer"));
  in.answering_outsiders = {cluster.IdOf(MemberNo(4))};
  Decision d = Plan(in);
  REQUIRE(d.action == Action::kReplace);
  CHECK(Contains(d.reason, "2 of 3 voters answer"));
  CHECK(*d.remove_id == cluster.IdOf(MemberNo(1)));
}

TEST_CASE("replace counts voters by peer URL, and learners are not voters (5 members)") {
  MemberSet set = MakeSet(5);
  PlanInput in = MakeInput(set);
  ClusterView v = ViewOf(set, {1, 2, 3, 4, 5});

  SUBCASE("2 of 5 answer: wait") {
    PeerNamed(in, "n2").cluster = v;
    PeerNamed(in, "n3").cluster = v;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "2 of 5 voters"));
  }
  SUBCASE("3 of 5 answer: replace") {
    PeerNamed(in, "n2").cluster = v;
    PeerNamed(in, "n3").cluster = v;
    PeerNamed(in, "n4").cluster = v;
    Decision d = Plan(in);
    CHECK(d.action == Action::kReplace);
    CHECK(*d.remove_id == set.IdOf(MemberNo(1)));
  }
  SUBCASE("n4, n5 learners: 3 voters, 2 answering is a majority") {
    v.members[3].is_learner = true;
    v.members[4].is_learner = true;
    PeerNamed(in, "n2").cluster = v;
    PeerNamed(in, "n3").cluster = v;
    CHECK(Plan(in).action == Action::kReplace);
  }
  SUBCASE("answering learners do not make a majority") {
    v.members[3].is_learner = true;
    v.members[4].is_learner = true;
    PeerNamed(in, "n2").cluster = v;
    PeerNamed(in, "n4").cluster = v;
    PeerNamed(in, "n5").cluster = v;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "1 of 3 voters"));
  }
  SUBCASE("a learner promoted in one view counts as a voter") {
    ClusterView stale = v;
    stale.members[3].is_learner = true;
    PeerNamed(in, "n2").cluster = stale;
    PeerNamed(in, "n3").cluster = v;
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "2 of 5 voters"));
  }
}

TEST_CASE("a stale view cannot hide that we started: views are merged") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  PeerNamed(in, "n2").cluster = ViewOf(set, {2});        // has not seen us publish yet
  PeerNamed(in, "n3").cluster = ViewOf(set, {1, 2, 3});  // has
  Decision d = Plan(in);
  CHECK(d.action == Action::kReplace);
  CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(1), ClientUrlOf(2), ClientUrlOf(3)});
}

// Found by the simulator (tests/sim, seed 121 of 3 nodes): after a replace, one peer's stale view
// listed our old ID, never started, beside the new one; taking the old one was a `new` start as a
// member the cluster had removed.
TEST_CASE("two members on our peer URLs (one view is older than a replace): wait until the views agree") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  PeerNamed(in, "n2").cluster = ViewOf(set, {2, 3});  // from before the replace: our old ID, unstarted
  ClusterView current = ViewOf(set, {2, 3});
  current.members.erase(current.members.begin());
  ClusterMember added;
  added.id = 0xabcdef;
  added.peer_urls = {PeerUrlOf(1)};
  added.is_learner = true;
  current.members.push_back(added);
  PeerNamed(in, "n3").cluster = current;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK(Contains(d.reason, IdToHex(set.IdOf(MemberNo(1)))));
  CHECK(Contains(d.reason, IdToHex(0xabcdef)));
}

// ---- rule 3: join / extra ----

TEST_CASE("a cluster below --cluster-size that does not list us: join as a learner") {
  MemberSet set = MakeSet(3);
  MemberSet pair = MakeSetOf({2, 3});
  PlanInput in = MakeInput(set);
  GiveAllViews(in, ViewOf(pair, {2, 3}));
  Decision d = Plan(in);
  CHECK(d.action == Action::kJoin);
  CHECK(d.initial_cluster_state == "existing");
  CHECK(d.add_member);
  CHECK_FALSE(d.remove_id.has_value());
  CHECK(d.initial_cluster ==
        "n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n1=http://127.0.0.1:2380");
  CHECK(d.cluster_id == pair.cluster_id());
  CHECK(d.endpoints == std::vector<std::string>{ClientUrlOf(2), ClientUrlOf(3)});
}

TEST_CASE("a full cluster that does not list us: wait as extra") {
  MemberSet set = MakeSet(3);
  MemberSet full = MakeSetOf({2, 3, 4});
  PlanInput in = MakeInput(set);
  GiveAllViews(in, ViewOf(full, {2, 3, 4}));

  SUBCASE("at size") {
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kExtra);
    CHECK(Contains(d.reason, "already has 3 of 3 members and does not list n1"));
    CHECK(Contains(d.reason, "--cluster-size"));
    CHECK(d.cluster_id == full.cluster_id());
  }
  SUBCASE("raising --cluster-size lets it join") {
    in.cluster_size = 4;
    Decision d = Plan(in);
    CHECK(d.action == Action::kJoin);
    CHECK(d.add_member);
  }
  SUBCASE("an unset --cluster-size falls back to the expected set's size") {
    in.cluster_size = 0;
    CHECK(Plan(in).wait == WaitKind::kExtra);
  }
}

TEST_CASE("rule 2: a seat a discovered member is about to take is kept for it, not taken by a stray") {
  // The discovered set is n1, n2 and n3; n1 is replacing its member (rule 4 removed it and has yet to
  // add it back), so the cluster is n2 and n3, and n1's agent says its data dir is empty. n4, outside
  // the discovered set, sees a seat free: taking it would leave n1 out (simulator seeds 13 of 3 nodes
  // and 71 of 5, with an extra node).
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set, 4);
  GiveAllViews(in, ViewOf(MakeSetOf({2, 3}), {2, 3}));
  PeerNamed(in, "n1").cluster.reset();
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kExtra);
  CHECK_FALSE(d.add_member);
  CHECK(Contains(d.reason, "has 2 of 3 members and does not list n4, which is not in the discovered set"));
  CHECK(Contains(d.reason, "(n1: replacing its member, or about to join)"));

  SUBCASE("a discovered member that holds data (removed, held stopped) or does not answer claims nothing") {
    PeerNamed(in, "n1").agent.data_state = DataState::kHasData;
    Decision join = Plan(in);
    CHECK(join.action == Action::kJoin);
    CHECK(join.add_member);
    CHECK(join.cluster_size == 3);
    PeerNamed(in, "n1").agent = AgentReport{};
    CHECK(Plan(in).action == Action::kJoin);
  }
  SUBCASE("a seat beyond the claimed ones is the stray's to take") {
    in.cluster_size = 4;
    Decision join = Plan(in);
    CHECK(join.action == Action::kJoin);
    CHECK(join.cluster_size == 4);
  }
  SUBCASE("a discovered member takes the seat as rule 2 always did") {
    PlanInput own = MakeInput(set);
    GiveAllViews(own, ViewOf(MakeSetOf({2, 3}), {2, 3}));
    Decision join = Plan(own);
    CHECK(join.action == Action::kJoin);
    CHECK(join.cluster_size == 3);
  }
}

TEST_CASE("a member with our name on other peer URLs blocks a join") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  ClusterView v = ViewOf(MakeSetOf({2, 3}), {2, 3});
  ClusterMember old;
  old.id = 0x99;
  old.name = "n1";
  old.peer_urls = {"http://10.0.0.1:2380"};
  old.client_urls = {"http://10.0.0.1:2379"};
  v.members.push_back(old);
  in.cluster_size = 5;
  GiveAllViews(in, v);
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kExtra);
  CHECK(Contains(d.reason, "http://10.0.0.1:2380"));
}

// ---- rule 9: a departed instance's seat ----

namespace {

// The scaling group now lists n1 (this newcomer), n2 and n3; the cluster is n2, n3 and n4, whose
// instance the group replaced by n1's. n2 and n3 answer.
struct Churn {
  MemberSet group = MakeSet(3);
  MemberSet cluster = MakeSetOf({2, 3, 4});
  PlanInput in = MakeInput(group);
  MemberId departed = cluster.IdOf(MemberNo(4));
  Churn() {
    GiveAllViews(in, ViewOf(cluster, {2, 3, 4}));
    in.expected_is_whole_group = true;
    in.silent_outsiders = {departed};
  }
};

}  // namespace

TEST_CASE("rule 9: a newcomer of a whole group takes the seat of a silent member in no instance of it") {
  Churn t;
  Decision d = Plan(t.in);
  CHECK(d.action == Action::kJoin);
  CHECK(d.initial_cluster_state == "existing");
  CHECK(d.add_member);
  REQUIRE(d.remove_id.has_value());
  CHECK(*d.remove_id == t.departed);
  CHECK_FALSE(d.move_data_aside);
  CHECK(d.initial_cluster == "n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n1=http://127.0.0.1:2380");
  CHECK(d.cluster_id == t.cluster.cluster_id());
  CHECK(Contains(d.reason, "n4"));
  CHECK(Contains(d.reason, "2 of the cluster's 3 voters answer, a majority without it"));

  SUBCASE("etcd's strict MemberAdd does not count the member being removed as a voter that is down") {
    t.in.member_add_needs_every_voter = true;
    Decision strict = Plan(t.in);
    CHECK(strict.action == Action::kJoin);
    CHECK_FALSE(Contains(strict.reason, "while a voter is down"));
  }
}

TEST_CASE("rule 9 does not apply: the newcomer waits as extra") {
  Churn t;
  SUBCASE("the list may be partial (tags only, a failed page, a throttle)") {
    t.in.expected_is_whole_group = false;
    Decision d = Plan(t.in);
    CHECK(d.wait == WaitKind::kExtra);
    CHECK_FALSE(d.remove_id.has_value());
  }
  SUBCASE("the member outside the group still answers on its peer URL") {
    t.in.silent_outsiders.clear();
    Decision d = Plan(t.in);
    CHECK(d.wait == WaitKind::kExtra);
    CHECK(Contains(d.reason, "n4 (http://127.0.0.4:2380) is in no instance of the group as first listed but still answers on its peer URLs"));
  }
  SUBCASE("every member is in the group: the cluster is simply full") {
    t.in.silent_outsiders.clear();
    t.in.expected = MakeSetOf({1, 2, 3, 4});
    t.in.cluster_size = 3;
    Decision d = Plan(t.in);
    CHECK(d.wait == WaitKind::kExtra);
    CHECK(Contains(d.reason, "raise --cluster-size"));
  }
}

TEST_CASE("rule 9 keeps quorum and goes one member at a time") {
  Churn t;
  SUBCASE("a majority of the voters must answer without the departed one") {
    // n3 is down, agent and all: it may come back with its data.
    PeerNamed(t.in, "n3").cluster.reset();
    PeerNamed(t.in, "n3").agent = AgentReport{};
    Decision d = Plan(t.in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "only 1 of the cluster's 3 voters answer, short of the majority of 2"));
    CHECK_FALSE(d.remove_id.has_value());
  }
  SUBCASE("a silent voter whose agent says it holds no data casts no vote again: a majority is lost") {
    // Simulator seed 206 of 3 nodes on a cloud: n3 never started (or lost its data). Rule 3 starts it
    // only once every other voter answers, which the departed n4 never does; rule 4 replaces it only
    // through a change that commits, which needs n3's or n4's vote.
    PeerNamed(t.in, "n3").cluster.reset();
    Decision d = Plan(t.in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kMajorityLost);
    CHECK(Contains(d.reason, "1 of the 3 voters of cluster"));
    CHECK(Contains(d.reason, "and 1 (n3) holds no data"));
    CHECK(Contains(d.reason, "quorate recover --from-member n2"));
    CHECK_FALSE(d.remove_id.has_value());
    SUBCASE("one that holds data may come back: no majority is lost") {
      PeerNamed(t.in, "n3").agent.data_state = DataState::kHasData;
      CHECK(Plan(t.in).wait == WaitKind::kPeersNotReady);
    }
    SUBCASE("its agent silent now, it said it was empty when it last answered: still no vote") {
      // Simulator seed 356 of 5 nodes: that voter's quorate was down between its --timeout exits.
      PeerNamed(t.in, "n3").agent = AgentReport{};
      PeerNamed(t.in, "n3").empty_when_last_answered = true;
      Decision again = Plan(t.in);
      CHECK(again.wait == WaitKind::kMajorityLost);
      CHECK(Contains(again.reason, "and 1 (n3) holds no data"));
      // Never heard empty: it may hold data, and come back with it.
      PeerNamed(t.in, "n3").empty_when_last_answered = false;
      CHECK(Plan(t.in).wait == WaitKind::kPeersNotReady);
    }
  }
  SUBCASE("an even count: the removal commits under the voters before it, not the ones left after") {
    // Four voters (n2, n3, n5 and the departed n4), n5 silent too: 2 answer. After the removal 2 of 3
    // would be a majority, but the removal itself needs 3 of the 4 and would only run into --timeout.
    MemberSet cluster = MakeSetOf({2, 3, 4, 5});
    PlanInput in = MakeInput(MakeSetOf({1, 2, 3, 5}));
    in.expected_is_whole_group = true;
    in.silent_outsiders = {cluster.IdOf(MemberNo(4))};
    GiveAllViews(in, ViewOf(cluster, {2, 3, 4, 5}));
    PeerNamed(in, "n5").cluster.reset();
    PeerNamed(in, "n5").agent = AgentReport{};
    Decision d = Plan(in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "only 2 of the cluster's 4 voters answer, short of the majority of 3"));
    CHECK_FALSE(d.remove_id.has_value());

    GiveAllViews(in, ViewOf(cluster, {2, 3, 4, 5}));
    Decision go = Plan(in);
    REQUIRE(go.action == Action::kJoin);
    CHECK(*go.remove_id == cluster.IdOf(MemberNo(4)));
    CHECK(Contains(go.reason, "3 of the cluster's 4 voters answer"));
  }
  SUBCASE("a learner still catching up holds the next replacement") {
    ClusterView v = ViewOf(t.cluster, {2, 3, 4});
    ClusterMember learner;
    learner.id = 0x77;
    learner.name = "n5";
    learner.peer_urls = {PeerUrlOf(5)};
    learner.is_learner = true;
    v.members.push_back(learner);
    GiveAllViews(t.in, v);
    t.in.expected = MakeSetOf({1, 2, 3, 5});
    t.in.cluster_size = 4;
    Decision d = Plan(t.in);
    CHECK(d.wait == WaitKind::kPeersNotReady);
    CHECK(Contains(d.reason, "learner n5 is still catching up"));
  }
  SUBCASE("two departed members: the one with the lower ID goes first, alone") {
    MemberSet group = MakeSetOf({1, 2, 3, 6, 7});
    MemberSet cluster = MakeSetOf({2, 3, 4, 5, 7});
    PlanInput in = MakeInput(group);
    GiveAllViews(in, ViewOf(cluster, {2, 3, 4, 5, 7}));
    PeerNamed(in, "n6").cluster.reset();  // the other newcomer, not started yet
    in.expected_is_whole_group = true;
    MemberId id4 = cluster.IdOf(MemberNo(4));
    MemberId id5 = cluster.IdOf(MemberNo(5));
    in.silent_outsiders = {id4, id5};
    Decision d = Plan(in);
    REQUIRE(d.action == Action::kJoin);
    CHECK(*d.remove_id == std::min(id4, id5));
    // 3 of the 5 voters answer: a majority without the departed ones, so the removal commits.
    CHECK(Contains(d.reason, "3 of the cluster's 5 voters answer"));
  }
}

TEST_CASE("rule 9: a learner of a departed instance is taken out first, even below the cluster's size") {
  // The group lists n1 (this newcomer), n2 and n3; the cluster is n2 and n3, and learner n4 that an
  // instance the group has since replaced added, and that never started. etcd holds one learner at
  // most, so rule 2's MemberAdd would be refused for ever.
  MemberSet group = MakeSet(3);
  MemberSet cluster = MakeSetOf({2, 3, 4});
  PlanInput in = MakeInput(group);
  ClusterView v = ViewOf(cluster, {2, 3});
  v.members.back().is_learner = true;
  GiveAllViews(in, v);
  in.expected_is_whole_group = true;
  MemberId learner = cluster.IdOf(MemberNo(4));
  in.silent_outsiders = {learner};
  Decision d = Plan(in);
  REQUIRE(d.action == Action::kJoin);
  CHECK(d.add_member);
  REQUIRE(d.remove_id.has_value());
  CHECK(*d.remove_id == learner);
  CHECK(d.initial_cluster == "n2=http://127.0.0.2:2380,n3=http://127.0.0.3:2380,n1=http://127.0.0.1:2380");

  SUBCASE("a learner that answers is catching up: rule 2 waits on etcd, rule 9 does not touch it") {
    in.silent_outsiders.clear();
    Decision wait = Plan(in);
    CHECK_FALSE(wait.remove_id.has_value());
  }
  SUBCASE("without a whole group, nothing is taken for departed: the learner fills the cluster") {
    in.expected_is_whole_group = false;
    Decision extra = Plan(in);
    CHECK(extra.wait == WaitKind::kExtra);
    CHECK_FALSE(extra.remove_id.has_value());
  }
}

TEST_CASE("rule 9: below the cluster's size, a newcomer takes a departed voter's seat rather than joining beside it") {
  // Size 5; the cluster is n2, n3, n4 and n6, whose instance departed; the group lists n1 (this
  // newcomer) and n5 (another newcomer) beside n2, n3 and n4. Joining beside n6 would let both
  // newcomers in and leave the dead voter on: six members, one of them gone.
  MemberSet cluster = MakeSetOf({2, 3, 4, 6});
  PlanInput in = MakeInput(MakeSetOf({1, 2, 3, 4, 5}));
  in.cluster_size = 5;
  GiveAllViews(in, ViewOf(cluster, {2, 3, 4, 6}));
  PeerNamed(in, "n5").cluster.reset();
  in.expected_is_whole_group = true;
  in.silent_outsiders = {cluster.IdOf(MemberNo(6))};
  Decision d = Plan(in);
  REQUIRE(d.action == Action::kJoin);
  CHECK(d.remove_id == cluster.IdOf(MemberNo(6)));
  CHECK(d.add_member);
  // Without a whole group nothing departs: rule 2 joins beside it.
  in.expected_is_whole_group = false;
  Decision beside = Plan(in);
  CHECK(beside.action == Action::kJoin);
  CHECK_FALSE(beside.remove_id.has_value());
}

TEST_CASE("rule 9: voters of departed instances that leave no quorum behind are a lost majority") {
  // The group lists n1 (this newcomer), n2 and n5; the cluster is n2, n3 and n4, and the instances
  // of n3 and n4 are gone: one voter of three is left, and no change can commit any more.
  MemberSet group = MakeSetOf({1, 2, 5});
  MemberSet cluster = MakeSetOf({2, 3, 4});
  PlanInput in = MakeInput(group);
  GiveAllViews(in, ViewOf(cluster, {2, 3, 4}));
  PeerNamed(in, "n5").cluster.reset();
  in.expected_is_whole_group = true;
  in.silent_outsiders = {cluster.IdOf(MemberNo(3)), cluster.IdOf(MemberNo(4))};
  Decision d = Plan(in);
  CHECK(d.wait == WaitKind::kMajorityLost);
  CHECK(Contains(d.reason, "2 of the 3 voters of cluster"));
  CHECK(Contains(d.reason, "left with their instances for good"));
  CHECK(Contains(d.reason, "quorate recover --from-member n2"));
  CHECK_FALSE(d.remove_id.has_value());

  SUBCASE("one departed of three leaves a quorum: rule 9 replaces it") {
    PlanInput one = MakeInput(MakeSetOf({1, 2, 3}));
    GiveAllViews(one, ViewOf(cluster, {2, 3, 4}));
    one.expected_is_whole_group = true;
    one.silent_outsiders = {cluster.IdOf(MemberNo(4))};
    Decision r = Plan(one);
    CHECK(r.action == Action::kJoin);
    CHECK(r.remove_id == cluster.IdOf(MemberNo(4)));
  }
  SUBCASE("a cluster below its size, its one other voter departed: the newcomer does not try to join") {
    MemberSet two = MakeSetOf({2, 3});
    PlanInput below = MakeInput(MakeSetOf({1, 2, 5}));
    GiveAllViews(below, ViewOf(two, {2, 3}));
    PeerNamed(below, "n5").cluster.reset();
    below.expected_is_whole_group = true;
    below.silent_outsiders = {two.IdOf(MemberNo(3))};
    Decision w = Plan(below);
    CHECK(w.wait == WaitKind::kMajorityLost);
    CHECK(Contains(w.reason, "1 of the 2 voters"));
  }
}

// ---- invariants over every combination of peer states ----

namespace {

enum class AgentCase { kUnreachable, kOk, kOtherToken, kOtherSet, kHasData, kRunning, kUnknown };
// kGarbage: the peer URL answered, but not as etcd does (no view, and not silence either).
enum class ViewCase { kNone, kFresh, kOthersStarted, kAllStarted, kForeign, kGarbage };
constexpr int kAgentCases = 7;
constexpr int kViewCases = 6;

struct PeerCase {
  bool present = true;
  AgentCase agent = AgentCase::kOk;
  ViewCase view = ViewCase::kNone;
};

std::vector<PeerCase> AllPeerCases() {
  std::vector<PeerCase> out;
  out.push_back(PeerCase{false, AgentCase::kOk, ViewCase::kNone});
  for (int a = 0; a < kAgentCases; ++a) {
    for (int v = 0; v < kViewCases; ++v) {
      out.push_back(PeerCase{true, static_cast<AgentCase>(a), static_cast<ViewCase>(v)});
    }
  }
  return out;
}

bool AgentAgrees(AgentCase a) { return a == AgentCase::kOk; }
bool AgentHasData(AgentCase a) { return a == AgentCase::kHasData || a == AgentCase::kRunning; }

}  // namespace

TEST_CASE("invariants hold for every combination of peer states (3 members)") {
  MemberSet set = MakeSet(3);
  MemberSet foreign = MakeSetOf({2, 3}, "foreign");
  const std::vector<PeerCase> cases = AllPeerCases();
  int combinations = 0;

  for (bool local : {false, true}) {
    for (const PeerCase& c2 : cases) {
      for (const PeerCase& c3 : cases) {
        ++combinations;
        PlanInput in = MakeInput(set);
        in.has_local_data = local;
        in.peers.clear();
        int k = 2;
        for (const PeerCase& c : {c2, c3}) {
          int peer_k = k++;
          if (!c.present) continue;
          PeerFacts p{NameOf(peer_k), AgentOk(set), std::nullopt, {}, std::nullopt};
          switch (c.agent) {
            case AgentCase::kUnreachable:
              p.agent = AgentReport{false, "unavailable", DataState::kUnknown, "", 0};
              break;
            case AgentCase::kOk:
              break;
            case AgentCase::kOtherToken:
              p.agent.token = "other";
              break;
            case AgentCase::kOtherSet:
              p.agent.expected_cluster_id = foreign.cluster_id();
              break;
            case AgentCase::kHasData:
              p.agent.data_state = DataState::kHasData;
              break;
            case AgentCase::kRunning:
              p.agent.data_state = DataState::kRunning;
              break;
            case AgentCase::kUnknown:
              p.agent.data_state = DataState::kUnknown;
              break;
          }
          switch (c.view) {
            case ViewCase::kNone:
              break;
            case ViewCase::kFresh:
              p.cluster = ViewOf(set, {});
              break;
            case ViewCase::kOthersStarted:
              p.cluster = ViewOf(set, {2, 3});
              break;
            case ViewCase::kAllStarted:
              p.cluster = ViewOf(set, {1, 2, 3});
              break;
            case ViewCase::kForeign:
              p.cluster = ViewOf(foreign, {2, 3});
              break;
            case ViewCase::kGarbage:
              p.foreign_answer = "http://x:2380/members answered HTTP 500, not 200";
              break;
          }
          in.peers.push_back(p);
        }

        int views = 0;
        bool has_ours = false;
        bool has_foreign = false;
        bool self_started = false;
        bool any_data = false;
        bool all_agree = true;
        bool any_garbage = false;
        for (const PeerCase& c : {c2, c3}) {
          all_agree = all_agree && c.present && AgentAgrees(c.agent);
          if (!c.present) continue;
          any_data = any_data || AgentHasData(c.agent);
          any_garbage = any_garbage || c.view == ViewCase::kGarbage;
          if (c.view == ViewCase::kNone || c.view == ViewCase::kGarbage) continue;
          ++views;
          has_foreign = has_foreign || c.view == ViewCase::kForeign;
          has_ours = has_ours || c.view != ViewCase::kForeign;
          self_started = self_started || c.view == ViewCase::kAllStarted;
        }
        bool conflict = has_ours && has_foreign;
        // Rule 3: every other voter answers with a view or, through its agent, says it has no data.
        bool all_heard = true;
        for (const PeerCase& c : {c2, c3}) {
          bool view = c.present && c.view != ViewCase::kNone && c.view != ViewCase::kGarbage;
          bool empty = c.present && c.agent != AgentCase::kUnreachable && !AgentHasData(c.agent) &&
                       c.agent != AgentCase::kUnknown;
          all_heard = all_heard && (view || empty);
        }

        Decision d = Plan(in);
        CAPTURE(local);
        CAPTURE(static_cast<int>(c2.present ? c2.agent : AgentCase::kOk));
        CAPTURE(static_cast<int>(c2.view));
        CAPTURE(c2.present);
        CAPTURE(static_cast<int>(c3.present ? c3.agent : AgentCase::kOk));
        CAPTURE(static_cast<int>(c3.view));
        CAPTURE(c3.present);
        CAPTURE(d.reason);

        // The decision's shape.
        REQUIRE_FALSE(d.reason.empty());
        REQUIRE_FALSE(Contains(d.reason, "\n"));
        if (d.action == Action::kWait) {
          REQUIRE(d.wait != WaitKind::kNone);
          REQUIRE(d.initial_cluster_state.empty());
        } else {
          REQUIRE(d.wait == WaitKind::kNone);
          bool is_new = d.action == Action::kNew || d.action == Action::kLateInitial ||
                        d.action == Action::kRestart;
          REQUIRE(d.initial_cluster_state == (is_new ? "new" : "existing"));
          REQUIRE(Contains(d.initial_cluster, "n1=http://127.0.0.1:2380"));
        }
        REQUIRE(d.add_member == (d.action == Action::kReplace ||
                                 (d.action == Action::kJoin && has_foreign)));
        REQUIRE(d.remove_id.has_value() == (d.action == Action::kReplace));

        // Safety.
        if (local) {
          REQUIRE(d.action == Action::kRestart);
          continue;
        }
        REQUIRE(d.action != Action::kRestart);
        if (d.action == Action::kNew) {
          REQUIRE(views == 0);
          REQUIRE_FALSE(any_data);
          REQUIRE(all_agree);
          REQUIRE_FALSE(any_garbage);
        }
        if (d.action == Action::kReplace) {
          REQUIRE(views == 2);  // both other voters answer: 2 >= 3/2 + 1
          REQUIRE(self_started);
        }
        if (conflict) REQUIRE(d.wait == WaitKind::kConflict);
        if (d.wait == WaitKind::kConflict) REQUIRE(conflict);

        // Liveness: each situation reaches the one decision that fits it.
        if (conflict) continue;
        if (views == 0) {
          REQUIRE(d.action == (all_agree && !any_garbage ? Action::kNew : Action::kWait));
        } else if (has_foreign) {
          REQUIRE(d.action == Action::kJoin);  // 2 of 3 members, does not list n1
        } else if (self_started) {
          REQUIRE(d.action == (views == 2 ? Action::kReplace : Action::kWait));
          if (views < 2) REQUIRE(d.wait == WaitKind::kMajorityLost);
        } else if (all_heard) {
          // Rule 3 with fewer voters holding data than a quorum: a kept log past the bootstrap (a
          // view listing a started member shows one) means members that started lost their data.
          int holders = 0;
          bool past = false;
          for (const PeerCase& c : {c2, c3}) {
            if (!c.present) continue;
            bool ours = c.view == ViewCase::kFresh || c.view == ViewCase::kOthersStarted || c.view == ViewCase::kAllStarted;
            if (!ours && c.agent != AgentCase::kHasData && c.agent != AgentCase::kRunning) continue;
            ++holders;
            if (c.view == ViewCase::kOthersStarted || c.view == ViewCase::kAllStarted) past = true;
          }
          if (holders < 2 && past) {
            REQUIRE(d.wait == WaitKind::kMajorityLost);
            REQUIRE(Contains(d.reason, "logged past the bootstrap"));
          } else {
            REQUIRE(d.action == Action::kLateInitial);
            REQUIRE(d.initial_cluster == set.InitialCluster());
          }
        } else {
          REQUIRE(d.wait == WaitKind::kPeersNotReady);
          REQUIRE(Contains(d.reason, "every other voter must answer"));
        }
      }
    }
  }
  CHECK(combinations == 2 * 43 * 43);
}

// ---- rules 7 and 8: restore from a backup (or a survivor's data) ----

RestoreFacts RestoreFactsOf() {
  RestoreFacts f;
  f.backup_url = "file:///b/backups/etcd/main/2026-11-23T18:00:00Z";
  f.new_token = "tok-2";
  f.old_token = "tok";
  f.has_local_data = true;
  return f;
}

TEST_CASE("rule 7: a restore goes ahead only with a new token and no live quorum of the old cluster") {
  RestoreFacts f = RestoreFactsOf();
  SUBCASE("the old cluster is down: restore") {
    RestoreDecision d = PlanRestore(f);
    CHECK(d.action == RestoreAction::kRestore);
    CHECK(Contains(d.reason, "no member of the old cluster has a leader"));
  }
  SUBCASE("a node without data or bucket restores too") {
    f.has_local_data = false;
    f.old_token.clear();
    CHECK(PlanRestore(f).action == RestoreAction::kRestore);
  }
  SUBCASE("7b: the old token again is refused as bad input") {
    f.new_token = "tok";
    RestoreDecision d = PlanRestore(f);
    CHECK(d.action == RestoreAction::kRefuseInput);
    CHECK(Contains(d.reason, "needs a new one"));
  }
  SUBCASE("7c: a member of the old cluster reports a leader: refused, naming it and --force") {
    f.old_leaders = {"n2", "n3"};
    RestoreDecision d = PlanRestore(f);
    CHECK(d.action == RestoreAction::kRefuseLive);
    CHECK(Contains(d.reason, "n2, n3"));
    CHECK(Contains(d.reason, "--force"));
    f.force = true;
    d = PlanRestore(f);
    CHECK(d.action == RestoreAction::kRestore);
    CHECK(Contains(d.reason, "--force given"));
  }
  SUBCASE("7a: this restore was finished here: start on its data, whatever runs now") {
    f.restored_from = f.backup_url;
    f.restored_token = f.new_token;
    f.old_token = f.new_token;     // the bucket is the restored cluster's now
    f.old_leaders = {"n2"};        // the new cluster, or an old one: neither matters any more
    CHECK(PlanRestore(f).action == RestoreAction::kAlreadyRestored);
    SUBCASE("but not once its data is gone") {
      f.has_local_data = false;
      CHECK(PlanRestore(f).action != RestoreAction::kAlreadyRestored);
    }
    SUBCASE("nor for another backup or token") {
      f.restored_from = "file:///b/backups/etcd/main/2026-11-22T18:00:00Z";
      f.old_token = "tok";
      CHECK(PlanRestore(f).action == RestoreAction::kRefuseLive);
    }
  }
  SUBCASE("a restore of this backup and token begun here and killed after its bucket goes on") {
    f.restoring = true;
    f.old_token = f.new_token;  // the bucket that restore wrote
    CHECK(PlanRestore(f).action == RestoreAction::kRestore);
    SUBCASE("still refused over a live quorum of the old cluster") {
      f.old_leaders = {"n2"};
      CHECK(PlanRestore(f).action == RestoreAction::kRefuseLive);
    }
    SUBCASE("without the marker, the same bucket is an old cluster's: refused") {
      f.restoring = false;
      CHECK(PlanRestore(f).action == RestoreAction::kRefuseInput);
    }
  }
}

}  // namespace quorate

namespace quorate {
namespace {

TEST_CASE("rule 6: a version etcd would refuse stops every rule, restart and join alike, before etcd starts") {
  MemberSet set = MakeSet(3);
  ClusterView running{set.cluster_id(), {CMember(set, 1, true), CMember(set, 2, true), CMember(set, 3, true)}};
  for (bool has_data : {true, false}) {
    CAPTURE(has_data);
    PlanInput in = MakeInput(set);
    in.has_local_data = has_data;
    if (!has_data) running.members.erase(running.members.begin());  // n1 joins a cluster of two
    for (auto& p : in.peers) {
      p.cluster = running;
      p.version = VersionAnswer{{3, 5, 30}, EtcdVersion{3, 5, 0}};
    }
    in.binary_version = EtcdVersion{3, 4, 23};
    Decision d = Plan(in);
    CHECK(d.action == Action::kWait);
    CHECK(d.wait == WaitKind::kVersion);
    CHECK(d.reason.find("etcd 3.4.23 (--etcd) is older than the cluster version 3.5") == 0);
    // The same start with the cluster's binary goes ahead by its usual rule.
    in.binary_version = EtcdVersion{3, 5, 30};
    CHECK(Plan(in).action == (has_data ? Action::kRestart : Action::kJoin));
    // Unknown binary (init without etcd beside it): the peers alone refuse nothing here.
    in.binary_version.reset();
    CHECK(Plan(in).wait != WaitKind::kVersion);
  }
}

TEST_CASE("rule 6: with no peer answering, the cluster version the bucket recorded still binds") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set);
  in.has_local_data = true;
  in.binary_version = EtcdVersion{3, 4, 23};
  in.recorded_cluster_version = EtcdVersion{3, 5, 0};
  CHECK(Plan(in).wait == WaitKind::kVersion);
  in.recorded_cluster_version = EtcdVersion{3, 4, 0};
  CHECK(Plan(in).action == Action::kRestart);
}

TEST_CASE("MemberAdd's every-voter check (3.4, 3.5 before 3.5.30): a replace names the other voter that holds it up") {
  MemberSet set = MakeSet(5);
  PlanInput in = MakeInput(set);
  ClusterView all_started{set.cluster_id(), {}};
  for (int k = 1; k <= 5; ++k) all_started.members.push_back(CMember(set, k, true));
  for (auto& p : in.peers) {
    if (p.name != "n5") p.cluster = all_started;  // n5 is down; n1 (self) lost its data
  }
  in.member_add_needs_every_voter = true;
  Decision strict = Plan(in);
  CHECK(strict.action == Action::kReplace);
  CHECK(Contains(strict.reason, "this etcd adds no member while a voter is down (n5)"));
  CHECK_FALSE(Contains(strict.reason, "(n1"));  // our own stale ID is removed first, so it never holds it up
  in.member_add_needs_every_voter = false;
  Decision relaxed = Plan(in);
  CHECK(relaxed.action == Action::kReplace);
  CHECK_FALSE(Contains(relaxed.reason, "voter is down"));
}

TEST_CASE("a view with no started member (a survivor replaying its log) is no ground to join: wait, never MemberAdd") {
  MemberSet set = MakeSet(3);
  PlanInput in = MakeInput(set, 2);
  ClusterView replaying{set.cluster_id(), {CMember(set, 1, /*started=*/false)}};
  PeerNamed(in, "n1").cluster = replaying;
  Decision d = Plan(in);
  CHECK(d.action == Action::kWait);
  CHECK(d.wait == WaitKind::kPeersNotReady);
  CHECK_FALSE(d.add_member);
  CHECK(Contains(d.reason, "lists no started member yet"));
  // Once a member has started, the same view is a cluster to join.
  PeerNamed(in, "n1").cluster = ClusterView{set.cluster_id(), {CMember(set, 1, true)}};
  CHECK(Plan(in).action == Action::kJoin);
}

}  // namespace
}  // namespace quorate
