#include "core/planner.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace quorate {
namespace {

std::string JoinStrings(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// Reasons go to a one-line log record; an agent's error text may carry gRPC's multi-line details.
std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

// An --initial-cluster entry: a name and its peer URLs (client URLs play no part).
Member Entry(std::string name, std::vector<std::string> peer_urls) { return {std::move(name), std::move(peer_urls), {}}; }

// etcd folds --initial-cluster entries that share a name into one member, so a member that has not
// published its name yet still needs a unique one: the expected set's name for its peer URLs, and
// failing that its hex ID. etcd takes the IDs of other members from the cluster, not from these names.
std::string NameFor(const ClusterMember& m, const MemberSet& expected) {
  if (!m.name.empty()) return m.name;
  for (const auto& e : expected.members()) {
    if (SharesUrl(e.peer_urls, m.peer_urls)) return e.name;
  }
  return IdToHex(m.id);
}

// Peers may see the cluster at different points of its raft log. The union keeps every member any
// of them lists, in its most advanced state (named, started, promoted), so a stale view can neither
// hide that we once started (which would make us re-bootstrap a used ID) nor shrink the voter count
// quorum is measured against.
ClusterView MergeViews(const std::vector<const PeerFacts*>& reporting) {
  ClusterView merged = *reporting.front()->cluster;
  for (size_t i = 1; i < reporting.size(); ++i) {
    for (const auto& m : reporting[i]->cluster->members) {
      auto it = std::find_if(merged.members.begin(), merged.members.end(),
                             [&](const ClusterMember& x) { return x.id == m.id; });
      if (it == merged.members.end()) {
        merged.members.push_back(m);
        continue;
      }
      if (it->name.empty()) it->name = m.name;
      if (it->client_urls.empty()) it->client_urls = m.client_urls;
      it->is_learner = it->is_learner && m.is_learner;
    }
  }
  return merged;
}

std::vector<std::string> StartedEndpoints(const ClusterView& view) {
  std::vector<std::string> out;
  for (const auto& m : view.members) {
    for (const auto& u : m.client_urls) {
      if (std::find(out.begin(), out.end(), u) == out.end()) out.push_back(u);
    }
  }
  return out;
}

Decision Wait(WaitKind kind, std::string reason) {
  Decision d;
  d.action = Action::kWait;
  d.wait = kind;
  d.reason = OneLine(std::move(reason));
  return d;
}

Decision Start(Action action, std::string state, std::string initial_cluster, std::string reason) {
  Decision d;
  d.action = action;
  d.initial_cluster_state = std::move(state);
  d.initial_cluster = std::move(initial_cluster);
  d.reason = OneLine(std::move(reason));
  return d;
}

Decision PlanRestart(const PlanInput& in) {
  std::vector<Member> entries;
  for (const auto& m : in.expected.members()) entries.push_back(Entry(m.name, m.peer_urls));
  // etcd never reads --initial-cluster over existing data, but a config naming us is one etcd would
  // accept, so an operator can start it by hand without editing.
  if (in.expected.FindByName(in.self.name) == nullptr) entries.push_back(Entry(in.self.name, in.self.peer_urls));
  return Start(Action::kRestart, "new", InitialClusterOf(entries),
               fmt::format("{} has local data: restarting etcd on it (etcd ignores --initial-cluster "
                           "when its data dir has a WAL)",
                           in.self.name));
}

// The facts of the expected member at a voter's peer URLs; null when none is expected there.
const PeerFacts* FactsOfVoter(const PlanInput& in, const ClusterMember& voter) {
  for (const auto& p : in.peers) {
    const Member* m = in.expected.FindByName(p.name);
    if (m != nullptr && SharesUrl(m->peer_urls, voter.peer_urls)) return &p;
  }
  return nullptr;
}

// A voter answers when the expected member at its peer URLs had its etcd peer endpoint reply, or,
// at no expected member's (a stray that joined by rule 2), when its own peer URL did.
bool VoterAnswers(const PlanInput& in, const ClusterMember& voter) {
  if (const PeerFacts* p = FactsOfVoter(in, voter)) return p->cluster.has_value();
  return std::find(in.answering_outsiders.begin(), in.answering_outsiders.end(), voter.id) !=
         in.answering_outsiders.end();
}

std::string MajorityLostAdvice(const PlanInput& in, const ClusterView& c, const ClusterMember* listed);
Decision PlanReplace(const PlanInput& in, const ClusterView& c, const ClusterMember& listed, bool started = true);

Decision PlanLateInitial(const PlanInput& in, const ClusterView& c, const ClusterMember& listed) {
  if (in.replaced_here.contains(listed.id)) {
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("cluster {} lists {} as initial member {} that never started, but this quorate set out to "
                            "replace that member, which had started (rule 4): the view is older than its start (a "
                            "peer replaying its log), and `new` under it would take back a vote raft counted on",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id)));
  }
  // The same after this quorate started anew, which does not know what its predecessor replaced: an
  // initial member is in every view from the bootstrap's first entries on and leaves one only by its
  // removal, so a view of this cluster without it is newer than a removal (or a replay's first lines,
  // which a poll later list it); the merged view holds it only from an older one.
  for (const auto& p : in.peers) {
    if (!p.cluster || p.cluster->cluster_id != c.cluster_id) continue;
    const auto& members = p.cluster->members;
    if (std::any_of(members.begin(), members.end(), [&](const ClusterMember& m) { return m.id == listed.id; })) {
      continue;
    }
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("cluster {} lists {} as initial member {} that never started, but {}'s view of it does "
                            "not: an initial member leaves the membership only by its removal, and `new` under a "
                            "removed member's ID would take back a vote raft counted on; waiting for the views to "
                            "agree",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id), p.name));
  }
  // A member that started and then lost its data looks, in a view older than its start, exactly like
  // one that never started; starting it `new` under its old ID with an empty log would take from raft
  // a vote it counted on (a committed entry can be lost). The view of every other voter is the
  // newest there is, so each must answer, or say through its agent that it has no data (and so no
  // record of our start either). Waiting when a voter died during the bootstrap is the price.
  auto unheard_voters = [&]() -> std::optional<Decision> {
    std::vector<std::string> unheard;
    for (const auto& m : c.members) {
      if (&m == &listed || m.is_learner) continue;
      const PeerFacts* p = FactsOfVoter(in, m);
      bool heard = p != nullptr && (p->cluster || (p->agent.reachable && p->agent.data_state == DataState::kEmpty));
      if (!heard) unheard.push_back(NameFor(m, in.expected));
    }
    if (unheard.empty()) return std::nullopt;
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("cluster {} lists {} as initial member {} that never started, but {} {} not answer on "
                            "{} peer URL{}: a view older than a start looks the same as one of a member that never "
                            "started, so every other voter must answer before {} starts as it",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id), JoinStrings(unheard, ", "),
                            unheard.size() == 1 ? "does" : "do", unheard.size() == 1 ? "its" : "their",
                            unheard.size() == 1 ? "" : "s", in.self.name));
  };
  // When the voters that hold data are fewer than a quorum, the empty ones are either members that
  // never started (a bootstrap where most nodes died before their etcd ran) or members that started
  // and lost their data (a majority lost): their disks look alike. Only the logs kept tell them
  // apart: past the bootstrap, a leader once had a quorum, so members that started are among the
  // empty ones, and a leader elected from empty logs would cut the kept logs' committed entries.
  // The agent beside a holder's etcd reads its log. A holder with no agent answering (init mode runs
  // none once etcd is up: the usual case of a node whose peers started before it) is judged by its
  // view instead, which lags the log only by the commit of the entries a leader appended just before
  // everything stopped (§4 rule 3 names that window).
  auto majority_lost = [&]() -> std::optional<Decision> {
    size_t voters = 0;
    std::vector<std::string> holders, past;
    for (const auto& m : c.members) {
      if (m.is_learner) continue;
      ++voters;
      if (&m == &listed) continue;
      const PeerFacts* p = FactsOfVoter(in, m);
      if (p == nullptr) continue;
      const bool holds = p->cluster.has_value() || (p->agent.reachable && (p->agent.data_state == DataState::kHasData ||
                                                                          p->agent.data_state == DataState::kRunning));
      if (!holds) continue;
      holders.push_back(NameFor(m, in.expected));
      // A view listing a started member shows a commit too: a member publishes itself through raft.
      const bool view_past = p->cluster && p->cluster->cluster_id == c.cluster_id &&
                             std::any_of(p->cluster->members.begin(), p->cluster->members.end(),
                                         [](const ClusterMember& v) { return v.started(); });
      if ((p->agent.reachable && p->agent.log_past_bootstrap) || view_past) past.push_back(holders.back());
    }
    if (holders.size() >= voters / 2 + 1 || past.empty()) return std::nullopt;
    return Wait(WaitKind::kMajorityLost,
                fmt::format("cluster {} lists {} as initial member {} that never started, but only {} of its {} "
                            "voters hold data and {} logged past the bootstrap, so members that started have lost "
                            "their data: a majority is lost, and a start `new` would cut committed entries; {}",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id), holders.size(), voters,
                            JoinStrings(past, ", "), MajorityLostAdvice(in, c, &listed)));
  };
  // A peer restarting on its data lists the members as it replays its log, one at a time (rule 1b's
  // partial view), and every check above would go over the members it happens to hold so far. The
  // voters it leaves out may be the ones whose logs are past the bootstrap, or whose views show our
  // start. While no member shows as started, a view of the cluster the expected set bootstraps is the
  // bootstrap's membership, every initial member in it: a member publishes itself before it serves
  // the API any change of the membership goes through. So a view then lacking an initial member (the
  // very one answering it, or another: simulator seed 2880 of 3 nodes, whose third member was down)
  // is such a part.
  auto partial_view = [&]() -> std::optional<Decision> {
    if (std::any_of(c.members.begin(), c.members.end(), [](const ClusterMember& m) { return m.started(); })) {
      return std::nullopt;
    }
    for (const auto& e : in.expected.members()) {
      const MemberId id = in.expected.IdOf(e);
      if (std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == id; })) {
        continue;
      }
      return Wait(WaitKind::kPeersNotReady,
                  fmt::format("cluster {} lists {} as initial member {} that never started, but the views of it do "
                              "not list initial member {} ({}): a member replaying its log lists only the members "
                              "replayed so far, so {} waits for the whole membership",
                              IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id), IdToHex(id), e.name,
                              in.self.name));
    }
    return std::nullopt;
  };
  const std::string why_new =
      "never-started initial members bootstrap raft with the same initial peers or no leader is "
      "elected";
  // A peer restarting on its data lists the members as it replays its log and marks them started a
  // moment later (seen on etcd 3.4 and 3.5), so a view where no member has started may hide a start,
  // ours included. Not when the agent beside each peer that answered read its log and found no
  // leader's entry: a member starts by publishing itself through a leader, so such a log records no
  // start for its view to catch up on (a fresh bootstrap, where a second look only cost a poll).
  const bool view_may_lag =
      std::none_of(c.members.begin(), c.members.end(), [](const ClusterMember& m) { return m.started(); }) &&
      std::any_of(in.peers.begin(), in.peers.end(), [](const PeerFacts& p) {
        const bool log_read = p.agent.reachable && (p.agent.data_state == DataState::kHasData ||
                                                    p.agent.data_state == DataState::kRunning);
        return p.cluster && (!log_read || p.agent.log_past_bootstrap);
      });
  auto start_new = [&](const std::vector<Member>& entries, const std::string& membership) {
    Decision d = Start(Action::kLateInitial, "new", InitialClusterOf(entries),
                       fmt::format("cluster {} lists {} as initial member {} that never started: starting with "
                                   "state new{}, because {}",
                                   IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id), membership, why_new));
    d.look_again = view_may_lag;
    return d;
  };
  // Our ID matches the expected set, but the expected set may name us differently; etcd needs
  // --name in --initial-cluster, and only the peer URLs feed the IDs.
  if (c.cluster_id == in.expected.cluster_id()) {
    if (auto wait = partial_view()) return *wait;
    if (auto wait = unheard_voters()) return *wait;
    if (auto wait = majority_lost()) return *wait;
    std::vector<Member> entries;
    for (const auto& m : in.expected.members()) {
      bool is_self = in.expected.IdOf(m) == listed.id;
      entries.push_back(Entry(is_self ? in.self.name : m.name, is_self ? in.self.peer_urls : m.peer_urls));
    }
    return start_new(entries, "");
  }
  // Discovery now sees a different set than the one the cluster was bootstrapped with; the cluster's
  // own membership is the bootstrap set only if it still hashes to the cluster ID and every member
  // still has the peer URLs its ID was computed from.
  std::vector<MemberId> ids;
  for (const auto& m : c.members) ids.push_back(m.id);
  bool unchanged = ComputeClusterId(ids) == c.cluster_id;
  for (const auto& m : c.members) {
    if (ComputeMemberId(m.peer_urls, in.expected.token()) != m.id) unchanged = false;
  }
  // Members of the bootstrap set were removed since (a cloud group replaced their instances, say):
  // their peer URLs, which the member IDs were hashed from, are gone from every view, so `new` with
  // the same initial cluster cannot be written. The member never ran, so nothing is lost by taking
  // its place as rule 4 does.
  if (!unchanged) return PlanReplace(in, c, listed, /*started=*/false);
  if (auto wait = partial_view()) return *wait;
  if (auto wait = unheard_voters()) return *wait;
  if (auto wait = majority_lost()) return *wait;
  std::vector<Member> entries;
  for (const auto& m : c.members) {
    if (m.id == listed.id) {
      entries.push_back(Entry(in.self.name, in.self.peer_urls));
      continue;
    }
    std::string name = m.name;
    if (name.empty()) {
      const Member* e = in.expected.FindById(m.id);
      name = e != nullptr ? e->name : NameFor(m, in.expected);
    }
    entries.push_back(Entry(name, m.peer_urls));
  }
  return start_new(entries, " and the cluster's own initial membership");
}

// Rule 4's majority-lost wait names the way back that applies (§4 rules 7 and 8): a voter whose etcd
// still answers holds data, and recovering from it loses none of its writes; with none, a backup.
std::string MajorityLostAdvice(const PlanInput& in, const ClusterView& c, const ClusterMember* listed) {
  std::vector<std::string> survivors;
  for (const auto& m : c.members) {
    if (!m.is_learner && &m != listed && VoterAnswers(in, m)) survivors.push_back(NameFor(m, in.expected));
  }
  const std::string manual = "(etcd's manual alternative: --force-new-cluster on one survivor)";
  if (!survivors.empty()) {
    return fmt::format(
        "bring voters back; or, if their data is gone for good, stop quorate on {0} and run `quorate recover "
        "--from-member {0} --backup-to STORE` there (a snapshot of its database, so no write it holds is lost), "
        "then `quorate run --restore-from <the URL it prints> --initial-cluster-token <a new token>` on every "
        "node {1}",
        survivors.front(), manual);
  }
  return fmt::format(
      "bring voters back; or, if their data is gone for good, restore a snapshot: `quorate run --restore-from "
      "<backup URL from quorate backup list> --initial-cluster-token <a new token>` on every node {}",
      manual);
}

// Rule 4, and rule 3 where the initial cluster cannot be rebuilt: remove the member at our peer URLs
// and add us back as a learner, with quorum. `started`: the member ran (rule 4: its data is gone);
// else it never started, but the membership changed since the bootstrap.
Decision PlanReplace(const PlanInput& in, const ClusterView& c, const ClusterMember& listed, bool started) {
  // The voters are counted on the member list read with quorum when there is one: the peers' views
  // may be older than a removal (a removed member's etcd, restarted on data that never saw it, lists
  // every initial member a voter), and the live node at a removed voter's peer URLs would count as
  // that voter answering (simulator seed 1347 of 5 nodes).
  const ClusterView& counted =
      in.quorum_view && in.quorum_view->cluster_id == c.cluster_id ? *in.quorum_view : c;
  size_t voters = 0;
  size_t live = 0;
  for (const auto& m : counted.members) {
    if (m.is_learner) continue;
    ++voters;
    if (m.id != listed.id && VoterAnswers(in, m)) ++live;
  }
  size_t majority = voters / 2 + 1;
  const std::string what =
      started ? fmt::format("{} was started as member {} of cluster {} but its data is gone", in.self.name,
                            IdToHex(listed.id), IdToHex(c.cluster_id))
              : fmt::format("cluster {} lists {} as initial member {} that never started, but its membership changed "
                            "since bootstrap, so the initial cluster cannot be rebuilt",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed.id));
  if (live < majority) {
    if (!started) {
      return Wait(WaitKind::kPeersNotReady,
                  fmt::format("{}; only {} of {} voters answer and replacing the member needs a majority of {}", what,
                              live, voters, majority));
    }
    return Wait(WaitKind::kMajorityLost,
                fmt::format("{} was started as member {} of cluster {} but has no local data; only {} of "
                            "{} voters answer and replacing it needs a majority of {}: {}",
                            in.self.name, IdToHex(listed.id), IdToHex(c.cluster_id), live, voters, majority,
                            MajorityLostAdvice(in, c, &listed)));
  }
  std::vector<Member> entries;
  for (const auto& m : c.members) {
    if (&m != &listed) entries.push_back(Entry(NameFor(m, in.expected), m.peer_urls));
  }
  entries.push_back(Entry(in.self.name, in.self.peer_urls));
  Decision d = Start(Action::kReplace, "existing", InitialClusterOf(entries),
                     fmt::format("{}; {} of {} voters answer, so removing the stale ID and adding it back as a "
                                 "learner keeps quorum",
                                 what, live, voters));
  d.add_member = true;
  d.remove_id = listed.id;
  return d;
}

// Rule 9's fact about one member: its instance departed (silent, and in no instance of the whole
// group; PlanInput::silent_outsiders holds only such members).
bool Departed(const PlanInput& in, const ClusterMember& m) {
  return in.expected_is_whole_group &&
         std::find(in.silent_outsiders.begin(), in.silent_outsiders.end(), m.id) != in.silent_outsiders.end();
}

// Rule 9's other face: voters whose instance departed never come back. Nor, while a departed voter
// stays listed, does a voter whose etcd is silent and whose agent says its data dir is empty (or said
// so when it last answered: its quorate may be down between --timeout exits): never
// started, rule 3 starts it only once every other voter answers, and the departed one never will;
// started and emptied, rule 4 replaces it only through a change that commits. When the voters left
// besides these could not make a quorum even if every one came back, no member can be added or
// removed any more (each change commits only with a quorum of the voters counted before it): a
// majority is lost, and a join would only run into --timeout.
std::optional<Decision> MajorityDeparted(const PlanInput& in, const ClusterView& c) {
  std::vector<std::string> departed;
  std::vector<std::string> empty;
  size_t voters = 0;
  for (const auto& m : c.members) {
    if (m.is_learner) continue;
    ++voters;
    if (Departed(in, m)) {
      departed.push_back(NameFor(m, in.expected));
      continue;
    }
    const PeerFacts* p = FactsOfVoter(in, m);
    const bool empty_agent = p != nullptr && (p->agent.reachable ? p->agent.data_state == DataState::kEmpty
                                                                : p->empty_when_last_answered);
    if (empty_agent && !p->cluster) {
      empty.push_back(NameFor(m, in.expected));
    }
  }
  if (departed.empty() || voters - departed.size() - empty.size() >= voters / 2 + 1) return std::nullopt;
  std::string emptied;
  if (!empty.empty()) {
    emptied = fmt::format(" and {} ({}) {} no data (never started, or lost it: either way {} no vote until a "
                          "change commits)",
                          empty.size(), JoinStrings(empty, ", "), empty.size() == 1 ? "holds" : "hold",
                          empty.size() == 1 ? "it casts" : "they cast");
  }
  return Wait(WaitKind::kMajorityLost,
              fmt::format("{} of the {} voters of cluster {} ({}) left with {} instance{} for good{}, so no member "
                          "can be added or removed any more: a majority is lost; {}",
                          departed.size(), voters, IdToHex(c.cluster_id), JoinStrings(departed, ", "),
                          departed.size() == 1 ? "its" : "their", departed.size() == 1 ? "" : "s", emptied,
                          MajorityLostAdvice(in, c, nullptr)));
}

// Whether the cluster has a member of a departed instance: a newcomer takes such a seat before it
// joins beside it, whatever the cluster's size. A departed learner would keep etcd's one learner seat
// for ever ("too many learner members"); a departed voter would stay on while two newcomers, each
// seeing a seat free, both join, and the cluster outgrows its size (MemberAdd checks none); and etcd
// 3.4 refuses any add while a voter is not connected.
bool HasDeparted(const PlanInput& in, const ClusterView& c) {
  return std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return Departed(in, m); });
}

// Rule 9: a cluster that does not list us, full or holding a departed member's seat (HasDeparted), on
// a platform whose scaling group replaces a failed instance by a new one (new ID, new address, empty
// disk). The member of the instance that is gone would keep its seat for ever and this newcomer would
// wait as extra; so when discovery listed the whole group, a member in none of its instances whose
// peer URLs are silent has departed, and the newcomer takes its seat: remove it, join as a learner.
// One at a time (no learner may be catching up) and only while a majority of the voters left after
// the removal answers, as `member remove` checks. nullopt: the rule does not apply, the newcomer is
// extra.
std::optional<Decision> PlanDeparted(const PlanInput& in, const ClusterView& c) {
  if (!in.expected_is_whole_group) return std::nullopt;
  std::vector<const ClusterMember*> outside;
  for (const auto& m : c.members) {
    bool in_group = false;
    for (const auto& e : in.expected.members()) in_group |= SharesUrl(e.peer_urls, m.peer_urls);
    if (!in_group) outside.push_back(&m);
  }
  if (outside.empty()) return std::nullopt;
  const ClusterMember* departed = nullptr;
  std::vector<std::string> answering;
  for (const ClusterMember* m : outside) {
    if (!Departed(in, *m)) {
      answering.push_back(fmt::format("{} ({})", NameFor(*m, in.expected), JoinStrings(m->peer_urls, ",")));
    } else if (departed == nullptr || (m->is_learner && !departed->is_learner) ||
               (m->is_learner == departed->is_learner && m->id < departed->id)) {
      // A departed learner goes first: etcd holds one learner at most, so it blocks every add.
      departed = m;
    }
  }
  if (departed == nullptr) {
    return Wait(WaitKind::kExtra,
                fmt::format("cluster {} already has {} members and does not list {}; {} {} in no instance of the "
                            "group as first listed but still {} on {} peer URLs, or {} at an instance the group lists "
                            "now, so none is taken for departed",
                            IdToHex(c.cluster_id), c.members.size(), in.self.name, JoinStrings(answering, ", "),
                            answering.size() == 1 ? "is" : "are", answering.size() == 1 ? "answers" : "answer",
                            answering.size() == 1 ? "its" : "their", answering.size() == 1 ? "is" : "are"));
  }
  const std::string name = NameFor(*departed, in.expected);
  for (const auto& m : c.members) {
    if (m.is_learner && &m != departed) {
      return Wait(WaitKind::kPeersNotReady,
                  fmt::format("member {} ({}) of cluster {} is in no instance of the group and silent, but learner "
                              "{} is still catching up: one replacement at a time",
                              IdToHex(departed->id), name, IdToHex(c.cluster_id), NameFor(m, in.expected)));
    }
  }
  // The removal commits under the voters counted before it, the departed one among them (silent, so
  // it adds no vote): with an even count that is one more than a majority of the voters left after.
  size_t voters = 0;
  size_t live = 0;
  for (const auto& m : c.members) {
    if (m.is_learner) continue;
    ++voters;
    if (&m != departed && VoterAnswers(in, m)) ++live;
  }
  const size_t majority = voters / 2 + 1;
  if (live < majority) {
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("member {} ({}) of cluster {} is in no instance of the group and silent, but only {} of "
                            "the cluster's {} voters answer, short of the majority of {} that commits its removal: "
                            "not removing it",
                            IdToHex(departed->id), name, IdToHex(c.cluster_id), live, voters, majority));
  }
  std::vector<Member> entries;
  for (const auto& m : c.members) {
    if (&m != departed) entries.push_back(Entry(NameFor(m, in.expected), m.peer_urls));
  }
  entries.push_back(Entry(in.self.name, in.self.peer_urls));
  Decision d = Start(Action::kJoin, "existing", InitialClusterOf(entries),
                     fmt::format("member {} ({}, {}) of cluster {} is in no instance of the group and its peer URLs "
                                 "are silent: its instance has departed; {} of the cluster's {} voters answer, a "
                                 "majority without it, so {} removes it and joins as a learner in its place",
                                 IdToHex(departed->id), name, JoinStrings(departed->peer_urls, ","),
                                 IdToHex(c.cluster_id), live, voters, in.self.name));
  d.add_member = true;
  d.remove_id = departed->id;
  return d;
}

// Rule 2b: a seat free because a discovered member is about to take it is that member's. A member
// replacing its own (rule 4) frees its seat between the removal and its add, and one that has yet to
// join holds none: either way the cluster does not list it, and its agent says its data dir is empty.
// A node outside the discovered set (a stray) that took such a seat would leave that member out for
// good, so a stray joins only while the members and those discovered members leave a seat free. The
// discovered members a stray yields to; none when self is discovered or a seat is free beside them.
std::vector<std::string> SeatsClaimed(const PlanInput& in, const ClusterView& c, size_t size) {
  if (in.expected.FindByName(in.self.name) != nullptr) return {};
  std::vector<std::string> claimants;
  for (const auto& p : in.peers) {
    const Member* e = in.expected.FindByName(p.name);
    if (e == nullptr || !p.agent.reachable || p.agent.data_state != DataState::kEmpty) continue;
    if (std::none_of(c.members.begin(), c.members.end(),
                     [&](const ClusterMember& m) { return SharesUrl(e->peer_urls, m.peer_urls); })) {
      claimants.push_back(p.name);
    }
  }
  if (c.members.size() + claimants.size() < size) return {};
  return claimants;
}

Decision PlanWithCluster(const PlanInput& in, const ClusterView& c) {
  const ClusterMember* listed = nullptr;
  for (const auto& m : c.members) {
    if (SharesUrl(in.self.peer_urls, m.peer_urls)) {
      listed = &m;
      break;
    }
  }
  for (const auto& m : c.members) {
    // Two members on our peer URLs: one view still lists the ID a replace removed. Taking the wrong
    // one would start etcd as a member the cluster removed.
    if (listed != nullptr && &m != listed && SharesUrl(in.self.peer_urls, m.peer_urls)) {
      return Wait(WaitKind::kPeersNotReady,
                  fmt::format("peers disagree on which member of cluster {} has our peer URLs, {} or {} (a stale "
                              "view still lists one that was removed): waiting for their views to agree",
                              IdToHex(c.cluster_id), IdToHex(listed->id), IdToHex(m.id)));
    }
    // Our name on someone else's peer URLs is most likely our old self at an old address; joining
    // beside it would add a dead voter, and --initial-cluster would fold the two into one member.
    if (&m != listed && !m.name.empty() && m.name == in.self.name) {
      return Wait(WaitKind::kExtra,
                  fmt::format("cluster {} has a member {} named {} with peer URLs {}, not ours ({}); "
                              "remove that member or fix the peer URLs",
                              IdToHex(c.cluster_id), IdToHex(m.id), m.name, JoinStrings(m.peer_urls, ","),
                              JoinStrings(in.self.peer_urls, ",")));
    }
  }

  const size_t size = in.cluster_size != 0 ? in.cluster_size : in.expected.size();
  Decision d;
  if (listed != nullptr && !listed->started()) {
    if (listed->id == in.expected.IdOf(in.self)) {
      d = PlanLateInitial(in, c, *listed);
    } else {
      std::vector<Member> entries;
      for (const auto& m : c.members) {
        if (&m == listed) {
          entries.push_back(Entry(in.self.name, m.peer_urls));
        } else {
          entries.push_back(Entry(NameFor(m, in.expected), m.peer_urls));
        }
      }
      d = Start(Action::kJoin, "existing", InitialClusterOf(entries),
                fmt::format("cluster {} already lists {} as added member {} that never started (an "
                            "earlier join or replace stopped mid-way): starting with state existing",
                            IdToHex(c.cluster_id), in.self.name, IdToHex(listed->id)));
    }
  } else if (listed != nullptr) {
    d = PlanReplace(in, c, *listed);
  } else if (auto lost = MajorityDeparted(in, c)) {
    d = *lost;
  } else {
    const bool seat_free = c.members.size() < size && !HasDeparted(in, c);
    const std::vector<std::string> claimed = seat_free ? SeatsClaimed(in, c, size) : std::vector<std::string>{};
    if (!claimed.empty()) {
      d = Wait(WaitKind::kExtra,
               fmt::format("cluster {} has {} of {} members and does not list {}, which is not in the discovered "
                           "set: a free seat is kept for the discovered members the cluster does not list and whose "
                           "agents say their data dirs are empty ({}: replacing its member, or about to join), so {} "
                           "waits as extra; raise --cluster-size or remove a member",
                           IdToHex(c.cluster_id), c.members.size(), size, in.self.name, JoinStrings(claimed, ", "),
                           in.self.name));
    } else if (seat_free) {
      std::vector<Member> entries;
      for (const auto& m : c.members) entries.push_back(Entry(NameFor(m, in.expected), m.peer_urls));
      entries.push_back(Entry(in.self.name, in.self.peer_urls));
      d = Start(Action::kJoin, "existing", InitialClusterOf(entries),
                fmt::format("cluster {} has {} of {} members and does not list {}: joining as a learner",
                            IdToHex(c.cluster_id), c.members.size(), size, in.self.name));
      d.add_member = true;
    } else if (auto departed = PlanDeparted(in, c)) {
      d = *departed;
    } else {
      d = Wait(WaitKind::kExtra,
               fmt::format("cluster {} already has {} of {} members and does not list {}; raise "
                           "--cluster-size or remove a member",
                           IdToHex(c.cluster_id), c.members.size(), size, in.self.name));
    }
  }
  d.endpoints = StartedEndpoints(c);
  if (d.add_member && d.endpoints.empty()) {
    // A member restarting on its data lists the members as it replays its log, the first ones
    // before the rest and none started yet (seen on etcd 3.5 with quorum lost): such a view is no
    // ground to add anyone, and there is no member to send MemberAdd to anyway.
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("cluster {} lists no started member yet (its members are starting or replaying their "
                            "log), so {} cannot be added through one; waiting",
                            IdToHex(c.cluster_id), in.self.name));
  }
  if (d.add_member && in.member_add_needs_every_voter) {
    std::vector<std::string> down;
    for (const auto& m : c.members) {
      if (&m != listed && m.id != d.remove_id && !m.is_learner && !VoterAnswers(in, m)) {
        down.push_back(NameFor(m, in.expected));
      }
    }
    if (!down.empty()) {
      d.reason = OneLine(fmt::format("{}; this etcd adds no member while a voter is down ({}), so MemberAdd is "
                                     "retried until it is back or removed with quorate member remove",
                                     d.reason, JoinStrings(down, ", ")));
    }
  }
  d.cluster_id = c.cluster_id;
  d.cluster_size = size;
  return d;
}

// (answering, voters) of `view` when it does not list `member` and a majority of its voters answer.
std::optional<std::pair<size_t, size_t>> MajorityWithout(const PlanInput& in, const ClusterView& view,
                                                         MemberId member) {
  size_t voters = 0;
  size_t answering = 0;
  for (const auto& m : view.members) {
    if (m.id == member) return std::nullopt;
    if (m.is_learner) continue;
    ++voters;
    if (VoterAnswers(in, m)) ++answering;
  }
  if (voters == 0 || answering < voters / 2 + 1) return std::nullopt;
  return std::pair{answering, voters};
}

// What rule 1b says of our member, found removed in `quorum_view`.
std::string RemovedText(const PlanInput& in, const ClusterView& quorum_view) {
  return fmt::format("member {} ({}) was removed from cluster {}: a member list read with quorum lacks it",
                     IdToHex(in.local->member_id), in.self.name, IdToHex(quorum_view.cluster_id));
}

// Rule 1b's hold: a removal met while etcd ran here is never undone from here.
Decision HoldRemoved(const std::string& removed) {
  return Wait(WaitKind::kRemoved,
              fmt::format("{}: not restarting etcd, and not rejoining, since a removal is deliberate; delete this "
                          "node, or restart quorate to join again while the cluster is below --cluster-size",
                          removed));
}

// Rule 1b's decision once `removed` (what the quorum view says of our member) is known.
Decision PlanRemovedFrom(const PlanInput& in, const ClusterView& view, const std::string& removed) {
  if (in.etcd_ran && !in.removed_by_learner_deadline) return HoldRemoved(removed);
  PlanInput fresh = in;
  fresh.has_local_data = false;
  Decision d = PlanWithCluster(fresh, view);
  if (d.action == Action::kJoin) {
    d.move_data_aside = true;
    d.reason = OneLine(fmt::format("{}; moving its data aside (kept, not deleted), then: {}", removed, d.reason));
    return d;
  }
  if (d.action == Action::kWait) {
    d.reason = OneLine(fmt::format("{}; not restarting etcd: {}", removed, d.reason));
    return d;
  }
  return Wait(WaitKind::kPeersNotReady,
              fmt::format("{}; not restarting etcd, and not {}: {}", removed, ActionName(d.action), d.reason));
}

// Rule 1b's hold, asked again (PlanInput::held_removal): etcd stays stopped on the removed member's
// data whatever comes. But once nothing of the cluster it was removed from runs, every other node may
// only wait (one emptied sees no cluster, and waits for this node's data to answer), so this one says
// when that cluster has lost a majority: its voters whose instances left for good (rule 9's departed),
// and those that had started and whose agents say their data dirs are empty with their etcd silent,
// can vote again only through a change that commits, and the rest are too few to commit one.
Decision PlanHeldRemoval(const PlanInput& in) {
  const ClusterView& c = *in.held_removal;
  const std::string removed = RemovedText(in, c);
  std::vector<std::string> lost;
  size_t voters = 0;
  for (const auto& m : c.members) {
    if (m.is_learner) continue;
    ++voters;
    const PeerFacts* p = FactsOfVoter(in, m);
    const bool emptied = p != nullptr && !p->cluster && m.started() &&
                         (p->agent.reachable ? p->agent.data_state == DataState::kEmpty : p->empty_when_last_answered);
    if (Departed(in, m) || emptied) lost.push_back(NameFor(m, in.expected));
  }
  Decision d = HoldRemoved(removed);
  if (voters > 0 && voters - lost.size() < voters / 2 + 1) {
    d = Wait(WaitKind::kMajorityLost,
              fmt::format("{}; since then {} of its {} voters ({}) left with their instances or lost their data, so "
                          "that cluster has lost a majority: not restarting etcd on the removed member's data; {}",
                          removed, lost.size(), voters, JoinStrings(lost, ", "), MajorityLostAdvice(in, c, nullptr)));
  }
  d.data_removed = true;
  return d;
}

// Rule 1b: our data is a member's the cluster removed. Said only from the quorum view: a member list
// made right after a linearizable read, so it holds every change committed before it. A peer URL's
// GET /members is not enough, whichever way it points: etcd answers it while it still rebuilds the
// membership from its WAL after a restart (lacking members it has), and a member that has not yet
// applied a removal still lists the removed one. Then a removal met while etcd ran here
// (PlanInput::etcd_ran) was the operator's (a scale-down) or rule M7's, and is never undone from here,
// unless rule M6's record names the member (a stuck learner, removed to free etcd's learner seat,
// whose node §12 has join again). On a fresh start, or after M6's removal, the node is a new one for
// the cluster (a kept volume reused by a scale-up, a learner M6 removed), which joins by rule 2 when
// the cluster is below its size, its old data moved aside, never deleted.
std::optional<Decision> PlanRemoved(const PlanInput& in) {
  const WalIdentity& local = *in.local;
  const ClusterView& view = *in.quorum_view;
  if (view.cluster_id != local.cluster_id) return std::nullopt;
  for (const auto& m : view.members) {
    if (m.id == local.member_id) return std::nullopt;
  }
  std::string removed = RemovedText(in, view);
  if (in.removed_by_learner_deadline) {
    removed += ", and rule M6's record says it removed that learner, stuck past --learner-deadline";
  }
  Decision d = PlanRemovedFrom(in, view, removed);
  d.data_removed = true;
  return d;
}

// Rule 1b once more: an earlier decision of this process found this member removed, and no member list
// can be read with quorum now (a partition, the voters restarting). Rule 1 would start etcd on the
// removed member's data, which the cluster only refuses: wait for the quorum, then join or wait as
// extra (simulator seed 50724 of 3 nodes: a learner M6 removed, its cluster full again, restarted).
Decision PlanRemovedBefore(const PlanInput& in) {
  Decision d = Wait(WaitKind::kPeersNotReady,
                    fmt::format("member {} ({}) was removed from cluster {}, as a member list read with quorum showed "
                                "before: not restarting etcd on its data; waiting for such a list to join again",
                                IdToHex(in.local->member_id), in.self.name, IdToHex(in.local->cluster_id)));
  d.data_removed = true;
  return d;
}

// Rule 1c: our data is of a cluster the peers no longer run: a majority of the voters of the cluster
// they report answer, it is not the cluster our WAL names, and it does not list our member. That is
// what a restore or a recovery leaves for an old member it did not reach (new token, new cluster
// ID): etcd on this data would only be refused by its peers, so it waits and says how to join.
std::optional<Decision> PlanStranded(const PlanInput& in, const ClusterView& view) {
  const WalIdentity& local = *in.local;
  if (view.cluster_id == local.cluster_id) return std::nullopt;
  auto count = MajorityWithout(in, view, local.member_id);
  if (!count) return std::nullopt;
  const auto [answering, voters] = *count;
  return Wait(WaitKind::kConflict,
              fmt::format("this node's data is member {} of cluster {}, but {} of the {} voters of cluster {} answer "
                          "and it does not list this member (a restore or a recovery made a new cluster): not "
                          "starting etcd on it; start this node with the others' --restore-from and "
                          "--initial-cluster-token, which moves its data aside",
                          IdToHex(local.member_id), IdToHex(local.cluster_id), answering, voters,
                          IdToHex(view.cluster_id)));
}

// Empty when the peer agrees to bootstrap a new cluster with us, else why it does not.
std::string Disagreement(const PlanInput& in, const PeerFacts& p) {
  const AgentReport& a = p.agent;
  if (!a.reachable) {
    return a.error.empty() ? "agent unreachable" : fmt::format("agent unreachable ({})", a.error);
  }
  std::vector<std::string> why;
  switch (a.data_state) {
    case DataState::kEmpty:
      break;
    case DataState::kHasData:
      why.push_back("has data but its etcd is not answering on its peer URL");
      break;
    case DataState::kRunning:
      why.push_back("runs etcd but it is not answering on its peer URL");
      break;
    case DataState::kUnknown:
      why.push_back("did not say whether it has data");
      break;
  }
  if (a.token != in.expected.token()) {
    why.push_back(fmt::format("different token '{}' (ours '{}')", a.token, in.expected.token()));
  }
  if (a.expected_cluster_id != in.expected.cluster_id()) {
    why.push_back(fmt::format("different member set (cluster {}, ours {})", IdToHex(a.expected_cluster_id),
                              IdToHex(in.expected.cluster_id())));
  }
  return JoinStrings(why, ", ");
}

Decision PlanWithoutCluster(const PlanInput& in) {
  const Member* me = in.expected.FindByName(in.self.name);
  if (me == nullptr) {
    std::vector<std::string> names;
    for (const auto& m : in.expected.members()) names.push_back(m.name);
    return Wait(WaitKind::kExtra,
                fmt::format("{} is not in the expected member set ({}) and no peer reports a cluster to "
                            "join",
                            in.self.name, JoinStrings(names, ",")));
  }
  // etcd refuses to bootstrap when its advertised peer URLs differ from its --initial-cluster entry,
  // and the IDs every peer computed would not be ours.
  if (!SameUrlSet(me->peer_urls, in.self.peer_urls)) {
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("discovery lists {} with peer URLs {} but this node advertises {}", me->name,
                            JoinStrings(me->peer_urls, ","), JoinStrings(in.self.peer_urls, ",")));
  }
  std::vector<std::string> blockers;
  for (const auto& m : in.expected.members()) {
    if (m.name == in.self.name) continue;
    bool reported = false;
    for (const auto& p : in.peers) {
      if (p.name != m.name) continue;
      reported = true;
      std::string why = Disagreement(in, p);
      if (!p.foreign_answer.empty()) {
        std::string foreign = fmt::format("its etcd peer URL answered as etcd never does, so whether a cluster runs "
                                          "there is unknown: {}",
                                          p.foreign_answer);
        why = why.empty() ? foreign : why + ", " + foreign;
      }
      if (!why.empty()) blockers.push_back(m.name + ": " + why);
    }
    if (!reported) blockers.push_back(m.name + ": no report");
  }
  if (!blockers.empty()) {
    return Wait(WaitKind::kPeersNotReady,
                fmt::format("not starting a new cluster until every expected member is empty and "
                            "agrees; waiting for {}",
                            JoinStrings(blockers, "; ")));
  }
  Decision d = Start(Action::kNew, "new", in.expected.InitialCluster(),
                     fmt::format("no peer reports a cluster and all {} expected members are empty with "
                                 "the same token and member set: bootstrapping cluster {}",
                                 in.expected.size(), IdToHex(in.expected.cluster_id())));
  d.cluster_id = in.expected.cluster_id();
  return d;
}

}  // namespace

VersionFacts VersionFactsOf(const PlanInput& input) {
  VersionFacts versions{input.binary_version, input.recorded_cluster_version, {}};
  for (const auto& p : input.peers) {
    if (p.version) versions.peers.push_back({p.name, p.version->server, p.version->cluster});
  }
  return versions;
}

Decision Plan(const PlanInput& input) {
  if (input.held_removal && input.local) return PlanHeldRemoval(input);
  if (std::string refusal = VersionRefusal(VersionFactsOf(input)); !refusal.empty()) {
    return Wait(WaitKind::kVersion, refusal);
  }
  std::vector<const PeerFacts*> reporting;
  const PeerFacts* conflicting = nullptr;
  for (const auto& p : input.peers) {
    if (!p.cluster) continue;
    reporting.push_back(&p);
    if (conflicting == nullptr && p.cluster->cluster_id != reporting.front()->cluster->cluster_id) {
      conflicting = &p;
    }
  }

  if (input.has_local_data) {
    if (input.local && input.quorum_view) {
      if (auto removed = PlanRemoved(input)) return *removed;
    }
    if (input.local && input.removed_before) return PlanRemovedBefore(input);
    if (!reporting.empty() && conflicting == nullptr && input.local) {
      if (auto stranded = PlanStranded(input, MergeViews(reporting))) return *stranded;
    }
    Decision d = PlanRestart(input);
    if (!reporting.empty() && conflicting == nullptr) {
      ClusterView view = MergeViews(reporting);
      d.cluster_id = view.cluster_id;
      d.endpoints = StartedEndpoints(view);
    }
    return d;
  }
  if (conflicting != nullptr) {
    const PeerFacts& first = *reporting.front();
    return Wait(WaitKind::kConflict,
                fmt::format("peers report different clusters: {} is in cluster {} and {} in cluster {}; "
                            "refusing to pick one",
                            first.name, IdToHex(first.cluster->cluster_id), conflicting->name,
                            IdToHex(conflicting->cluster->cluster_id)));
  }
  if (!reporting.empty()) return PlanWithCluster(input, MergeViews(reporting));
  return PlanWithoutCluster(input);
}

const char* ActionName(Action action) {
  switch (action) {
    case Action::kRestart:
      return "restart";
    case Action::kJoin:
      return "join";
    case Action::kLateInitial:
      return "late-initial";
    case Action::kReplace:
      return "replace";
    case Action::kNew:
      return "new";
    case Action::kWait:
      return "wait";
  }
  return "unknown";
}

RestoreDecision PlanRestore(const RestoreFacts& f) {
  // Rule 7a: this node finished this very restore before (killed after it, or restarted since).
  if (f.restored_from == f.backup_url && f.restored_token == f.new_token && f.has_local_data) {
    return {RestoreAction::kAlreadyRestored,
            fmt::format("this node was restored from {} with token {}: starting on that data", f.backup_url,
                        f.new_token)};
  }
  // Rule 7b: the old token would give the restored members the old IDs, and old members that
  // missed the restore could rejoin a cluster they do not belong to. A restore this node began with
  // this backup and token passed this check before its first step; the bucket it may have written
  // since holds the new token and is no old cluster's, so it goes on.
  if (!f.restoring && !f.old_token.empty() && f.old_token == f.new_token) {
    return {RestoreAction::kRefuseInput,
            fmt::format("--initial-cluster-token {} is the token of the cluster this node's data comes from; a "
                        "restore needs a new one, the same on every node, so no old member can rejoin",
                        f.new_token)};
  }
  // Rule 7c: a restore over a working cluster loses every write since the backup.
  if (!f.old_leaders.empty() && !f.force) {
    return {RestoreAction::kRefuseLive,
            fmt::format("the old cluster still has a live quorum ({} report a leader): restoring over it would "
                        "lose every write since the backup; stop its members first, or give --force",
                        fmt::format("{}", fmt::join(f.old_leaders, ", ")))};
  }
  std::string forced = f.old_leaders.empty() ? "no member of the old cluster has a leader"
                                             : "--force given although the old cluster has a leader";
  return {RestoreAction::kRestore,
          fmt::format("restoring {} as a new cluster with token {}: {}", f.backup_url, f.new_token, forced)};
}

}  // namespace quorate
