#include "core/maintenance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace quorate {
namespace {

constexpr int64_t kMiB = 1 << 20;
// On NOSPACE every member with this much free space is defragmented: after the compaction the space
// is there to take back, whatever the routine thresholds say.
constexpr int64_t kNospaceFreeBytes = kMiB;

int64_t DisarmLimit(const MaintenanceSettings& s) { return s.quota_bytes / 100 * kDisarmBelowPercent; }

MaintenanceDecision Decide(MaintenanceAction action, const char* rule, std::string reason) {
  MaintenanceDecision d;
  d.action = action;
  d.rule = rule;
  d.reason = std::move(reason);
  return d;
}

std::string Who(const MemberUpkeepFacts& m) { return m.name.empty() ? IdToHex(m.id) : m.name; }

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

int64_t FreeBytes(const MemberUpkeepFacts& m) { return std::max<int64_t>(0, m.db_size - m.db_size_in_use); }

// Why no member may be defragmented now (empty: one may). A member serves nothing while it is
// defragmented, so every voter must answer and the others must still be a quorum without it; under
// NOSPACE (`under_alarm`) one or two voters are defragmented all the same: they can never spare one,
// the cluster takes no write until the space is back, and no other way brings it back.
std::string DefragBlocked(const MaintenanceFacts& f, const MaintenanceSettings& s, bool learners_block,
                          bool under_alarm) {
  int voters = 0;
  int answering = 0;
  std::vector<std::string> silent;
  for (const auto& m : f.members) {
    if (!m.answered) silent.push_back(Who(m));
    if (m.is_learner) {
      if (learners_block) return fmt::format("{} is a learner still catching up", Who(m));
      continue;
    }
    ++voters;
    if (m.answered) ++answering;
  }
  if (!silent.empty()) return fmt::format("{} do not answer", fmt::join(silent, ", "));
  if (answering - 1 < voters / 2 + 1 && !(under_alarm && voters <= 2)) {
    return fmt::format("{} voters leave no margin: without the one defragmented the others are no quorum", voters);
  }
  if (f.since_last_defrag < s.pause) {
    return fmt::format("the last defragmentation was {} ms ago, the pause is {} ms", f.since_last_defrag.count(),
                       s.pause.count());
  }
  return "";
}

// Followers first, in ID order, the leader last: a defragmented leader holds every write up.
std::vector<const MemberUpkeepFacts*> DefragOrder(const MaintenanceFacts& f) {
  std::vector<const MemberUpkeepFacts*> order;
  for (const auto& m : f.members) order.push_back(&m);
  std::stable_sort(order.begin(), order.end(), [&](const MemberUpkeepFacts* a, const MemberUpkeepFacts* b) {
    if ((a->id == f.leader) != (b->id == f.leader)) return b->id == f.leader;
    return a->id < b->id;
  });
  return order;
}

MaintenanceDecision Defragment(const MemberUpkeepFacts& m, const char* rule, std::string why) {
  MaintenanceDecision d = Decide(MaintenanceAction::kDefragment, rule, std::move(why));
  d.member = m.id;
  return d;
}

MaintenanceDecision Compact(int64_t revision, const char* rule, std::string why) {
  MaintenanceDecision d = Decide(MaintenanceAction::kCompact, rule, std::move(why));
  d.revision = revision;
  return d;
}

// A StatefulSet pod's ordinal: the number after the last '-' of its name (etcd-4: 4); none for a
// name of another shape.
std::optional<size_t> Ordinal(const std::string& name, std::string* set) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == name.size() || name.size() - dash > 6) return std::nullopt;
  size_t n = 0;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(name[i] - '0');
  }
  *set = name.substr(0, dash);
  return n;
}

// Rule M7: the members of the ordinals the StatefulSet was scaled away from, highest first, each
// only while the voters left after it still answer as a majority of themselves. Going is by
// ordinal, not by count: a member an operator removed leaves fewer members than replicas, and the
// ordinals past them go all the same. Nothing when the member names are not one StatefulSet's
// (<set>-<ordinal>), or a member has not started (no name yet: a pod joining), or the StatefulSet
// is scaled to 0 (paused: its members must come back).
std::optional<MaintenanceDecision> PlanScaleIn(const MaintenanceFacts& f) {
  const size_t target = *f.scale_target;
  if (target == 0) return std::nullopt;
  std::string set;
  const MemberUpkeepFacts* going = nullptr;
  size_t going_ordinal = 0;
  for (const auto& m : f.members) {
    std::string its_set;
    auto ordinal = Ordinal(m.name, &its_set);
    if (!ordinal || (!set.empty() && its_set != set)) return std::nullopt;
    set = its_set;
    if (*ordinal >= target && (going == nullptr || *ordinal > going_ordinal)) {
      going = &m;
      going_ordinal = *ordinal;
    }
  }
  if (going == nullptr) return std::nullopt;
  const std::string why = fmt::format("StatefulSet {} has {} replicas and the cluster {} members: {} is going", set,
                                      target, f.members.size(), Who(*going));
  if (going->id == f.self) {
    return Decide(MaintenanceAction::kWait, "M7",
                  why + "; it is this leader's own member: another leader removes it once its pod goes");
  }
  int left = 0;
  int answering = 0;
  for (const auto& m : f.members) {
    if (m.is_learner || m.id == going->id) continue;
    ++left;
    answering += m.answered;
  }
  if (answering < left / 2 + 1) {
    return Decide(MaintenanceAction::kWait, "M7",
                  fmt::format("{}; not now: of the {} voters left after it only {} answer, no majority", why, left,
                              answering));
  }
  MaintenanceDecision d = Decide(
      MaintenanceAction::kRemoveMember, "M7",
      fmt::format("{}; removed (highest ordinal first), {} of the {} voters left answering", why, answering, left));
  d.member = going->id;
  return d;
}

MaintenanceDecision PlanNospace(const MaintenanceFacts& f, const MaintenanceSettings& s,
                                const std::vector<std::string>& raised_by) {
  const std::string alarm = fmt::format("NOSPACE raised by {}", fmt::join(raised_by, ", "));
  if (int64_t target = f.revision - s.keep_revisions; target > f.compacted && target > 0) {
    return Compact(target, "M3",
                   fmt::format("{}: compact the history up to revision {} (keeping {} revisions)", alarm, target,
                               s.keep_revisions));
  }
  // Each member once under the alarm, when its file is over the disarm limit or has free pages: the
  // pages the compaction freed count as in use until etcd's next commit, which the alarm's refusal
  // of every write holds off, and a defragmentation copies only live data whatever the free list says.
  std::string blocked = DefragBlocked(f, s, /*learners_block=*/false, /*under_alarm=*/true);
  for (const MemberUpkeepFacts* m : DefragOrder(f)) {
    if (!m->answered || m->defragmented_under_alarm) continue;
    if (m->db_size <= DisarmLimit(s) && FreeBytes(*m) < kNospaceFreeBytes) continue;
    if (!blocked.empty()) {
      return Decide(
          MaintenanceAction::kWait, "M3",
          fmt::format("{}: {} has {} free to take back, but not now: {}", alarm, Who(*m), Mb(FreeBytes(*m)), blocked));
    }
    return Defragment(*m, "M3",
                      fmt::format("{}: defragment {} ({} file, {} free by its last count){}", alarm, Who(*m),
                                  Mb(m->db_size), Mb(FreeBytes(*m)), m->id == f.leader ? ", the leader, last" : ""));
  }
  const int64_t limit = DisarmLimit(s);
  for (const auto& m : f.members) {
    if (!m.answered) {
      return Decide(MaintenanceAction::kWait, "M3",
                    fmt::format("{}: {} does not answer, so its database size is not known", alarm, Who(m)));
    }
    if (m.db_size > limit) {
      return Decide(MaintenanceAction::kWait, "M3",
                    fmt::format("{}: the alarm stays, its cause is still there: the database of {} is {} ({} in "
                                "use) against a quota of {}; delete keys, or raise --quota-backend-bytes",
                                alarm, Who(m), Mb(m.db_size), Mb(m.db_size_in_use), Mb(s.quota_bytes)));
    }
  }
  return Decide(MaintenanceAction::kDisarm, "M3",
                fmt::format("{}: every database is at most {}% of the {} quota again: disarm", alarm,
                            kDisarmBelowPercent, Mb(s.quota_bytes)));
}

}  // namespace

const char* MaintenanceActionName(MaintenanceAction action) {
  switch (action) {
    case MaintenanceAction::kNone:
      return "none";
    case MaintenanceAction::kWait:
      return "wait";
    case MaintenanceAction::kCompact:
      return "compact";
    case MaintenanceAction::kDefragment:
      return "defragment";
    case MaintenanceAction::kDisarm:
      return "disarm";
    case MaintenanceAction::kRemoveLearner:
      return "remove-learner";
    case MaintenanceAction::kRemoveMember:
      return "remove-member";
  }
  return "none";
}

std::string LearnerRemovalKey(MemberId id) { return "/quorate/maintenance/removed-learners/" + IdToHex(id); }

MaintenanceDecision PlanMaintenance(const MaintenanceFacts& f, const MaintenanceSettings& s) {
  if (!s.enabled) return Decide(MaintenanceAction::kNone, "M0", "maintenance is off (--maintenance=false)");
  if (f.self == 0 || f.self != f.leader) {
    return Decide(MaintenanceAction::kNone, "M1", "only the leader's quorate maintains the cluster");
  }
  std::vector<std::string> corrupt;
  std::vector<std::string> nospace;
  for (const auto& m : f.members) {
    if (m.corrupt) corrupt.push_back(Who(m));
    if (m.nospace) nospace.push_back(Who(m));
  }
  for (MemberId id : f.nospace_of_removed) nospace.push_back(fmt::format("removed member {}", IdToHex(id)));
  if (!corrupt.empty()) {
    return Decide(MaintenanceAction::kWait, "M2",
                  fmt::format("CORRUPT raised by {}: reported, never disarmed, and nothing is maintained while it "
                              "stands; compare the members' hashes (etcdctl endpoint hashkv --cluster) and replace "
                              "the one that differs",
                              fmt::join(corrupt, ", ")));
  }
  if (s.learner_deadline.count() > 0) {
    for (const auto& m : f.members) {
      if (!m.is_learner || m.stalled_for < s.learner_deadline) continue;
      MaintenanceDecision d = Decide(
          MaintenanceAction::kRemoveLearner, "M6",
          fmt::format("learner {} has neither caught up nor made progress for {} s (--learner-deadline {} s): {}; "
                      "removed, so that etcd's learner seat frees (a learner holds no vote: quorum is untouched)",
                      Who(m), m.stalled_for.count() / 1000, s.learner_deadline.count() / 1000,
                      m.answered ? fmt::format("its applied index stays at {}, the leader's is at {}",
                                               m.raft_applied_index, f.leader_raft_index)
                                 : std::string("it does not answer")));
      d.member = m.id;
      return d;
    }
  }
  if (s.scale_in && f.scale_target) {
    if (auto d = PlanScaleIn(f)) return *d;
  }
  if (!nospace.empty()) return PlanNospace(f, s, nospace);
  if (s.keep_revisions > 0 && f.revision - s.keep_revisions > f.compacted + s.keep_revisions) {
    const int64_t target = f.revision - s.keep_revisions;
    return Compact(target, "M4",
                   fmt::format("the history holds more than twice the {} revisions kept: compact up to revision {}",
                               s.keep_revisions, target));
  }
  for (const MemberUpkeepFacts* m : DefragOrder(f)) {
    if (!m->answered || m->db_size < s.defrag_min_bytes) continue;
    if (FreeBytes(*m) * 100 < static_cast<int64_t>(s.defrag_min_percent) * m->db_size) continue;
    std::string why = fmt::format("the database of {} is {} with {} ({}%) free pages, past the {} and {}% thresholds",
                                  Who(*m), Mb(m->db_size), Mb(FreeBytes(*m)), FreeBytes(*m) * 100 / m->db_size,
                                  Mb(s.defrag_min_bytes), s.defrag_min_percent);
    if (std::string blocked = DefragBlocked(f, s, /*learners_block=*/true, /*under_alarm=*/false); !blocked.empty()) {
      return Decide(MaintenanceAction::kWait, "M5", fmt::format("{}; not now: {}", why, blocked));
    }
    return Defragment(*m, "M5", m->id == f.leader ? why + "; the leader, last" : why);
  }
  return Decide(MaintenanceAction::kNone, "M5", "nothing to do: no alarm, and no database past the thresholds");
}

void LearnerWatch::Observe(MaintenanceFacts& f, TimePoint now) {
  std::map<MemberId, Seen> still;
  for (MemberUpkeepFacts& m : f.members) {
    if (!m.is_learner) continue;
    auto it = seen_.find(m.id);
    Seen seen = it == seen_.end() ? Seen{m.raft_applied_index, now} : it->second;
    const bool caught_up = m.answered && f.leader_raft_index > 0 && m.raft_applied_index >= f.leader_raft_index;
    if (m.answered && (caught_up || m.raft_applied_index > seen.applied)) seen = {m.raft_applied_index, now};
    m.stalled_for = std::chrono::duration_cast<std::chrono::milliseconds>(now - seen.progress);
    still[m.id] = seen;
  }
  seen_ = std::move(still);  // members gone, or promoted, are forgotten
}

}  // namespace quorate
