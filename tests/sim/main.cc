// quorate_sim: runs seeds of the simulation (tests/sim/world.h) and says which failed and how to
// replay them. `scripts/sim` runs it on every core; the `sim` meson suite runs fixed seeds.
//
//   quorate_sim --seeds N [--start S] [--nodes 3|5]   explore seeds S .. S+N-1
//   quorate_sim --seed S [--nodes 3|5] [--verbose]     one seed, every event and log line on stderr
//   quorate_sim --replay-check --seeds N ...           each seed twice: the traces must be equal
//   quorate_sim --regressions                          the seeds kept from bugs found
//   --hashes FILE                                      append each run's decision-sequence hash
//   --etcd 3.4|3.5                                     etcd's MemberAdd check (default: the seed picks)
//   --mode run|init                                    quorate run, or init + upkeep (default: the seed picks)
//   --cloud yes|no                                     a whole scaling group that replaces instances (default:
//                                                      the seed picks)
//   --strict yes|no                                    etcd's --strict-reconfig-check (default: the seed picks)
//   --extra yes|no                                     a node beyond --cluster-size (default: the seed picks)
//   --maintenance yes|no                               the leader's maintenance against a small quota, a
//                                                      workload and scale-in (default: the seed picks)
//   --learner-churn yes|no                             a learner lost right after its add: its instance
//                                                      replaced (on a cloud), or its volume (default: the
//                                                      seed picks)
//   --backups yes|no                                   quorate run's scheduled backups into a store in memory,
//                                                      each checked against the data (default: the seed picks)
//   --laggards yes|no                                  a follower's disk stalls, so it falls behind the leader's
//                                                      log (default: the seed picks)
//   --restore yes|no                                   the operator restores the newest backup on every node with
//                                                      a new token (rule 7), amid kills (default: the seed picks)
//   --recover yes|no                                   in a restore seed, from `quorate recover` on a surviving
//                                                      member instead (rule 8; default: the seed picks)
//   --find CONDITION --seeds N [--start S] ...         the first seed that reaches CONDITION (World::Mark),
//                                                      to keep as a regression; --list-conditions: those of a run
//   --reached                                          with --seed: the conditions the run reached
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "sim.h"

namespace {

using quorate::sim::RunOptions;
using quorate::sim::RunResult;
using quorate::sim::RunSeed;
using quorate::sim::Check;

// A kept seed and the condition it guards: a run that no longer reaches it guards nothing (the code
// or the model changed under it), so it fails, naming the condition to find a new seed for.
struct Regression {
  uint64_t seed;
  int nodes;
  quorate::sim::RunOptions::Mode mode = quorate::sim::RunOptions::Mode::kSeedPicks;
  int cloud = -1;
  int strict = -1;
  int extra = -1;
  const char* guards = "";
  // Rows kept before the model learnt maintenance run without it, as they were found.
  int maintenance = 0;
  // The same for a learner's instance replaced before its promotion.
  int learner_churn = 0;
  // The same for the scheduled backups and the followers whose disks stall.
  int backups = 0;
  int laggards = 0;
  // The same for the operator's restore (rule 7), and its recover (rule 8).
  int restore = 0;
  int recover = 0;
};

// A seed that fails on a bug of quorate found and not fixed yet, with the check it fails.
struct Finding {
  uint64_t seed;
  int nodes;
  quorate::sim::RunOptions::Mode mode;
  int cloud;
  int strict;
  int extra;
  Check check;
  int maintenance = 0;
};

constexpr auto kRun = quorate::sim::RunOptions::Mode::kRun;
constexpr auto kInit = quorate::sim::RunOptions::Mode::kInit;
constexpr auto kSeedPicks = quorate::sim::RunOptions::Mode::kSeedPicks;

// Seeds on which the simulator found a bug in quorate, kept once it was fixed (docs/testing.md,
// "Simulation"), each with the condition (World::Mark) it must still reach to guard anything; when the
// code or the model moves a seed off its condition, `--find` picks the next that reaches it. The
// seeds of the bugs as they were found (101023, 201266, 102852, 2617, 311127, 286, 2003981 ...) moved
// off their conditions when issue 26's faults entered the model; these were picked by `--find`.
constexpr Regression kRegressions[] = {
    // A removal seen while etcd ran held etcd stopped only while a majority kept saying so
    // (src/node/init.cc now remembers it; init_test has the unit case).
    {19, 3, kRun, 0, 1, 0, "wait removed"},
    {7, 3, kRun, 0, 0, 0, "wait removed"},
    // Every node crashed just after the bootstrap and one lost its volume; the only view that answered
    // predated its start, and rule 3 started it `new` under its old ID with an empty log. A late
    // initial start now needs every other voter's view or empty disk (planner_test has the unit case).
    {154, 3, kRun, 0, 1, 0, "a member that lost its data looks never started"},
    // Two of five voters kept data, one of them past the bootstrap; the three that lost theirs showed
    // as never started in every view, and rule 3 started them `new`. Rule 3 now reads the kept logs
    // (the agent's log_past_bootstrap) and waits on the lost majority, saying so.
    {15, 5, kRun, 0, 1, 0, "ended waiting on a lost majority"},
    // A member removed without learning it answered as a voter, so rule 4 tried a replace no quorum
    // could commit, and said only that it timed out; the timeout now says a majority may be lost
    // (kept at 478 since "unhealthy cluster" asked again every 500 ms moved 759 off its condition).
    {478, 3, kRun, 0, 1, 0, "a removal no quorum commits"},
    // Init mode: one node bootstrapped and its init exited, agent and all; the nodes that decided
    // after it waited for that agent to say whether its log went past the bootstrap, for ever (CI's
    // bootstrap-dns). A holder with no agent answering is now judged by its view.
    {5, 3, kInit, 0, 1, 0, "a late start beside a holder with no agent"},
    // On a cloud: a learner added by an instance the group replaced before its etcd started blocked
    // every later add ("too many learner members"); rule 9 now takes a departed learner out first.
    {26, 3, kRun, 1, 1, 0, "a learner removed"},
    // On a cloud: the voters left after instances departed were no quorum, and a newcomer's MemberAdd
    // only timed out; it now waits, saying a majority is lost.
    {15, 3, kRun, 1, 1, 0, "wait majority-lost"},
    // On a cloud: newcomers joined a cluster below its size beside a departed voter: two both got in
    // (six members, one dead), or etcd 3.4 refused the add for the voter not connected. A newcomer
    // now takes a departed member's seat first.
    {2, 5, kRun, 1, 1, 0, "decide join removing a member"},
    // On a cloud: an initial member that had not started when another instance was replaced waited
    // for ever for the bootstrap's member set; it now takes its own place as rule 4 does.
    {15, 5, kRun, 1, 1, 0, "a never-started member replaced"},
    // On a cloud: the operator removed a member whose bucket still held its peers' first addresses;
    // the group had replaced both, so it never saw the removal and restarted etcd for ever (DESIGN
    // §10's open finding 3). A node with data now asks discovery once and prefers an answer that
    // lists it over the bucket.
    {11, 3, kRun, 1, 1, 0, "wait removed"},
    // A peer's agent read the WAL of an etcd it had just launched, before etcd wrote it, and kept
    // "past the bootstrap" for good: the late nodes waited for ever as if a majority were lost (CI's
    // member-remove). The agent keeps only what the log said; the simulator asks the real agent.
    {5, 5, kRun, 0, 1, 0, "an agent asked before its etcd wrote the WAL"},
    // On a cloud: a newcomer's MemberRemove timed out, and its retry's NotFound was taken for its own
    // removal, while another newcomer had removed that member and taken its seat: it joined beside
    // a departed member, six members of five. A removal that finds the member gone decides again.
    {149, 5, kRun, 1, 1, 0, "MemberRemove finds the member gone"},
    // Issue 26's faults, each kept where quorate meets it: a member replaying its WAL lists a part of
    // the membership (rule 1b must not take it for a removal), a member list that lags, a previous
    // incarnation's answers, a whole-group listing without a live instance (rule 9 asks its peer
    // URLs), a power cut between a rename and its directory's sync, and with etcd's guards off a
    // removal that only quorate's own quorum check makes safe.
    {2, 3, kRun, 0, 1, 0, "a partial view of a member replaying its WAL"},
    {152, 3, kRun, 0, 1, 0, "a member list that lags"},
    {663, 3, kRun, 0, 1, 0, "an answer from a previous incarnation"},
    {15, 3, kRun, 1, 1, 0, "a whole-group listing left out a live instance"},
    {6, 3, kRun, 0, 1, 0, "a power cut undid a rename"},
    {2, 3, kRun, 0, 0, 0, "a voter removed"},
    {1, 3, kRun, 0, 1, 1, "wait extra"},
    // On a cloud: a majority lost (a departed voter, a voter that never started), and rule 9's
    // newcomer waited only "short of the majority that commits its removal". A voter whose agent says
    // it holds no data now counts with the departed ones: no change can commit, a majority is lost.
    {206, 3, kRun, 1, 1, 0, "ended waiting on a lost majority"},
    // A node replacing its member (rule 4) freed its seat between the removal and the add; an extra
    // node took it by rule 2, and both adds went on, each retried past "too many learner members":
    // four members of three (six of five). A stray now leaves a seat to a discovered member whose
    // agent says it is empty, and every try of MemberAdd reads the membership first and adds none past
    // --cluster-size.
    {1, 3, kRun, 0, 1, 1, "decide replace removing a member"},
    {1, 5, kRun, 0, 1, 1, "decide replace removing a member"},
    // Init mode: an extra node joined (by rule 2, into the seat of a member the operator removed) and
    // wrote a member bucket without itself, so `quorate upkeep` refused to start and its learner was
    // never promoted. A new bucket now records this node beside the discovered set.
    {128, 3, kInit, 0, 1, 1, "decide join"},
    {250, 3, kInit, 0, 0, 1, "decide join"},
    // An extra node joined into the seat of a member the operator removed, and then a discovered
    // member lost its data: rule 4 counted only discovered members' answers, found 1 of 3 voters
    // and waited for ever saying a majority was lost. A voter outside the set whose peer URL
    // answers now counts.
    {2, 3, kRun, 0, 1, 1, "decide replace removing a member"},
    // On a cloud: discovery listed a pending instance in place of a live voter when a newcomer wrote
    // its bucket, so its upkeep never had that voter's client URL; once the operator removed the
    // other member the bucket named, no endpoint could promote the learner. Upkeep now asks the
    // members the cluster lists first.
    {15, 3, kRun, 1, 0, 0, "a whole-group listing left out a live instance"},
    // On a cloud: a node that listed the group at its start took a learner a newer instance had just
    // added, silent and outside that listing, for departed and removed it; the replaced instance's
    // voter kept its seat and the newer one waited as extra. Rule 9 lists the group again first.
    {23, 5, kInit, 1, 0, 0, "decide join removing a member"},
    // A member replaying its WAL listed three of five members, none started and not itself; rule 3
    // took that for the membership and started `new` a member that had lost its data, beside two
    // empty ones, while the two that kept logs past the bootstrap went unasked. A view where no
    // member started that lacks its own answerer is now no ground for rule 3.
    {265, 5, kRun, 0, 1, 0, "a partial view of a member replaying its WAL"},
    // The leader's maintenance (§12) as the model learnt it, each action kept where a seed reaches
    // it: a NOSPACE alarm compacted, each member defragmented (the leader last) and disarmed, in run
    // and in init mode; a defragmentation past M5's thresholds; a learner whose node died removed
    // by M6; the members of a scaled-in StatefulSet's ordinals removed by M7, of 3 and of 5.
    {9, 3, kRun, 0, 1, 0, "NOSPACE disarmed", 1},
    {3, 3, kRun, 0, 1, 0, "the leader defragmented", 1},
    {3, 5, kInit, 0, 0, 0, "NOSPACE disarmed", 1},
    {2, 3, kRun, 0, 1, 0, "a member defragmented past the thresholds", 1},
    {96, 3, kRun, 0, 1, 0, "maintenance removed a learner", 1},
    {3, 3, kRun, 0, 1, 0, "maintenance removed a voter", 1},
    {3, 5, kRun, 0, 1, 0, "maintenance removed a voter", 1},
    // NOSPACE on two voters and a learner: M3 waited for a margin only the promotion would give, and
    // upkeep promoted no learner under an alarm. M3 now defragments one or two voters without it,
    // and upkeep promotes under NOSPACE.
    {23, 3, kInit, 1, 0, 1, "NOSPACE disarmed", 1},
    // On a cloud: a departed member kept M3 waiting, rule 9's newcomer waited for a learner, and the
    // learner for the alarm; upkeep now promotes under NOSPACE.
    {154, 5, kInit, 1, 1, 0, "NOSPACE disarmed", 1},
    // On a cloud, a learner's instance replaced before its promotion and a voter's with it: the
    // newcomers find a departed learner and a departed voter, and rule 9 must take the learner first
    // (the catalogue's rule9-departed-voter-first waits in such a run for ever on a learner that never
    // catches up; kept at 19 since "unhealthy cluster" asked again every 500 ms moved 66 off it).
    {19, 5, kRun, 1, 1, 0, "a learner's and a voter's instances replaced at once", 0, 1},
    // A learner M6 removed while its node was down, restarted by a fresh quorate on its stale data:
    // once that etcd was refused, rule 1b held the node for good, as after the operator's removal
    // under it. M6's record has it join again now, and the operator's removal under a quorate holds
    // (kept at seed 1 of 5 since the record's calls moved 100357 off its condition).
    {17, 5, kRun, 0, 1, 1, "maintenance removed a learner", 1},
    // Off a cloud, a node replaced its own member and decided again while a peer replayed its log,
    // which listed the removed ID unstarted: rule 3 started `new` under it. In the same process
    // (938 of 3: PlanInput::replaced_here) and after the quorate started anew (found at 264 of 5,
    // kept at 21: rule 3 waits while a view does not list the ID).
    {32, 3, kRun, 0, 0, 0, "a replaying view lists a member removed since", 0, 1},
    {19, 5, kRun, 0, 1, 0, "a replaying view lists a member removed since", 0, 1},
    // An extra node's fresh quorate started etcd as the learner its predecessor added, and M6 removed
    // it as it started: M6's record has that node join again (§12 M6; seed 1267 before the record,
    // when rule 1b held it; kept at 29 since "unhealthy cluster" asked again every 500 ms moved 6287 off it).
    {29, 3, kRun, 0, 1, 1, "maintenance removed a learner whose etcd runs", 1, 1},
    // On a cloud, every member unstarted: n4's instance departed, n3 and n5 empty; rule 9's newcomer
    // counted n5 among the empty voters only while n5's agent answered, n5's quorate was down between
    // its --timeout exits, and no node said a majority was lost. Its last answer now counts.
    {356, 5, kRun, 1, 0, 0, "wait majority-lost"},
    // The operator's restore (rule 7), kept where it meets what the restore must survive: a lost
    // majority, of 3 and of 5; the node killed right after the restore's rename put the new member in
    // place, and after the old member was moved aside; and in each, one node's first try with the old
    // token, which rule 7b refuses (the catalogue's restore-old-token makes the old cluster there).
    {55, 3, kRun, 0, 1, 0, "a restore after a lost majority", 0, 0, 0, 0, 1},
    {27, 5, kRun, 0, 0, 0, "a restore after a lost majority", 0, 0, 0, 0, 1},
    {3, 3, kRun, 0, 1, 0, "a restore killed after: member in place", 0, 0, 0, 0, 1},
    {7, 3, kRun, 0, 1, 0, "a restore killed after: old member aside", 0, 0, 0, 0, 1},
    // The operator's recover (rule 8) from a follower whose WAL saved a commit short of puts the
    // leader had acknowledged (the catalogue's recover-keeps-commit loses them there), of 3 and of
    // 5; and a recover after a lost majority, of 3 and of 5.
    {41, 3, kRun, 0, -1, 0, "a recover kept acknowledged puts past the saved commit", 0, 0, 1, 0, 1, 1},
    {6, 5, kRun, 0, -1, 0, "a recover kept acknowledged puts past the saved commit", 0, 0, 1, 0, 1, 1},
    {39, 3, kRun, 0, -1, 0, "a recover after a lost majority", 0, 0, 1, 0, 1, 1},
    {27, 5, kRun, 0, -1, 0, "a recover after a lost majority", 0, 0, 1, 0, 1, 1},
    // Every node restarted at once; a removed member's etcd, on data that never saw its removal,
    // listed every initial member a voter, and rule 4 counted 3 of 5 voters answering where 1 of the
    // cluster's 3 did (remove-quorum; seed 1347 of 5). Rule 4 now counts on a member list read with
    // quorum; kept where a removed member answers so.
    {224, 5, kRun, 0, 0, 0, "a removed member answers the membership from before its removal", 0, 0, 1, 0, 0},
    // Found once upkeep's real loop ran in the simulator (the tenth session), each with every option as
    // its seed picks it (-1), as exploration runs it. Both voters left after the operator's removal
    // lost their data; nothing of the cluster ran, and no node said a majority was lost
    // (majority-lost-unsaid): rule 1b's hold now says it.
    {1589, 3, kSeedPicks, -1, -1, -1, "a held removal says its cluster lost a majority", -1, -1, -1, -1, -1, -1},
    // Rule 4 counted 2 of 3 voters on the views, one a removed member's etcd on data that never saw
    // its removal, and asked MemberRemove with no quorum (remove-quorum, seed 1334): now it waits for
    // a member list read with quorum. Moved off by the learner churn's volume lost after a publish.
    {329, 3, kSeedPicks, -1, -1, -1, "decide wait removing a member", -1, -1, -1, -1, -1, -1},
    // A replaying peer listed itself and us, none started, the third initial member down: rule 3
    // started `new` over logs past the bootstrap (new-over-data); it now waits for every initial member.
    {2880, 3, kSeedPicks, -1, -1, -1, "a replaying view lists its answerer but not every initial member", -1, -1,
     -1, -1, -1, -1},
    // NOSPACE came back before a round saw it gone; the leader was defragmented first (defrag-leader-first).
    {88, 3, kSeedPicks, -1, -1, -1, "NOSPACE disarmed again", -1, -1, -1, -1, -1, -1},
    // The alarm of a member a scale-in removed stood for good (nospace-stuck).
    {3442, 3, kSeedPicks, -1, -1, -1, "the NOSPACE alarm of a removed member disarmed", -1, -1, -1, -1, -1, -1},
    // A learner's node lost its volume just after its member published, its peers' lists lagging;
    // the views showed the added member unstarted, and the node started as it with an empty data dir
    // (started-empty): the start as an added member now reads the membership with quorum first. Found
    // at seed 40; moved off when the peers' lists learnt to predate the add (the mutant
    // start-added-unchecked fails here).
    {76, 3, kSeedPicks, -1, -1, -1, "a new member's volume lost after its start while its peers' lists lack it", -1,
     -1, -1, -1, -1, -1},
    // The same loss with the peers' lists from before the add and the one current peer down with it:
    // the decision is to join, and the add's membership read finds the member started (the mutant
    // add-exists-started fails such a run: started-empty).
    {40, 3, kSeedPicks, -1, -1, -1, "a new member's volume lost after its start while its peers' lists predate its add",
     -1, -1, -1, -1, -1, -1},
    // A live instance in standby stays out of the group's listings for a while, rule 9's second look
    // included: its member is outside the group, and only its answering peer URLs keep a newcomer
    // from taking its seat (the mutant rule9-skips-silent, which takes every outsider for silent, removes
    // it where both listings leave the same one out: removed-live).
    {21, 5, kSeedPicks, -1, -1, -1, "a live instance left out of two listings in a row", -1, -1, -1, -1, -1, -1},
    // A peer's view lacks a member the cluster lists, and that member's node decides on its data: rule
    // 1b must read the removal off a member list read with quorum (the mutant rule1b-peer-view, which
    // takes such a view's word, fails removal-misread).
    {33, 3, kSeedPicks, -1, -1, -1, "a view lacks the asker's member, which the cluster lists", -1, -1, -1, -1, -1,
     -1},
    // A node replaced its voter (rule 4: the same URLs, a new ID) as the leader's maintenance round
    // began on the list from before; the new learner answered at the old voter's client URL and the
    // round counted it, and defragmented with one voter of two left (defrag-no-margin). A member now
    // answers only as itself.
    {1135, 3, kSeedPicks, -1, -1, -1, "a maintenance round's status answered by a member added since its list", -1,
     -1, -1, -1, -1, -1},
    // A learner's disk stalls past --learner-deadline under a live quorate: M6 removes the learner
    // while the process that ran its etcd goes on, and its record has that process join again (the
    // mutant m6-no-record holds it for good: no-convergence).
    {1375, 3, kSeedPicks, -1, -1, -1, "maintenance removed a learner whose etcd runs", -1, -1, -1, -1, -1, -1},
};

// Bugs of quorate the simulator found and that are not fixed yet (docs/DESIGN.md §10, "Found and
// open"): each seed must keep failing the check named, so a fix shows as a change here. A row is
// {seed, nodes, mode, cloud, strict, extra, Check::k...}.
constexpr std::array<Finding, 0> kKnownFindings{};

int Usage() {
  std::fprintf(stderr,
               "usage: quorate_sim (--seeds N [--start S] | --seed S | --regressions | --find CONDITION --seeds N)\n"
               "                   [--nodes 3|5] [--verbose] [--reached] [--replay-check] [--hashes FILE]\n"
               "                   [--etcd 3.4|3.5] [--mode run|init] [--cloud yes|no] [--strict yes|no]\n"
               "                   [--extra yes|no] [--maintenance yes|no] [--learner-churn yes|no] [--backups yes|no]\n"
               "                   [--laggards yes|no] [--restore yes|no] [--recover yes|no] [--all-failures]\n");
  return 2;
}

bool IsKnown(quorate::sim::Check check) {
  return std::any_of(std::begin(kKnownFindings), std::end(kKnownFindings),
                     [&](const Finding& f) { return f.check == check; });
}

RunOptions OptionsOf(const Regression& r) {
  RunOptions options;
  options.seed = r.seed;
  options.nodes = r.nodes;
  options.mode = r.mode;
  options.cloud = r.cloud;
  options.strict = r.strict;
  options.extra = r.extra;
  options.maintenance = r.maintenance;
  options.learner_churn = r.learner_churn;
  options.backups = r.backups;
  options.laggards = r.laggards;
  options.restore = r.restore;
  options.recover = r.recover;
  return options;
}

std::string Flags(const RunOptions& o) {
  std::string out;
  if (o.mode == kRun) out += " --mode run";
  if (o.mode == kInit) out += " --mode init";
  if (o.cloud >= 0) out += o.cloud == 1 ? " --cloud yes" : " --cloud no";
  if (o.strict >= 0) out += o.strict == 1 ? " --strict yes" : " --strict no";
  if (o.extra >= 0) out += o.extra == 1 ? " --extra yes" : " --extra no";
  if (o.maintenance >= 0) out += o.maintenance == 1 ? " --maintenance yes" : " --maintenance no";
  if (o.learner_churn >= 0) out += o.learner_churn == 1 ? " --learner-churn yes" : " --learner-churn no";
  if (o.backups >= 0) out += o.backups == 1 ? " --backups yes" : " --backups no";
  if (o.laggards >= 0) out += o.laggards == 1 ? " --laggards yes" : " --laggards no";
  if (o.restore >= 0) out += o.restore == 1 ? " --restore yes" : " --restore no";
  if (o.recover >= 0) out += o.recover == 1 ? " --recover yes" : " --recover no";
  return out;
}

// The kept seeds: each passes and still reaches the condition it guards; each known finding still
// fails its check (once one passes, its bug is fixed: keep it as a regression).
int RunKept() {
  int bad = 0;
  for (const auto& r : kRegressions) {
    RunResult result = RunSeed(OptionsOf(r));
    if (!result.ok) {
      ++bad;
      std::printf("FAIL regression seed %llu nodes %d: %s\n  replay: scripts/sim --seed %llu --nodes %d%s --verbose\n",
                  static_cast<unsigned long long>(r.seed), r.nodes, result.failure.c_str(),
                  static_cast<unsigned long long>(r.seed), r.nodes, Flags(OptionsOf(r)).c_str());
    } else if (!result.reached.contains(r.guards)) {
      ++bad;
      std::printf("STALE regression seed %llu nodes %d no longer reaches \"%s\", so it guards nothing: pick another "
                  "with quorate_sim --find '%s' --seeds 5000 --nodes %d%s\n",
                  static_cast<unsigned long long>(r.seed), r.nodes, r.guards, r.guards, r.nodes,
                  Flags(OptionsOf(r)).c_str());
    }
  }
  for (const auto& f : kKnownFindings) {
    Regression r{f.seed, f.nodes, f.mode, f.cloud, f.strict, f.extra, "", f.maintenance};
    RunResult result = RunSeed(OptionsOf(r));
    if (result.ok || result.check != f.check) {
      ++bad;
      std::printf("CHANGED known finding seed %llu nodes %d%s: expected to fail %s, %s%s: if its bug is fixed, keep "
                  "the seed as a regression\n",
                  static_cast<unsigned long long>(f.seed), f.nodes, Flags(OptionsOf(r)).c_str(),
                  quorate::sim::CheckName(f.check), result.ok ? "passed" : "failed ",
                  result.ok ? "" : quorate::sim::CheckName(result.check));
    }
  }
  std::printf("%zu regressions, %zu known findings: %d not as kept\n", std::size(kRegressions),
              std::size(kKnownFindings), bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t start = 1, count = 0;
  int nodes = 3;
  int etcd_minor = 0;
  auto mode = quorate::sim::RunOptions::Mode::kSeedPicks;
  int cloud = -1, strict = -1, extra = -1, maintenance = -1, learner_churn = -1, backups = -1, laggards = -1, restore = -1;
  int recover = -1;
  bool verbose = false, replay_check = false, regressions = false, single = false, reached = false;
  bool all_failures = false;
  const char* hashes_path = nullptr;
  std::string find;
  auto yes_no = [](const std::string& v, int* out) {
    if (v != "yes" && v != "no") return false;
    *out = v == "yes" ? 1 : 0;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--seeds" || a == "--start" || a == "--seed" || a == "--nodes" || a == "--hashes" || a == "--etcd" ||
        a == "--mode" || a == "--cloud" || a == "--strict" || a == "--extra" || a == "--maintenance" || a == "--find" ||
        a == "--learner-churn" || a == "--backups" || a == "--laggards" || a == "--restore" ||
        a == "--recover") {
      const char* v = value();
      if (v == nullptr) return Usage();
      if (a == "--seeds") count = std::strtoull(v, nullptr, 10);
      if (a == "--start") start = std::strtoull(v, nullptr, 10);
      if (a == "--seed") {
        start = std::strtoull(v, nullptr, 10);
        count = 1;
        single = true;
      }
      if (a == "--nodes") nodes = std::atoi(v);
      if (a == "--hashes") hashes_path = v;
      if (a == "--find") find = v;
      if (a == "--mode") {
        if (std::string(v) != "run" && std::string(v) != "init") return Usage();
        mode = std::string(v) == "run" ? kRun : kInit;
      }
      if (a == "--cloud" && !yes_no(v, &cloud)) return Usage();
      if (a == "--strict" && !yes_no(v, &strict)) return Usage();
      if (a == "--extra" && !yes_no(v, &extra)) return Usage();
      if (a == "--maintenance" && !yes_no(v, &maintenance)) return Usage();
      if (a == "--learner-churn" && !yes_no(v, &learner_churn)) return Usage();
      if (a == "--backups" && !yes_no(v, &backups)) return Usage();
      if (a == "--laggards" && !yes_no(v, &laggards)) return Usage();
      if (a == "--restore" && !yes_no(v, &restore)) return Usage();
      if (a == "--recover" && !yes_no(v, &recover)) return Usage();
      if (a == "--etcd") etcd_minor = std::string(v) == "3.4" ? 4 : std::string(v) == "3.5" ? 5 : -1;
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--reached") {
      reached = true;
    } else if (a == "--replay-check") {
      replay_check = true;
    } else if (a == "--regressions") {
      regressions = true;
    } else if (a == "--all-failures") {
      all_failures = true;
    } else {
      return Usage();
    }
  }
  if ((nodes != 3 && nodes != 5) || etcd_minor < 0) return Usage();
  if (regressions) return RunKept();
  std::vector<RunOptions> runs;
  for (uint64_t s = start; s < start + count; ++s) {
    RunOptions options =
        OptionsOf({s, nodes, mode, cloud, strict, extra, "", maintenance, learner_churn, backups, laggards, restore, recover});
    options.verbose = verbose;
    options.etcd_minor = etcd_minor;
    runs.push_back(options);
  }
  if (runs.empty()) return Usage();

  if (!find.empty()) {
    for (const auto& options : runs) {
      RunResult result = RunSeed(options);
      if (result.ok && result.reached.contains(find)) {
        std::printf("seed %llu nodes %d%s reaches \"%s\"\n", static_cast<unsigned long long>(options.seed), nodes,
                    Flags(options).c_str(), find.c_str());
        return 0;
      }
    }
    std::printf("no passing seed of these %zu reaches \"%s\"\n", runs.size(), find.c_str());
    return 1;
  }

  std::FILE* hashes = hashes_path != nullptr ? std::fopen(hashes_path, "a") : nullptr;
  std::set<uint64_t> sequences;
  long quorate_starts = 0, etcd_starts = 0, majority_lost = 0, failed = 0, known = 0, init_mode = 0, clouds = 0,
       windows = 0, lax = 0, extras = 0, maintained = 0, restored = 0, restores_done = 0, recovered = 0;
  uint64_t steps = 0, acknowledged = 0, backups_taken = 0;
  double simulated = 0;
  auto began = std::chrono::steady_clock::now();
  for (const auto& options : runs) {
    RunResult result = RunSeed(options);
    if (result.ok && replay_check) {
      RunOptions again = options;
      again.verbose = false;
      RunResult second = RunSeed(again);
      if (second.trace_hash != result.trace_hash || second.steps != result.steps) {
        result.ok = false;
        result.check = quorate::sim::Check::kModel;
        result.failure = "the same seed ran differently the second time (trace hash or step count differ)";
      }
    }
    sequences.insert(result.decision_hash);
    if (hashes != nullptr) std::fprintf(hashes, "%016llx\n", static_cast<unsigned long long>(result.decision_hash));
    quorate_starts += result.quorate_starts;
    etcd_starts += result.etcd_starts;
    steps += result.steps;
    acknowledged += result.acknowledged;
    backups_taken += static_cast<uint64_t>(result.backups_taken);
    simulated += result.simulated_seconds;
    majority_lost += result.majority_lost ? 1 : 0;
    init_mode += result.init_mode ? 1 : 0;
    clouds += result.cloud ? 1 : 0;
    windows += result.init_window ? 1 : 0;
    lax += result.strict ? 0 : 1;
    extras += result.extra ? 1 : 0;
    maintained += result.maintenance ? 1 : 0;
    restored += result.restore ? 1 : 0;
    restores_done += result.restores_done;
    recovered += result.recover ? 1 : 0;
    if (single) {
      std::printf("seed %llu nodes %d etcd %s%s %s mode%s%s%s: %s, trace %016llx, %llu steps, %.1f simulated s\n",
                  static_cast<unsigned long long>(options.seed), options.nodes, result.etcd35 ? "3.5" : "3.4",
                  result.strict ? "" : " (guards off)", result.init_mode ? "init" : "run",
                  result.cloud ? " on a cloud" : "", result.extra ? " with an extra node" : "",
                  result.maintenance ? " with maintenance"
                  : result.recover   ? " with a recover and a restore"
                  : result.restore   ? " with a restore"
                                     : "",
                  !result.ok             ? "FAILED"
                  : result.majority_lost ? "ok (majority lost: waits, saying so)"
                                         : "ok",
                  static_cast<unsigned long long>(result.trace_hash), static_cast<unsigned long long>(result.steps),
                  result.simulated_seconds);
      if (reached) {
        for (const auto& c : result.reached) std::printf("  reached: %s\n", c.c_str());
      }
    }
    if (!result.ok) {
      bool is_known = !all_failures && IsKnown(result.check);
      ++(is_known ? known : failed);
      std::printf("%s seed %llu nodes %d (%s mode%s%s%s%s) [%s]: %s\n  replay: scripts/sim --seed %llu --nodes %d%s --verbose\n",
                  is_known ? "KNOWN" : "FAIL", static_cast<unsigned long long>(options.seed), options.nodes,
                  result.init_mode ? "init" : "run", result.cloud ? ", on a cloud" : "",
                  result.strict ? "" : ", guards off", result.extra ? ", an extra node" : "",
                  result.maintenance ? ", maintenance" : "",
                  quorate::sim::CheckName(result.check), result.failure.c_str(),
                  static_cast<unsigned long long>(options.seed), options.nodes, Flags(options).c_str());
    }
  }
  if (hashes != nullptr) std::fclose(hashes);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf(
      "%zu seeds (%ld in init mode, %ld on a cloud, %ld with etcd's guards off, %ld with an extra node) in %.1fs (%.1f "
      "seeds/s), %ld failed, %ld on known findings; %ld node starts (%ld quorate, %ld etcd), %ld ended with a majority "
      "lost (waiting, as rule 4 says); %zu distinct decision sequences; %llu steps, %.0f simulated hours; %ld with the "
      "leader's maintenance; %ld started in rule 3's init-mode window; %llu puts acknowledged, %llu scheduled backups "
      "checked; %ld with the operator's restore (%ld of them from a recover), %ld restored members put in place\n",
      runs.size(), init_mode, clouds, lax, extras, wall, static_cast<double>(runs.size()) / wall, failed, known,
      quorate_starts + etcd_starts, quorate_starts, etcd_starts, majority_lost, sequences.size(),
      static_cast<unsigned long long>(steps), simulated / 3600, maintained, windows,
      static_cast<unsigned long long>(acknowledged), static_cast<unsigned long long>(backups_taken), restored,
      recovered, restores_done);
  return failed == 0 ? 0 : 1;
}
