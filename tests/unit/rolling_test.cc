#include <doctest/doctest.h>

#include "core/rolling.h"

namespace quorate {
namespace {

RollingPlan CaPlan() {
  RollingPlan plan;
  plan.change = "CA rotation";
  plan.phases = {{"bundle", true}, {"leaves", false}, {"new", true}};
  plan.max_lag = 100;
  return plan;
}

RollingMember Healthy(const std::string& name, int reported) {
  RollingMember m;
  m.id = static_cast<MemberId>(name.back());
  m.name = name;
  m.answered = true;
  m.has_leader = true;
  m.raft_index = 500;
  m.applied_index = 500;
  m.reported = reported;
  return m;
}

// Three healthy members at phase `reported`, n2 deciding, itself at `local`.
RollingFacts Three(int reported, int local) {
  RollingFacts f;
  f.intent = true;
  f.self = "n2";
  f.local = local;
  f.members = {Healthy("n1", reported), Healthy("n2", reported), Healthy("n3", reported)};
  return f;
}

TEST_CASE("R1: with no change asked, nothing is done and the node keeps its phase") {
  RollingFacts f = Three(0, 2);
  f.intent = false;
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kNone);
  CHECK(d.rule == "R1");
  CHECK(d.phase == 2);
}

TEST_CASE("R2 and R5: a member not started, or missing its material, waits and says why") {
  RollingFacts f = Three(0, 0);
  f.self = "n9";
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R2");

  f = Three(0, 0);
  f.material_problem = "no /pki/next/ca.crt: put the new CA beside the old one";
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R5");
  CHECK(d.reason == f.material_problem);
}

TEST_CASE("R8: the first restart goes to the first member in name order, only while every other voter is healthy") {
  RollingFacts f = Three(0, 0);
  f.self = "n1";
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kRestart);
  CHECK(d.rule == "R8");
  CHECK(d.phase == 1);

  // n2 waits for n1 to be back at bundle and to have said so.
  d = DecideRolling(CaPlan(), Three(0, 0));
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R8");
  CHECK(d.reason.find("after n1") != std::string::npos);

  f = Three(0, 0);
  f.members[0].reported = 1;
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kRestart);
  CHECK(d.phase == 1);

  SUBCASE("another voter down, leaderless, alarmed or lagging holds the restart") {
    for (int i = 0; i < 4; ++i) {
      RollingFacts g = f;
      RollingMember& n3 = g.members[2];
      if (i == 0) n3.answered = false;
      if (i == 1) n3.has_leader = false;
      if (i == 2) n3.alarmed = true;
      if (i == 3) n3.applied_index = 300;
      CAPTURE(i);
      RollingDecision held = DecideRolling(CaPlan(), g);
      CHECK(held.action == RollingAction::kWait);
      CHECK(held.rule == "R8");
      CHECK(held.reason.find("n3") != std::string::npos);
    }
  }
  SUBCASE("a learner's health does not hold a voter's restart; this member's own health does not either") {
    RollingFacts g = f;
    g.members[2].is_learner = true;
    g.members[2].answered = false;
    g.members[1].answered = false;
    CHECK(DecideRolling(CaPlan(), g).action == RollingAction::kRestart);
  }
}

TEST_CASE("R3: a restarted node says its phase only once its etcd is a healthy voter there; a phase with no restart at once") {
  RollingFacts f = Three(0, 1);
  f.members[1].answered = false;
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R3");

  f.members[1].answered = true;
  f.members[1].applied_index = 10;
  CHECK(DecideRolling(CaPlan(), f).action == RollingAction::kWait);

  f.members[1].applied_index = 480;
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kReport);
  CHECK(d.phase == 1);

  f = Three(1, 2);
  f.members[1].answered = false;  // leaves are read per handshake: nothing to wait for
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kReport);
  CHECK(d.phase == 2);

  // A record ahead of the node's own state (its state dir lost) is said back down at once.
  f = Three(2, 0);
  f.members[1].answered = false;
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kReport);
  CHECK(d.phase == 0);
}

TEST_CASE("R6: no node moves to the next phase while a member lags behind its own") {
  RollingFacts f = Three(1, 1);
  f.members[2].reported = 0;
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R6");
  CHECK(d.reason.find("n3 (at old)") != std::string::npos);

  // A member listed but never started lags too: it would join on what it was given.
  f = Three(1, 1);
  RollingMember unstarted;
  unstarted.id = 0x99;
  f.members.push_back(unstarted);
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R6");

  // Down during the rotation: its last word stays, and the others wait for it at every phase.
  f = Three(2, 2);
  f.members[0].answered = false;
  f.members[0].reported = 1;
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R6");
  CHECK(d.reason.find("n1 (at bundle)") != std::string::npos);
}

TEST_CASE("R7: a phase etcd reads live is applied by every node at once, once all are at the one before") {
  RollingDecision d = DecideRolling(CaPlan(), Three(1, 1));
  CHECK(d.action == RollingAction::kApply);
  CHECK(d.rule == "R7");
  CHECK(d.phase == 2);
  // The last phase is a restart again, in order.
  RollingFacts f = Three(2, 2);
  f.self = "n1";
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kRestart);
  CHECK(d.phase == 3);
}

TEST_CASE("R4: done on this node, its next files moved away or not; the rest said by name until every member is done") {
  RollingFacts f = Three(3, 3);
  f.members[2].reported = 2;
  RollingDecision d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kNone);
  CHECK(d.rule == "R4");
  CHECK(d.reason.find("n3") != std::string::npos);
  d = DecideRolling(CaPlan(), Three(3, 3));
  CHECK(d.reason.find("every member") != std::string::npos);
  // The operator put next/ in place of the old files: nothing is missing for a node that is done.
  f = Three(3, 3);
  f.material_problem = "no /pki/next/ca.crt";
  d = DecideRolling(CaPlan(), f);
  CHECK(d.action == RollingAction::kNone);
  CHECK(d.rule == "R4");
}

TEST_CASE("a whole rotation of three members, every node deciding on the same facts, never restarts two at once") {
  RollingPlan plan = CaPlan();
  std::vector<int> local = {0, 0, 0};
  std::vector<int> reported = {0, 0, 0};
  int restarts = 0;
  for (int round = 0; round < 50; ++round) {
    int restarting = -1;
    for (int i = 0; i < 3; ++i) {
      RollingFacts f;
      f.intent = true;
      f.self = "n" + std::to_string(i + 1);
      f.local = local[i];
      for (int j = 0; j < 3; ++j) f.members.push_back(Healthy("n" + std::to_string(j + 1), reported[j]));
      RollingDecision d = DecideRolling(plan, f);
      if (d.action == RollingAction::kRestart) {
        CHECK(restarting == -1);
        restarting = i;
        ++restarts;
        local[i] = d.phase;
      } else if (d.action == RollingAction::kApply) {
        local[i] = d.phase;
      } else if (d.action == RollingAction::kReport) {
        reported[i] = d.phase;
      }
    }
  }
  CHECK(local == std::vector<int>{3, 3, 3});
  CHECK(reported == std::vector<int>{3, 3, 3});
  CHECK(restarts == 6);  // exactly two rolling restarts
}


TEST_CASE("H1: the move to TLS on the gate: both by a restart in name order, advertised live everywhere, https by a restart") {
  const RollingPlan plan = PeerHttpsPlan();
  CHECK(plan.PhaseName(0) == "http");
  // n2 waits for n1, before it in name order, to come back listening on both.
  RollingDecision d = DecideRolling(plan, Three(0, 0));
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R8");
  RollingFacts f = Three(0, 0);
  f.members[0].reported = kHttpsPhaseBoth;
  d = DecideRolling(plan, f);
  CHECK(d.action == RollingAction::kRestart);
  CHECK(d.phase == kHttpsPhaseBoth);
  // Every member listens on both: each lists itself at https at once, no restart.
  d = DecideRolling(plan, Three(kHttpsPhaseBoth, kHttpsPhaseBoth));
  CHECK(d.action == RollingAction::kApply);
  CHECK(d.phase == kHttpsPhaseAdvertised);
  CHECK(d.rule == "R7");
  // No member drops http while another is not yet listed at https (a peer would still dial it there).
  f = Three(kHttpsPhaseAdvertised, kHttpsPhaseAdvertised);
  f.members[2].reported = kHttpsPhaseBoth;
  d = DecideRolling(plan, f);
  CHECK(d.action == RollingAction::kWait);
  CHECK(d.rule == "R6");
  f = Three(kHttpsPhaseAdvertised, kHttpsPhaseAdvertised);
  f.members[0].reported = kHttpsPhaseHttps;
  d = DecideRolling(plan, f);
  CHECK(d.action == RollingAction::kRestart);
  CHECK(d.phase == kHttpsPhaseHttps);
  CHECK(plan.PhaseName(d.phase) == "https");
}

TEST_CASE("H3: a member's peer URLs at each phase of the move: where it listens and what the membership lists") {
  const std::vector<std::string> http = {"http://10.0.0.1:2380"};
  const std::string https = "https://10.0.0.1:2381";
  CHECK(PeerUrlsAtPhase(http, 2381, 0) == http);
  CHECK(PeerUrlsAtPhase(http, 2381, kHttpsPhaseBoth) == std::vector<std::string>{http[0], https});
  CHECK(PeerUrlsAtPhase(http, 2381, kHttpsPhaseAdvertised) == std::vector<std::string>{https, http[0]});
  CHECK(PeerUrlsAtPhase(http, 2381, kHttpsPhaseHttps) == std::vector<std::string>{https});
  CHECK(AdvertisedPeerUrlsAtPhase(http, 2381, 0) == http);
  CHECK(AdvertisedPeerUrlsAtPhase(http, 2381, kHttpsPhaseBoth) == http);
  CHECK(AdvertisedPeerUrlsAtPhase(http, 2381, kHttpsPhaseAdvertised) == std::vector<std::string>{https});
  CHECK(AdvertisedPeerUrlsAtPhase(http, 2381, kHttpsPhaseHttps) == std::vector<std::string>{https});
  // Taken again on what they gave (etcd's listen flag rewritten before every start), nothing changes.
  for (int phase = 0; phase <= kHttpsPhaseHttps; ++phase) {
    CAPTURE(phase);
    const auto listen = PeerUrlsAtPhase(http, 2381, phase);
    CHECK(PeerUrlsAtPhase(listen, 2381, phase) == listen);
    CHECK(AdvertisedPeerUrlsAtPhase(listen, 2381, phase) == AdvertisedPeerUrlsAtPhase(http, 2381, phase));
  }
  // Flags the operator already moved to https stay; an IPv6 host keeps its brackets; 0.0.0.0 listens on both.
  CHECK(PeerUrlsAtPhase({https}, 2381, kHttpsPhaseBoth) == std::vector<std::string>{https});
  CHECK(AdvertisedPeerUrlsAtPhase({"http://[fd00::1]:2380"}, 2381, kHttpsPhaseHttps) ==
        std::vector<std::string>{"https://[fd00::1]:2381"});
  CHECK(PeerUrlsAtPhase({"http://0.0.0.0:2380"}, 2381, kHttpsPhaseAdvertised) ==
        std::vector<std::string>{"https://0.0.0.0:2381", "http://0.0.0.0:2380"});
}

}  // namespace
}  // namespace quorate
