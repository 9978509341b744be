#include "node/maintenance.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/bucket.h"
#include "core/json.h"
#include "discovery/discovery.h"
#include "quorate/log.h"
#include "quorate/text.h"
#include "status/status_server.h"

namespace quorate {
namespace {

// A defragmentation rewrites the whole database file; etcd's own client gives it no timeout either.
constexpr auto kDefragTimeout = std::chrono::minutes(10);

const char* kActions[] = {"compact", "defragment", "disarm", "remove-learner", "remove-member"};

// Rule M7 reads the StatefulSet at most this often while nothing is to be removed.
constexpr auto kScaleTargetMaxAge = std::chrono::seconds(10);
// One read of it (the pods' list, the StatefulSet): a maintenance round is not held up longer.
constexpr auto kScaleTargetTimeout = std::chrono::seconds(10);

}  // namespace

MaintenanceSettings MaintenanceSettingsOf(const Config& c) {
  MaintenanceSettings s;
  s.enabled = c.maintenance;
  s.defrag_min_bytes = c.defrag_min_bytes;
  s.defrag_min_percent = c.defrag_min_percent;
  if (c.quota_backend_bytes > 0) s.quota_bytes = c.quota_backend_bytes;
  s.keep_revisions = c.compaction_keep_revisions;
  s.pause = c.maintenance_pause;
  s.learner_deadline = c.learner_deadline;
  s.scale_in = c.scale_in;
  return s;
}

Maintainer::ScaleTargetSource ScaleTargetFromDiscovery(const Config& config) {
  if (config.cluster_size) return nullptr;
  auto spec = ParseDiscoverySpec(config.discovery);
  if (!spec.ok() || spec->provider != "k8s") return nullptr;
  return [&config]() -> Result<std::optional<size_t>> {
    auto provider = ProviderFromConfig(config, std::chrono::steady_clock::now() + kScaleTargetTimeout);
    if (!provider.ok()) return provider.status();
    if (auto members = (*provider)->Discover(); !members.ok()) return members.status();
    return (*provider)->ImpliedSize();
  };
}

Maintainer::Maintainer(MaintenanceSettings settings, Clock& clock) : settings_(settings), clock_(clock) {}

Result<MaintenanceLook> Maintainer::Look(EtcdClient& client, MemberId self) {
  MaintenanceLook look;
  MaintenanceFacts& f = look.facts;
  f.self = self;
  f.compacted = compacted_;
  if (last_defrag_) {
    f.since_last_defrag = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - *last_defrag_);
  }
  auto listing = client.MemberList();
  if (!listing.ok()) return listing.status();
  bool alarms_seen = false;
  for (const ClusterMember& m : listing->members) {
    MemberUpkeepFacts mf;
    mf.id = m.id;
    mf.name = m.name;
    mf.is_learner = m.is_learner;
    if (!m.client_urls.empty()) mf.client_url = m.client_urls.front();
    f.members.push_back(mf);
  }
  // Our own status first: a member that does not lead asks no one else.
  auto own = std::find_if(f.members.begin(), f.members.end(), [&](const auto& m) { return m.id == self; });
  if (own == f.members.end() || own->client_url.empty()) {
    return Status::Unavailable(fmt::format("member {} is not listed as started", IdToHex(self)));
  }
  std::iter_swap(own, f.members.begin());
  for (MemberUpkeepFacts& m : f.members) {
    if (m.client_url.empty()) continue;
    auto st = client.EndpointStatusOf(m.client_url);
    // quorate is stopping: the member did answer for all that is known, so no look is had.
    if (st.status().IsCancelled()) return st.status();
    if (!st.ok()) continue;
    // Another member may answer at a listed member's client URL: the node that replaced it (rule 4
    // keeps the URLs under a new ID) while this look began on a list from before. Its answer is not
    // the listed member's, which is gone; counted as that member's, it made a margin the voters do
    // not have (simulator seed 1135 of 3 nodes: the leader defragmented with one voter of two left).
    if (st->member_id != m.id) {
      spdlog::debug("maintenance: {} answers as member {}, not as {}", m.client_url, IdToHex(st->member_id),
                    IdToHex(m.id));
      continue;
    }
    m.answered = true;
    m.raft_applied_index = st->raft_applied_index;
    m.db_size = st->db_size;
    m.db_size_in_use = st->db_size_in_use;
    alarms_seen = alarms_seen || !st->errors.empty();
    if (m.id == self) {
      f.leader = st->leader;
      f.revision = st->revision;
      f.leader_raft_index = st->raft_index;
      if (f.leader != self) break;
    }
  }
  bool nospace = false;
  if (alarms_seen && f.leader == self) {
    auto alarms = client.AlarmList();
    if (!alarms.ok()) return alarms.status();
    for (const EtcdAlarm& a : *alarms) {
      bool listed = false;
      for (MemberUpkeepFacts& m : f.members) {
        if (m.id != a.member_id) continue;
        listed = true;
        (a.kind == AlarmKind::kNoSpace ? m.nospace : m.corrupt) = true;
      }
      if (!listed && a.kind == AlarmKind::kNoSpace) f.nospace_of_removed.push_back(a.member_id);
      nospace = nospace || a.kind == AlarmKind::kNoSpace;
    }
  }
  if (!nospace) defragmented_under_alarm_.clear();
  for (MemberUpkeepFacts& m : f.members) m.defragmented_under_alarm = defragmented_under_alarm_.count(m.id) > 0;
  if (f.leader == self) {
    learners_.Observe(f, clock_.Now());
    if (settings_.scale_in && scale_target_source_) {
      RefreshScaleTarget(f.members.size(), /*force=*/false);
      f.scale_target = scale_target_;
    }
  } else {
    learners_.Forget();
  }
  look.decision = PlanMaintenance(f, settings_);
  return look;
}

void Maintainer::RefreshScaleTarget(size_t members, bool force) {
  const Clock::TimePoint now = clock_.Now();
  const bool stale = !scale_target_read_ || now - *scale_target_read_ >= kScaleTargetMaxAge;
  if (!force && !stale && !(scale_target_ && members > *scale_target_)) return;
  auto target = scale_target_source_();
  if (!target.ok()) {
    // Unknown is not "scaled in": rule M7 waits for an answer, and says why at debug level only,
    // as discovery's own errors are said where the operator asked for them.
    spdlog::debug("maintenance: the StatefulSet's replicas are not known now: {}", target.status().message());
    scale_target_.reset();
    return;
  }
  scale_target_ = *target;
  scale_target_read_ = now;
}

void Maintainer::Round(EtcdClient& client, MemberId self) {
  auto look = Look(client, self);
  if (!look.ok()) {
    spdlog::debug("maintenance: no round: {}", look.status().message());
    return;
  }
  {
    std::lock_guard lock(mu_);
    nospace_ = corrupt_ = 0;
    for (const auto& m : look->facts.members) {
      nospace_ += m.nospace;
      corrupt_ += m.corrupt;
    }
  }
  const MaintenanceDecision& d = look->decision;
  std::string said = fmt::format("maintenance: {} (rule {}): {}", MaintenanceActionName(d.action), d.rule, d.reason);
  if (d.action != MaintenanceAction::kNone || said != last_said_) {
    if (d.action == MaintenanceAction::kWait && said == last_said_) {
      spdlog::debug("{}", said);
    } else if (d.rule == "M2") {
      spdlog::error("{}", said);
    } else {
      spdlog::info("{}", said);
    }
  }
  last_said_ = said;
  Carry(client, *look);
}

void Maintainer::Carry(EtcdClient& client, const MaintenanceLook& look) {
  const MaintenanceDecision& d = look.decision;
  switch (d.action) {
    case MaintenanceAction::kNone:
    case MaintenanceAction::kWait:
      return;
    case MaintenanceAction::kCompact: {
      Status s = client.Compact(d.revision);
      if (s.ok() || s.reason() == Reason::kCompacted) {
        compacted_ = d.revision;
        spdlog::info("maintenance: compacted up to revision {}{}", d.revision, s.ok() ? "" : " (it was already)");
        Count("compact", true);
      } else {
        spdlog::warn("maintenance: compaction up to revision {} failed: {}", d.revision, s.message());
        Count("compact", false);
      }
      return;
    }
    case MaintenanceAction::kDefragment: {
      const auto& members = look.facts.members;
      auto m = std::find_if(members.begin(), members.end(), [&](const auto& x) { return x.id == d.member; });
      const Clock::TimePoint began = clock_.Now();
      Status s = client.Defragment(m->client_url, kDefragTimeout);
      last_defrag_ = clock_.Now();
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(*last_defrag_ - began).count();
      if (!s.ok()) {
        spdlog::warn("maintenance: defragmentation of {} failed after {} ms: {}", m->name, took, s.message());
        Count("defragment", false);
        return;
      }
      auto after = client.EndpointStatusOf(m->client_url);
      if (after.ok()) {
        spdlog::info("maintenance: {} defragmented in {} ms: {} to {} bytes; it answers again", m->name, took,
                     m->db_size, after->db_size);
      } else {
        spdlog::warn("maintenance: {} defragmented in {} ms, but does not answer yet: {}; nothing more until it does",
                     m->name, took, after.status().message());
      }
      if (d.rule == "M3") defragmented_under_alarm_.insert(m->id);
      Count("defragment", true);
      return;
    }
    case MaintenanceAction::kRemoveLearner: {
      // The list once more, just before: a learner promoted since the look is a voter now, and a
      // voter is never removed by this rule.
      auto listing = client.MemberList();
      if (!listing.ok()) {
        Count("remove-learner", false);
        return;
      }
      auto m = std::find_if(listing->members.begin(), listing->members.end(),
                            [&](const ClusterMember& x) { return x.id == d.member; });
      if (m == listing->members.end() || !m->is_learner) {
        spdlog::info("maintenance: {} is no longer a learner of the cluster; nothing removed", IdToHex(d.member));
        return;
      }
      RemoveLearner(client, *m);
      return;
    }
    case MaintenanceAction::kRemoveMember: {
      // The StatefulSet and the cluster once more, just before: a scale-up back since the look, or a
      // member that changed, calls the removal off.
      RefreshScaleTarget(look.facts.members.size(), /*force=*/true);
      MaintenanceFacts now = look.facts;
      now.scale_target = scale_target_;
      MaintenanceDecision again = PlanMaintenance(now, settings_);
      if (again.action != MaintenanceAction::kRemoveMember || again.member != d.member) {
        spdlog::info("maintenance: the removal of {} is called off: {} (rule {}): {}", IdToHex(d.member),
                     MaintenanceActionName(again.action), again.rule, again.reason);
        return;
      }
      Remove(client, d.member, fmt::format("member {} of the StatefulSet scaled in", IdToHex(d.member)),
             "remove-member");
      return;
    }
    case MaintenanceAction::kDisarm: {
      auto alarms = client.AlarmList();
      if (!alarms.ok()) {
        Count("disarm", false);
        return;
      }
      // The alarm's episode ends here: one raised again later needs every member defragmented
      // again, even when no round between the two saw the cluster without it (simulator seed 3220 of
      // 3 nodes: the looks failed, and the leader went first in the next episode).
      defragmented_under_alarm_.clear();
      for (const EtcdAlarm& a : *alarms) {
        if (a.kind != AlarmKind::kNoSpace) continue;
        Status s = client.AlarmDisarm(a);
        if (s.ok()) {
          spdlog::info("maintenance: NOSPACE alarm of {} disarmed: etcd takes writes again", IdToHex(a.member_id));
        } else {
          spdlog::warn("maintenance: disarming the NOSPACE alarm of {} failed: {}", IdToHex(a.member_id), s.message());
        }
        Count("disarm", s.ok());
      }
      return;
    }
  }
}

// M6's record goes first: without it, the learner's node could not tell this removal from the
// operator's, and would hold its etcd stopped for good (rule 1b). A removal etcd refused is marked
// abandoned, so a later removal of that member by the operator is not taken for M6's; one whose
// outcome is unknown keeps its record, as it may have gone through, and so does one that finds the
// member gone (another leader's M6 removed it a moment before, under the same record).
void Maintainer::RemoveLearner(EtcdClient& client, const ClusterMember& m) {
  const std::string what =
      fmt::format("learner {} ({})", m.name.empty() ? "unstarted" : Printable(m.name, 64), IdToHex(m.id));
  const std::string key = LearnerRemovalKey(m.id);
  auto record = [&](const char* state) {
    return client.Put(key, JsonText(nlohmann::json{{"member", IdToHex(m.id)}, {"name", m.name}, {"rule", "M6"},
                                                   {"state", state}, {"at", NowRfc3339()}}));
  };
  if (Status s = record(kLearnerRemoving); !s.ok()) {
    spdlog::warn("maintenance: not removing {}: its record at {} could not be written: {}", what, key, s.message());
    Count("remove-learner", false);
    return;
  }
  Status s = client.MemberRemove(m.id);
  if (s.ok()) {
    spdlog::info("maintenance: {} removed; its record is at {}", what, key);
  } else {
    spdlog::warn("maintenance: removing {} failed: {}", what, s.message());
    if (s.reason() != Reason::kOutcomeUnknown && !s.IsNotFound()) {
      if (Status undone = record(kLearnerRemovalAbandoned); !undone.ok()) {
        spdlog::warn("maintenance: the record at {} still says removing: {}", key, undone.message());
      }
    }
  }
  Count("remove-learner", s.ok());
}

void Maintainer::Remove(EtcdClient& client, MemberId id, const std::string& what, const char* action) {
  Status s = client.MemberRemove(id);
  if (s.ok()) {
    spdlog::info("maintenance: {} removed", what);
  } else {
    spdlog::warn("maintenance: removing {} failed: {}", what, s.message());
  }
  Count(action, s.ok());
}

void Maintainer::Count(const std::string& action, bool ok) {
  std::lock_guard lock(mu_);
  ++(ok ? done_ : failed_)[action];
}

std::string Maintainer::RenderMetrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  AppendFamily(out, "quorate_maintenance_actions_total", "counter",
               "Maintenance actions this node's quorate carried out as the leader's (docs/DESIGN.md §12), by action.");
  for (const char* a : kActions) {
    auto it = done_.find(a);
    out +=
        fmt::format("quorate_maintenance_actions_total{{action=\"{}\"}} {}\n", a, it == done_.end() ? 0 : it->second);
  }
  AppendFamily(out, "quorate_maintenance_failures_total", "counter", "Maintenance actions that failed, by action.");
  for (const char* a : kActions) {
    auto it = failed_.find(a);
    out += fmt::format("quorate_maintenance_failures_total{{action=\"{}\"}} {}\n", a,
                       it == failed_.end() ? 0 : it->second);
  }
  AppendFamily(
      out, "quorate_etcd_alarms", "gauge",
      "Alarms raised in the cluster as the leader's quorate last saw them, by kind (NOSPACE is cleared by rule "
      "M3; CORRUPT needs an operator).");
  out += fmt::format("quorate_etcd_alarms{{alarm=\"NOSPACE\"}} {}\nquorate_etcd_alarms{{alarm=\"CORRUPT\"}} {}\n",
                     nospace_, corrupt_);
  return out;
}

}  // namespace quorate
