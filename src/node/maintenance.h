// The leader's maintenance of etcd's database (docs/DESIGN.md §12), run from upkeep: gathers the facts
// (every member's Maintenance.Status, the alarms), asks the pure planner (core/maintenance), logs the
// decision once, and carries it out: a compaction, one member's defragmentation followed by a health
// check, or a NOSPACE alarm lowered. One actor at a time: only the quorate whose etcd leads acts, and
// the next leader's quorate takes over from the facts alone (nothing is kept that a restart loses
// and needs: a compaction already made answers "compacted" and counts as done).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "core/config.h"
#include "core/maintenance.h"
#include "etcd/etcd_client.h"
#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate {

MaintenanceSettings MaintenanceSettingsOf(const Config& config);

struct MaintenanceLook {
  MaintenanceFacts facts;
  MaintenanceDecision decision;
};

class Maintainer {
 public:
  Maintainer(MaintenanceSettings settings, Clock& clock);

  // The facts as etcd answers them through `client`, and what the planner makes of them. `self` is
  // this member's ID; a member that does not lead looks no further than its own status.
  Result<MaintenanceLook> Look(EtcdClient& client, MemberId self);
  // One round: look, log a decision that changed, carry it out.
  void Round(EtcdClient& client, MemberId self);
  // quorate_maintenance_* families for /metrics.
  std::string RenderMetrics() const;
  // Rule M7's source: the StatefulSet's spec.replicas as discovery reads it now. Unset (outside a
  // StatefulSet), M7 never acts.
  using ScaleTargetSource = std::function<Result<std::optional<size_t>>()>;
  void SetScaleTarget(ScaleTargetSource source) { scale_target_source_ = std::move(source); }

 private:
  void Carry(EtcdClient& client, const MaintenanceLook& look);
  // The scale target for a look: read again when older than kScaleTargetMaxAge, or when the members
  // outnumber it (a removal is in sight, and the StatefulSet may have grown since).
  void RefreshScaleTarget(size_t members, bool force);
  // One member out (rules M6, M7), said in the log as `what`, counted under `action`.
  void Remove(EtcdClient& client, MemberId id, const std::string& what, const char* action);
  // Rule M6's removal of learner `m`, its record (LearnerRemovalKey) written first.
  void RemoveLearner(EtcdClient& client, const ClusterMember& m);
  void Count(const std::string& action, bool ok);

  MaintenanceSettings settings_;
  Clock& clock_;
  int64_t compacted_ = 0;
  std::optional<Clock::TimePoint> last_defrag_;
  std::set<MemberId> defragmented_under_alarm_;
  LearnerWatch learners_;
  ScaleTargetSource scale_target_source_;
  std::optional<size_t> scale_target_;
  std::optional<Clock::TimePoint> scale_target_read_;
  std::string last_said_;
  mutable std::mutex mu_;
  std::map<std::string, long long> done_;
  std::map<std::string, long long> failed_;
  int nospace_ = 0;
  int corrupt_ = 0;
};

// Rule M7's source under `run` and `upkeep`: with --discovery provider=k8s and no --cluster-size, the
// provider's StatefulSet spec.replicas (read with each discovery, within kScaleTargetTimeout); null
// for any other discovery, which fixes no size that can shrink.
Maintainer::ScaleTargetSource ScaleTargetFromDiscovery(const Config& config);

}  // namespace quorate
