#include "node/member_remove.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "etcd/etcd_errors.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;

std::string Label(const ClusterMember& m) {
  return m.name.empty() ? IdToHex(m.id) + " (unstarted)" : fmt::format("{} ({})", m.name, IdToHex(m.id));
}

std::string Names(const std::vector<const ClusterMember*>& members) {
  std::vector<std::string> out;
  for (const auto* m : members) out.push_back(m->name.empty() ? IdToHex(m->id) : m->name);
  return out.empty() ? "none" : fmt::format("{}", fmt::join(out, ", "));
}

const ClusterMember* FindId(const MemberListing& listing, MemberId id) {
  for (const auto& m : listing.members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}


// Maintenance.Status on each client URL of every voter but `except`, until one answers as that voter.
VoterHealth ProbeVoters(EtcdClient& probe, const MemberListing& listing, MemberId except) {
  VoterHealth health;
  for (const auto& m : listing.members) {
    if (m.is_learner || m.id == except) continue;
    if (!m.started()) {
      health[m.id] = Status::Unavailable("not started");
      continue;
    }
    Status why = Status::Unavailable("no client URL answered");
    for (const auto& url : m.client_urls) {
      auto st = probe.EndpointStatusOf(url);
      if (!st.ok()) {
        why = Status::Unavailable(fmt::format("not answering at {}", url));
      } else if (st->member_id != m.id) {
        why = Status::Unavailable(fmt::format("{} answers as member {}", url, IdToHex(st->member_id)));
      } else if (st->leader == 0) {
        why = Status::Unavailable("no leader");
      } else {
        why = Status::Ok();
        break;
      }
    }
    health[m.id] = why;
  }
  return health;
}

// One MemberRemove, retried while etcd refuses it as "unhealthy cluster" (for up to `retry_for`).
// Which of removed or already removed it was; otherwise why it was not.
Result<RemovalReport::Outcome> RemoveOne(Clock& clock, EtcdClient& client, const ClusterMember& m, milliseconds retry_for) {
  // etcd allows the removal once the member asked has been connected to enough voters for 5 s: a
  // fixed interval finds that moment (kUnhealthyClusterRetry), a doubling backoff may miss it by seconds.
  Backoff backoff(clock, kUnhealthyClusterRetry, kUnhealthyClusterRetry, clock.Now() + retry_for);
  while (true) {
    Status s = client.MemberRemove(m.id);
    if (s.ok()) return RemovalReport::Outcome::kRemoved;
    if (s.IsNotFound()) return RemovalReport::Outcome::kAlreadyRemoved;
    switch (s.reason()) {
      case Reason::kNotEnoughStarted:
        return Status::FailedPrecondition(fmt::format(
            "etcd refused to remove {}: the voters left would not have a majority of started members (etcd's "
            "strict reconfiguration check); start the stopped members first ({})",
            Label(m), s.message()));
      case Reason::kOutcomeUnknown: {
        // Whether it happened is for the membership to say, not the lost answer.
        auto after = client.MemberList();
        if (after.ok() && FindId(*after, m.id) == nullptr) return RemovalReport::Outcome::kRemoved;
        return s;
      }
      case Reason::kUnhealthyCluster:
        break;
      default:
        return s;
    }
    if (backoff.Wait() != Backoff::kRetry) {
      return Status::FailedPrecondition(fmt::format(
          "etcd refused to remove {} for {} s: its leader has not been connected to enough voters for 5 s, so the "
          "removal could break the active quorum; check that every voter runs, then try again ({})",
          Label(m), std::chrono::duration_cast<std::chrono::seconds>(retry_for).count(), s.message()));
    }
  }
}

}  // namespace

Result<std::vector<RemovalTarget>> ResolveRemoval(const MemberListing& listing, const std::vector<std::string>& args,
                                                  bool ignore_not_found) {
  if (args.empty()) {
    return Status::InvalidArgument(
        "member remove: give at least one MEMBER, a name or hex ID as `quorate member list` shows it");
  }
  std::vector<RemovalTarget> out;
  std::map<MemberId, std::string> chosen;  // member → the argument that named it
  for (const auto& arg : args) {
    std::vector<const ClusterMember*> named;
    for (const auto& m : listing.members) {
      if (!arg.empty() && m.name == arg) named.push_back(&m);
    }
    if (named.size() > 1) {
      return Status::InvalidArgument(fmt::format("member remove: MEMBER '{}' names {} members ({}); give the hex ID",
                                                 arg, named.size(), Names(named)));
    }
    const ClusterMember* found = named.empty() ? nullptr : named.front();
    if (found == nullptr) {
      if (auto id = IdFromHex(arg); id.ok()) found = FindId(listing, *id);
    }
    if (found == nullptr) {
      if (ignore_not_found) {
        out.push_back({arg, std::nullopt});
        continue;
      }
      std::vector<const ClusterMember*> all;
      for (const auto& m : listing.members) all.push_back(&m);
      return Status::InvalidArgument(fmt::format(
          "member remove: MEMBER '{}' is neither the name nor the hex ID of a member of cluster {} ({}); see "
          "`quorate member list`, or add --ignore-not-found if it may have been removed already",
          arg, IdToHex(listing.cluster_id), Names(all)));
    }
    if (auto [it, fresh] = chosen.emplace(found->id, arg); !fresh) {
      return Status::InvalidArgument(fmt::format("member remove: member {} is given twice (as '{}' and '{}')",
                                                 Label(*found), it->second, arg));
    }
    out.push_back({arg, *found});
  }
  return out;
}

Status CheckRemovalKeepsQuorum(const MemberListing& listing, MemberId target, const VoterHealth& health) {
  const ClusterMember* removed = FindId(listing, target);
  if (removed == nullptr || removed->is_learner) return Status::Ok();
  std::vector<const ClusterMember*> healthy, down;
  std::vector<std::string> why;
  for (const auto& m : listing.members) {
    if (m.is_learner || m.id == target) continue;
    auto it = health.find(m.id);
    if (it != health.end() && it->second.ok()) {
      healthy.push_back(&m);
    } else {
      down.push_back(&m);
      why.push_back(fmt::format("{}: {}", Label(m), it == health.end() ? "not asked" : it->second.message()));
    }
  }
  size_t remaining = healthy.size() + down.size();
  if (remaining == 0) {
    return Status::FailedPrecondition(
        fmt::format("refusing to remove {}: it is the last voter of cluster {}, and the cluster would be gone; "
                    "stop etcd instead if that is what you want",
                    Label(*removed), IdToHex(listing.cluster_id)));
  }
  size_t majority = remaining / 2 + 1;
  if (healthy.size() >= majority) return Status::Ok();
  return Status::FailedPrecondition(fmt::format(
      "refusing to remove {}: of the {} voter(s) left, {} would be started and healthy ({}), fewer than the "
      "majority of {}, so cluster {} would lose quorum ({}); bring those members back first, or remove "
      "members that are down before ones that run",
      Label(*removed), remaining, healthy.size(), Names(healthy), majority, IdToHex(listing.cluster_id),
      fmt::join(why, "; ")));
}

Status RemoveMembers(Clock& clock, EtcdClient& client, EtcdClient& probe, const std::vector<std::string>& args,
                     const RemoveOptions& options, RemovalReport& report) {
  auto listing = client.MemberList();
  if (!listing.ok()) return listing.status();
  auto targets = ResolveRemoval(*listing, args, options.ignore_not_found);
  if (!targets.ok()) return targets.status();
  const ClusterId cluster = listing->cluster_id;

  bool first = true;
  for (const auto& target : *targets) {
    if (!target.member) {
      report.NotAMember(cluster, target.arg);
      continue;
    }
    const ClusterMember& m = *target.member;
    // Each removal changes the membership the next one is checked against.
    if (!first && !(listing = client.MemberList()).ok()) return listing.status();
    first = false;
    if (FindId(*listing, m.id) == nullptr) {
      report.Handled(cluster, m, RemovalReport::Outcome::kAlreadyRemoved);
      continue;
    }
    if (Status s = CheckRemovalKeepsQuorum(*listing, m.id, ProbeVoters(probe, *listing, m.id)); !s.ok()) return s;
    if (options.before_remove) {
      if (Status s = options.before_remove(m); !s.ok()) return s;
    }

    auto outcome = RemoveOne(clock, client, m, options.retry_for);
    if (!outcome.ok()) return outcome.status();
    report.Handled(cluster, m, *outcome);
  }
  return Status::Ok();
}

}  // namespace quorate
