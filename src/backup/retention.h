// Which backups to keep, etcd-manager's policy made explicit: every backup of the last hour; the
// newest of each hour for `hourly` (7 days by default); the newest of each UTC day for `daily`
// (90 days); none older; and the latest always, whatever its age. Pure, so tests drive it through
// months of fake time.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace quorate {

struct RetentionPolicy {
  std::chrono::hours hourly{24 * 7};
  std::chrono::hours daily{24 * 90};
};

// Indexes into `created` (the backups' times, any order) of the backups to remove at `now`.
std::vector<size_t> BackupsToRemove(const std::vector<std::chrono::system_clock::time_point>& created,
                                    std::chrono::system_clock::time_point now, const RetentionPolicy& policy);

}  // namespace quorate
