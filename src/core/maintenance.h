// What the leader's quorate does to keep etcd's database in shape (docs/DESIGN.md §12): compact the
// history, defragment one member at a time by rule, clear a NOSPACE alarm once its cause is gone,
// report a CORRUPT one. Pure: facts in, one decision out, so every rule is a planner test; the actor
// that gathers the facts and carries the decision out is node/maintenance.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quorate/member.h"

namespace quorate {

struct MaintenanceSettings {
  bool enabled = true;
  // Rule M5: a member is defragmented when its database is at least this large and at least this
  // share of it is free pages (OpenShift's etcd operator's thresholds).
  int64_t defrag_min_bytes = 100LL << 20;
  int defrag_min_percent = 45;
  // etcd's --quota-backend-bytes (its default when not given): NOSPACE is raised past it.
  int64_t quota_bytes = 2LL << 30;
  // Revisions of history kept by a compaction: 0 compacts only on NOSPACE, to the current revision.
  int64_t keep_revisions = 0;
  // Between two defragmentations, so the cluster settles and every member is seen healthy again.
  std::chrono::milliseconds pause{std::chrono::seconds(10)};
  // Rule M6: a learner that neither catches up nor makes progress for this long is removed (0: never).
  // Long enough for etcd to send a large database as a raft snapshot, during which the learner's
  // applied index stands still.
  std::chrono::milliseconds learner_deadline{std::chrono::minutes(10)};
  // Rule M7: members of the ordinals a StatefulSet was scaled away from are removed.
  bool scale_in = true;
};

// One member as its Maintenance.Status answered (or not).
struct MemberUpkeepFacts {
  MemberId id = 0;
  std::string name;
  std::string client_url;
  bool answered = false;
  bool is_learner = false;
  uint64_t raft_applied_index = 0;
  // A learner's time without progress as the leader's quorate saw it (LearnerWatch): neither caught
  // up with the leader's index nor applying more than before, or not answering.
  std::chrono::milliseconds stalled_for{0};
  int64_t db_size = 0;
  int64_t db_size_in_use = 0;
  bool nospace = false;  // a NOSPACE alarm of this member stands
  bool corrupt = false;  // a CORRUPT alarm of this member stands
  // Defragmented since the NOSPACE alarm was raised: once is enough, the file then holds what is in use.
  bool defragmented_under_alarm = false;
};

struct MaintenanceFacts {
  MemberId self = 0;
  MemberId leader = 0;    // as this member's etcd reports it
  int64_t revision = 0;   // the store's current revision
  uint64_t leader_raft_index = 0;
  int64_t compacted = 0;  // the revision known compacted (0: none known)
  std::vector<MemberUpkeepFacts> members;
  // NOSPACE alarms of members the cluster no longer lists: etcd keeps an alarm past its member's
  // removal (etcd-io/etcd#14379), and it refuses every write all the same (rule M3).
  std::vector<MemberId> nospace_of_removed;
  // Rule M7: the StatefulSet's spec.replicas as the k8s provider read it; none outside a StatefulSet.
  std::optional<size_t> scale_target;
  // Since the last defragmentation this actor made; a large value when it made none.
  std::chrono::milliseconds since_last_defrag{std::chrono::hours(24)};
};

enum class MaintenanceAction { kNone, kWait, kCompact, kDefragment, kDisarm, kRemoveLearner, kRemoveMember };

struct MaintenanceDecision {
  MaintenanceAction action = MaintenanceAction::kNone;
  MemberId member = 0;   // kDefragment, kRemoveLearner, kRemoveMember: the member
  int64_t revision = 0;  // kCompact: up to where
  std::string rule;      // "M3" ...
  std::string reason;
};

MaintenanceDecision PlanMaintenance(const MaintenanceFacts& facts, const MaintenanceSettings& settings);

// Rule M6's record of a learner it removes, kept in etcd under this key: rule 1b reads it to tell
// M6's removal (its node joins again) from the operator's (its node holds). Written before the
// removal with the state kLearnerRemoving, and with kLearnerRemovalAbandoned when etcd refused it.
std::string LearnerRemovalKey(MemberId id);
inline constexpr const char* kLearnerRemoving = "removing";
inline constexpr const char* kLearnerRemovalAbandoned = "abandoned";

// Rule M6's memory, kept by the leader's quorate between rounds: when each learner last made
// progress. Forgotten whenever this quorate does not lead (Forget), so a new leadership watches every
// learner for a whole deadline before it removes one.
class LearnerWatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Sets each learner's stalled_for in `facts` (members, leader_raft_index) from what it shows now.
  void Observe(MaintenanceFacts& facts, TimePoint now);
  void Forget() { seen_.clear(); }

 private:
  struct Seen {
    uint64_t applied = 0;
    TimePoint progress;
  };
  std::map<MemberId, Seen> seen_;
};
const char* MaintenanceActionName(MaintenanceAction action);

// A NOSPACE alarm is lowered only once every member's database is at most this share of the quota:
// lowered at the quota's edge, the next writes would raise it again at once.
inline constexpr int kDisarmBelowPercent = 80;

}  // namespace quorate
