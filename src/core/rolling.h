// The gate of a rolling change (docs/DESIGN.md §14): a change every member's quorate makes to its own
// etcd in the same numbered phases (a CA rotation: trust old and new, new leaves, trust new only),
// some of them by restarting etcd. Pure: facts in, one decision out, so every rule (R1-R8) is a unit
// test; node/rotation gathers the facts and carries the decision out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quorate/member.h"

namespace quorate {

// Phase 0 is where every member starts; phases[i] is phase i + 1.
struct RollingPhase {
  std::string name;
  bool needs_restart = false;  // etcd reads what this phase changes only at start
};

struct RollingPlan {
  std::string change;  // "ca-rotation": for the log
  std::vector<RollingPhase> phases;
  // A member counts as caught up while its applied index is at most this far behind the highest raft
  // index any member reports.
  uint64_t max_lag = 1000;

  std::string PhaseName(int phase) const;  // "old" for 0 when `initial` says so
  std::string initial = "old";
  int last() const { return static_cast<int>(phases.size()); }
};

// One member as the membership lists it and its Maintenance.Status answered (or not), and the phase
// its quorate reported for this change.
struct RollingMember {
  MemberId id = 0;
  std::string name;  // empty: listed, never started
  bool is_learner = false;
  bool answered = false;
  bool has_leader = false;
  bool alarmed = false;  // an alarm (NOSPACE, CORRUPT) stands on it
  uint64_t raft_index = 0;
  uint64_t applied_index = 0;
  int reported = 0;  // the phase its quorate last confirmed for this change's intent
};

struct RollingFacts {
  bool intent = false;          // the change was asked for (its record in etcd)
  std::string material_problem;  // why this node cannot take the change now (a file missing...); empty: none
  std::string self;             // this member's name
  int local = 0;                // the phase this node's etcd was last set to, from the node's own record
  std::vector<RollingMember> members;
};

enum class RollingAction {
  kNone,     // nothing to do: no change asked, or done everywhere
  kWait,     // not now, and why
  kApply,    // move this node to `phase` without a restart
  kRestart,  // move this node to `phase` by restarting its etcd
  kReport,   // this node is at `phase` and its etcd is healthy there: say so to the others
};

struct RollingDecision {
  RollingAction action = RollingAction::kNone;
  int phase = 0;
  std::string rule;  // "R1"...
  std::string reason;
};

RollingDecision DecideRolling(const RollingPlan& plan, const RollingFacts& facts);
const char* RollingActionName(RollingAction action);

// The move of the peers from plaintext to TLS (DESIGN §14, rules H1-H5): its phases, and a member's
// peer URLs at each. An http URL's https twin is the same host at `https_port`; an https URL is its
// own twin (flags already moved by the operator stay as they are).
inline constexpr int kHttpsPhaseBoth = 1;        // restart: listen on http and https
inline constexpr int kHttpsPhaseAdvertised = 2;  // live: the membership lists the https URL
inline constexpr int kHttpsPhaseHttps = 3;       // restart: listen on https only
RollingPlan PeerHttpsPlan();
// Where a member at `phase` listens, and so may be reached: the URLs themselves at 0; both twins
// during the move, the one the membership lists first (http at `both`, https from `advertised`);
// the https twins once done. No URL twice.
std::vector<std::string> PeerUrlsAtPhase(const std::vector<std::string>& urls, int https_port, int phase);
// What the membership lists for a member at `phase`: its http URLs until `advertised`, their https
// twins from then on.
std::vector<std::string> AdvertisedPeerUrlsAtPhase(const std::vector<std::string>& urls, int https_port, int phase);

}  // namespace quorate
