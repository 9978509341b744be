// The start-up decision of docs/DESIGN.md §4 as a pure function: facts quorate can read without quorum go
// in, one decision with its reason comes out. No I/O, no clock, so every rule is tested exhaustively.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/etcd_version.h"
#include "quorate/member.h"

namespace quorate {

struct PeerFacts {
  std::string name;  // as in the expected member set
  AgentReport agent;
  std::optional<ClusterView> cluster;  // nullopt when its etcd peer URL did not answer as etcd
  // Set when its peer URL answered, but not as etcd ever does (an HTTP error, not JSON, no cluster
  // ID, names or URLs etcd refuses, a failed TLS handshake): what it answered. Only silence means
  // "no etcd there"; this means "unknown", and no new cluster is started past it.
  std::string foreign_answer;
  std::optional<VersionAnswer> version;  // its GET /version, when it answered as etcd
  // Its agent does not answer now (its quorate between a --timeout exit and its next start, say),
  // and said its data dir was empty when it last answered this process. Its etcd, silent, gains no
  // vote but through a change that commits: rule 9's count of the voters that never vote again takes
  // it, as one that answers empty now.
  bool empty_when_last_answered = false;
};

struct PlanInput {
  Member self;
  MemberSet expected;  // what discovery agreed on
  size_t cluster_size = 0;
  bool has_local_data = false;  // <data-dir>/member/wal exists
  // Whose that data is, from its WAL; nullopt without data or when the WAL cannot be read.
  std::optional<WalIdentity> local;
  // etcd ran under this process on this member's data: a removal met now came during this process's
  // life, and is not undone (rule 1b), unless it was rule M6's.
  bool etcd_ran = false;
  // Rule M6's record in etcd (LearnerRemovalKey) says M6 removed this member, a learner stuck past
  // --learner-deadline, read with the quorum view: its node joins again whenever it finds out (§12).
  bool removed_by_learner_deadline = false;
  // An earlier decision of this process found, with quorum, this member removed (rule 1b on a fresh
  // start): its data is never started on again, whether or not a member list can be read with quorum now.
  bool removed_before = false;
  // Rule 1b's hold, asked again: this process found its member removed while etcd ran here, in this
  // member list read with quorum then. The hold stands; the plan only says whether that cluster has
  // lost a majority since (its voters left with their instances or emptied), which no other node
  // can say once nothing of it runs.
  std::optional<ClusterView> held_removal;
  // Member IDs of ours this process set out to replace (rule 4 removes them): each started once, so
  // a view that shows one unstarted is older than its start (a peer replaying its log), and rule 3
  // never starts `new` under it.
  std::set<MemberId> replaced_here;
  std::vector<PeerFacts> peers;  // every expected member except self
  // The membership as a member lists it right after a linearizable read, so it holds every change
  // committed before the read; nullopt when no member could do one (no quorum) or it was not asked
  // (asked only when a peer's view of our WAL's cluster lacks our member). Rule 1b trusts only this.
  std::optional<ClusterView> quorum_view;
  // Rule 6: the version of the etcd binary this member will run (nullopt: not known), and the
  // cluster version its member bucket last recorded.
  std::optional<EtcdVersion> binary_version;
  std::optional<EtcdVersion> recorded_cluster_version;
  // Rule 9: `expected` is the whole scaling group the platform lists (the provider's
  // ListsWholeGroup()), and the members of the cluster that are in none of its instances, nor in any
  // of a listing of the group made after the views that showed them (a member added since the first
  // listing is that of a newer instance), and whose every peer URL was silent when asked (no
  // connection, no answer): departed instances.
  bool expected_is_whole_group = false;
  std::vector<MemberId> silent_outsiders;
  // The members of the cluster at no expected member's peer URLs whose peer URL answered as etcd: a
  // node outside the discovered set that joined by rule 2, a voter whose answer counts as any other's.
  std::vector<MemberId> answering_outsiders;
  // The cluster's etcd refuses MemberAdd while any voter is down (3.4, and 3.5 before 3.5.30):
  // a join or replace then says which voter holds it up.
  bool member_add_needs_every_voter = false;
};

enum class Action {
  kRestart,      // rule 1: local data, start etcd on it
  kJoin,         // rule 2: MemberAdd as learner (unless already added), start existing;
                 // rule 1b: first moving aside the data of a member that was removed;
                 // rule 9: first removing the member of a departed instance
  kLateInitial,  // rule 3: listed in the initial cluster, never started: start new
  kReplace,      // rule 4: remove the stale ID, add as learner, start existing
  kNew,          // rule 5: every agent empty and in agreement: start new
  kWait,         // not safe yet: wait and retry
};

enum class WaitKind {
  kNone,
  kPeersNotReady,   // unreachable or not in agreement yet
  kExtra,           // the cluster is full and does not list us
  kMajorityLost,    // replace needed but no quorum: a majority has lost its data or is down
  kConflict,        // peers report different clusters: never pick one
  kRemoved,         // rule 1b: our member was removed while etcd ran here: keep etcd stopped
  kVersion,         // rule 6: the binary's version breaks etcd's upgrade rules: do not start it
};

struct Decision {
  Action action = Action::kWait;
  WaitKind wait = WaitKind::kNone;
  std::string reason;  // one sentence for the log and the user
  std::string initial_cluster_state;  // "new" or "existing"; empty for kWait
  // etcd's --initial-cluster for the start; for kJoin/kReplace it lists the cluster's current
  // members plus self, and the caller refreshes it from MemberAdd's answer.
  std::string initial_cluster;
  bool add_member = false;               // kJoin/kReplace: MemberAdd(self peer URLs, isLearner)
  bool move_data_aside = false;          // kJoin by rule 1b: the old member's data goes aside first
  bool data_removed = false;             // rule 1b: the member our data is of was removed (any action)
  // kReplace: the stale ID; kJoin by rule 9: the departed one; kWait: the stale ID rule 4 removes once
  // a member list read with quorum counts the voters on.
  std::optional<MemberId> remove_id;
  // With add_member: --cluster-size (else the expected set's size). The seat the decision saw free
  // may be taken before MemberAdd goes through (another node's add, rule 2), so every try of the add
  // reads the membership again and refuses one past this.
  size_t cluster_size = 0;
  std::optional<ClusterId> cluster_id;   // the cluster we will be part of, when known
  std::vector<std::string> endpoints;    // client URLs of started members, for the etcd API calls
  // kLateInitial resting on views where no member has started, from a peer whose log no agent read
  // for us: its etcd may still be replaying a log that records starts (rule 3). Taken only once a
  // second look, one poll later, decides the same.
  bool look_again = false;
};

Decision Plan(const PlanInput& input);

// Rule 6's facts out of the plan's input: the binary, the recorded cluster version, each peer's.
VersionFacts VersionFactsOf(const PlanInput& input);

const char* ActionName(Action action);

// Rules 7 and 8 (docs/DESIGN.md §4): a node told to restore a new cluster from a backup (`run
// --restore-from`, also what `recover --from-member` leads to). Facts in, one decision out.
struct RestoreFacts {
  std::string backup_url;
  std::string new_token;  // --initial-cluster-token
  // This node's restore marker: the backup and token of a restore it finished; empty without one.
  std::string restored_from;
  std::string restored_token;
  // The marker says this node began a restore of this very backup with this token and did not
  // finish it: the bucket may be the one that restore wrote, with the new token.
  bool restoring = false;
  bool has_local_data = false;
  std::string old_token;  // the token of the local member bucket, the cluster the data is of
  // Members of any cluster other than the one the restore makes that report a leader: a live quorum.
  std::vector<std::string> old_leaders;
  bool force = false;
};

enum class RestoreAction {
  kRestore,          // rule 7: verify the backup, move member/ aside, restore, start new
  kAlreadyRestored,  // rule 7a: start on the restored data
  kRefuseInput,      // rule 7b: the token is not new (bad input)
  kRefuseLive,       // rule 7c: the old cluster has a live quorum and no --force
};

struct RestoreDecision {
  RestoreAction action = RestoreAction::kRefuseLive;
  std::string reason;
};

RestoreDecision PlanRestore(const RestoreFacts& facts);

}  // namespace quorate
