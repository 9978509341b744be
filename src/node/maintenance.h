// The leader's maintenance of etcd's database (docs/DESIGN.md §12), run from upkeep: gathers the facts
// (every member's Maintenance.Status, the alarms), asks the pure planner (core/maintenance), logs the
// decision once, and carries it out: a compaction, one member's defragmentation followed by a health
// check, or a NOSPACE alarm lowered. One actor at a time: only the quorate whose etcd leads acts, and
// the next leader's quorate takes over from the facts alone (nothing is kept that a restart loses
// and needs: a compaction already made answers "compacted" and counts as done).
#pragma once

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

 private:
  void Carry(EtcdClient& client, const MaintenanceLook& look);
  void Count(const std::string& action, bool ok);

  MaintenanceSettings settings_;
  Clock& clock_;
  int64_t compacted_ = 0;
  std::optional<Clock::TimePoint> last_defrag_;
  std::set<MemberId> defragmented_under_alarm_;
  LearnerWatch learners_;
  std::string last_said_;
  mutable std::mutex mu_;
  std::map<std::string, long long> done_;
  std::map<std::string, long long> failed_;
  int nospace_ = 0;
  int corrupt_ = 0;
};

}  // namespace quorate
