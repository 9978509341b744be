#include "backup/retention.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace quorate {

std::vector<size_t> BackupsToRemove(const std::vector<std::chrono::system_clock::time_point>& created,
                                    std::chrono::system_clock::time_point now, const RetentionPolicy& policy) {
  using std::chrono::floor;
  using Hours = std::chrono::hours;
  using Days = std::chrono::days;
  std::vector<size_t> order(created.size());
  std::iota(order.begin(), order.end(), 0);
  // Newest first, so the first seen in an hour or a day is the one kept there.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return created[a] > created[b]; });
  std::set<Hours::rep> hours_kept;
  std::set<Days::rep> days_kept;
  std::vector<size_t> remove;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto t = created[order[i]];
    const auto age = now - t;
    bool keep = i == 0 || age < Hours(1);
    if (!keep && age < policy.hourly) keep = hours_kept.insert(floor<Hours>(t.time_since_epoch()).count()).second;
    if (!keep && age < policy.daily) keep = days_kept.insert(floor<Days>(t.time_since_epoch()).count()).second;
    // A backup kept for its hour also counts for its day, so a day's newest is never dropped later.
    if (keep) {
      hours_kept.insert(floor<Hours>(t.time_since_epoch()).count());
      days_kept.insert(floor<Days>(t.time_since_epoch()).count());
    } else {
      remove.push_back(order[i]);
    }
  }
  std::sort(remove.begin(), remove.end());
  return remove;
}

}  // namespace quorate
