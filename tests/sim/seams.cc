// The seams of the real code, implemented on the simulated world: the clock, the peers, the etcd
// client, the process launcher and a discovery provider. Each call parks its thread at the driver
// for the call's simulated latency, then reads or changes the world.
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include "node/member_remove.h"
#include "quorate/provider.h"
#include "world.h"

namespace quorate::sim {

World* g_world = nullptr;

namespace {

using std::chrono::milliseconds;

class SimClock : public Clock {
 public:
  explicit SimClock(World& w) : w_(w) {}
  TimePoint Now() override { return w_.Now(); }
  Result<int> Poll(std::span<pollfd> fds, TimePoint deadline) override {
    std::vector<pollfd> copy(fds.begin(), fds.end());
    bool any_fd = std::any_of(copy.begin(), copy.end(), [](const pollfd& p) { return p.fd >= 0; });
    if (!any_fd && deadline == kNever) return Status::FailedPrecondition("sim: waiting forever on nothing");
    if (!w_.Yield({Wait::kFds, deadline, copy})) return Status::Cancelled("sim: killed");
    int n = ::poll(fds.data(), fds.size(), 0);
    return n < 0 ? 0 : n;
  }

 private:
  World& w_;
};

class SimPeers : public Peers {
 public:
  SimPeers(World& w, int node) : w_(w), node_(node) {}
  PeerFacts Ask(const Member& peer) override { return w_.Ask(node_, peer); }
  Result<ClusterView> Probe(const std::string& peer_url, milliseconds timeout) override {
    return w_.Probe(node_, peer_url, timeout);
  }

 private:
  World& w_;
  int node_;
};

Status Killed() { return Status::Unavailable("sim: the calling process was killed"); }

// etcd's gRPC API as a client at node `from_` meets it: the first endpoint that answers (learners
// refuse the calls, as they do in etcd), and the membership rules of etcd's server.
class SimClient : public EtcdClient {
 public:
  SimClient(World& w, int from, int gen, bool maintainer, const EtcdClientOptions& options)
      : w_(w), from_(from), gen_(gen), maintainer_(maintainer), endpoints_(options.endpoints), timeout_(options.timeout) {}

  // Served from the member's own copy of the membership, which may lag the committed one. The
  // maintenance round's facts begin with it.
  Result<MemberListing> MemberList() override {
    if (maintainer_) w_.MaintenanceLook(from_);
    auto t = Reach();
    if (!t.ok()) return t.status();
    return MemberListing{w_.ClusterOf(*t)->id, w_.nodes[*t]->etcd.id, w_.SerializableListing(*t)};
  }
  // Made right after a linearizable read through the leader: every committed change.
  Result<MemberListing> MemberListLinearizable() override {
    auto t = Reach();
    if (!t.ok()) return t.status();
    return Listing(*t);
  }

  Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                  MemberId* added) override {
    auto t = Reach([&](SimCluster& c) { w_.CheckAddRequest(from_, c, peer_urls, is_learner); });
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    if (from_ >= 0 && w_.nodes[from_]->removed_in_gen == gen_ && SharesUrl(peer_urls, {w_.nodes[from_]->peer_url})) {
      w_.Fail(Check::kReAdded, fmt::format("{} adds itself again in the quorate process that ran etcd when the operator removed it "
                          "(rule 1b: a removal is never undone by itself)",
                          w_.nodes[from_]->name));
    }
    for (const auto& m : c.members) {
      if (SharesUrl(m.peer_urls, peer_urls)) return Status::FailedPrecondition("etcdserver: Peer URLs already exists");
    }
    if (w_.strict() && !Healthy(c)) {
      return Status::Unavailable("etcdserver: unhealthy cluster").With(Reason::kUnhealthyCluster);
    }
    if (std::any_of(c.members.begin(), c.members.end(), [](const ClusterMember& m) { return m.is_learner; })) {
      return Status::Unavailable("etcdserver: too many learner members in cluster").With(Reason::kTooManyLearners);
    }
    MemberId id = ComputeMemberId(peer_urls, fmt::format("added-{}-{}", c.id, ++c.adds));
    c.members.push_back({id, "", peer_urls, {}, is_learner});
    c.catch_up[id] = w_.rng().Between(milliseconds(200), milliseconds(4000));
    w_.Changed(c);
    w_.Event(fmt::format("MemberAdd {} {} by {}", IdToHex(id), fmt::join(peer_urls, ","), Who()));
    if (added != nullptr) *added = id;
    if (is_learner) w_.LearnerAdded(peer_urls);
    MemberListing listing{c.id, w_.nodes[*t]->etcd.id, c.members};
    if (Status lost = AnswerLost("member add"); !lost.ok()) return lost;
    return listing;
  }

  Status MemberRemove(MemberId id) override {
    auto t = Reach([&](SimCluster& c) {
      if (maintainer_) {
        w_.CheckMaintainerLeads(from_, "MemberRemove " + IdToHex(id));
        w_.CheckMaintenanceRemoval(from_, c, id);
      } else {
        w_.CheckRemoveRequest(from_, c, id);
      }
    });
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    auto it = Find(c, id);
    if (it == c.members.end()) {
      w_.Mark("MemberRemove finds the member gone");
      return Status::NotFound("etcdserver: member not found");
    }
    if (maintainer_) w_.Mark(it->is_learner ? "maintenance removed a learner" : "maintenance removed a voter");
    // M6's removal of a learner whose etcd runs under its quorate: M6's record has that node join
    // again (DESIGN §12 M6), where the operator's removal holds it.
    if (maintainer_ && it->is_learner) {
      for (auto& n : w_.nodes) {
        if (n->data_member == id && n->etcd.running && n->proc && n->proc->etcd_ran) {
          w_.Mark("maintenance removed a learner whose etcd runs");
        }
      }
    }
    if (w_.strict() && !it->is_learner && !EnoughStartedAfter(c, id, false)) {
      return Status::Unavailable("etcdserver: re-configuration failed due to not enough started members")
          .With(Reason::kNotEnoughStarted);
    }
    w_.Mark(it->is_learner ? "a learner removed" : "a voter removed");
    c.members.erase(it);
    w_.Changed(c);
    w_.Event(fmt::format("MemberRemove {} by {}", IdToHex(id), Who()));
    if (from_ < 0) {
      for (auto& n : w_.nodes) {
        if (n->data_member != id) continue;
        n->removed_under = id;
        if (n->proc && n->proc->etcd_ran) n->removed_in_gen = n->proc->gen;
      }
    }
    return AnswerLost("member remove");
  }

  Status MemberPromote(MemberId id) override {
    auto t = Reach([&](SimCluster& c) { w_.CheckPromoteRequest(from_, c, id); });
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    auto it = Find(c, id);
    if (it == c.members.end()) return Status::NotFound("etcdserver: member not found");
    if (!it->is_learner) return Status::FailedPrecondition("etcdserver: can only promote a learner member");
    if (std::find(c.caught_up.begin(), c.caught_up.end(), id) == c.caught_up.end()) {
      return Status::Unavailable("etcdserver: can only promote a learner member which is in sync with leader")
          .With(Reason::kLearnerNotReady);
    }
    // etcd checks the learner's progress whatever --strict-reconfig-check says; only this one is strict's.
    if (w_.strict() && !EnoughStartedAfter(c, id, true)) {
      return Status::Unavailable("etcdserver: re-configuration failed due to not enough started members")
          .With(Reason::kNotEnoughStarted);
    }
    it->is_learner = false;
    w_.Changed(c);
    w_.Event(fmt::format("MemberPromote {} by {}", IdToHex(id), Who()));
    return AnswerLost("member promote");
  }

  Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) override {
    auto t = Reach();
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    auto it = Find(c, id);
    if (it == c.members.end()) return Status::NotFound("etcdserver: member not found");
    it->peer_urls = peer_urls;
    w_.Changed(c);
    w_.Event(fmt::format("MemberUpdate {} by {}", IdToHex(id), Who()));
    return AnswerLost("member update");
  }

  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override {
    int k = w_.NodeByClientUrl(endpoint);
    bool reachable = k >= 0 && w_.Reach(from_, k);
    if (!w_.Sleep(reachable ? w_.rng().Between(milliseconds(1), milliseconds(20)) : timeout_)) return Killed();
    const bool own = maintainer_ && from_ >= 0 && k == from_;
    if (own) w_.nodes[from_]->maintainer_told_leader = false;
    if (k < 0 || !w_.Reach(from_, k) || !w_.Serves(k)) return Status::Unavailable(endpoint + ": connection refused");
    const Node& n = *w_.nodes[k];
    SimCluster* c = w_.ClusterOf(k);
    if (maintainer_ && from_ >= 0 && c != nullptr) {
      // The round's member list is older than the member that answers here: a node that replaced
      // the listed one at the same URLs (§12's gate must not count it as the listed member).
      const TimePoint look = w_.nodes[from_]->maintenance_look_at;
      const bool added_since = std::none_of(c->history.begin(), c->history.end(), [&](const auto& h) {
        return h.first <= look && std::any_of(h.second.begin(), h.second.end(),
                                              [&](const ClusterMember& m) { return m.id == n.etcd.id; });
      });
      if (added_since) w_.Mark("a maintenance round's status answered by a member added since its list");
    }
    EndpointStatus st;
    st.endpoint = endpoint;
    st.member_id = n.etcd.id;
    if (int leader = w_.LeaderSeenBy(k); leader >= 0) {
      st.leader = w_.nodes[leader]->etcd.id;
      st.raft_index = c->raft_index;
    }
    if (own) w_.nodes[from_]->maintainer_told_leader = st.leader != 0 && st.leader == n.etcd.id;
    if (c != nullptr) {
      auto it = Find(*c, n.etcd.id);
      st.is_learner = it != c->members.end() && it->is_learner;
      st.revision = c->revision;
      st.raft_applied_index = n.applied;
      st.db_size = n.db_size;
      st.db_size_in_use = std::min(n.db_size, w_.InUse(*c));
      for (MemberId id : c->nospace) st.errors.push_back(fmt::format("memberID:{} alarm:NOSPACE", id));
    }
    return st;
  }

  // Keys as a quorum commits them (rule M6's records): written and read through the leader.
  Status Put(const std::string& key, const std::string& value) override {
    auto t = Reach();
    if (!t.ok()) return t.status();
    w_.ClusterOf(*t)->keys[key] = value;
    return Status::Ok();
  }
  Result<std::optional<std::string>> Get(const std::string& key) override {
    auto t = Reach();
    if (!t.ok()) return t.status();
    const auto& keys = w_.ClusterOf(*t)->keys;
    auto it = keys.find(key);
    if (it == keys.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Result<std::vector<KeyValue>> GetPrefix(const std::string&) override { return NoKeys(); }
  Result<bool> PutIfAbsent(const std::string&, const std::string&) override { return NoKeys(); }
  // The database as maintenance (§12) meets it: sizes, revisions and alarms, no keys.
  Result<std::vector<EtcdAlarm>> AlarmList() override {
    auto t = Reach();
    if (!t.ok()) return t.status();
    std::vector<EtcdAlarm> alarms;
    for (MemberId id : w_.ClusterOf(*t)->nospace) alarms.push_back({id, AlarmKind::kNoSpace});
    return alarms;
  }

  Status AlarmDisarm(const EtcdAlarm& alarm) override {
    auto t = Reach([&](SimCluster& c) {
      if (maintainer_) w_.CheckMaintainerLeads(from_, "to disarm NOSPACE");
      w_.CheckDisarmRequest(c);
    });
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    if (std::erase(c.nospace, alarm.member_id) > 0) {
      w_.Event(fmt::format("NOSPACE of {} disarmed by {}", IdToHex(alarm.member_id), Who()));
      if (std::none_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == alarm.member_id; })) {
        w_.Mark("the NOSPACE alarm of a removed member disarmed");
      }
      if (c.nospace.empty()) {
        w_.Mark("NOSPACE disarmed");
        if (c.disarmed_before) w_.Mark("NOSPACE disarmed again");
        c.disarmed_before = true;
      }
    }
    return AnswerLost("alarm disarm");
  }

  // Through raft, as etcd does it; answered once the backend freed the history (physical).
  Status Compact(int64_t revision) override {
    auto t = Reach([&](SimCluster&) {
      if (maintainer_) w_.CheckMaintainerLeads(from_, fmt::format("to compact up to revision {}", revision));
    });
    if (!t.ok()) return t.status();
    SimCluster& c = *w_.ClusterOf(*t);
    if (revision <= c.compacted) {
      return Status::FailedPrecondition("etcdserver: mvcc: required revision has been compacted").With(Reason::kCompacted);
    }
    if (revision > c.revision) return Status::FailedPrecondition("etcdserver: mvcc: required revision is a future revision");
    c.compacted = revision;
    w_.Event(fmt::format("compaction up to revision {} by {}", revision, Who()));
    w_.Mark("the history compacted");
    return AnswerLost("compact");
  }

  // One member's, not through raft: it serves nothing until done, and finishes whatever becomes of
  // the caller. The answer comes back only if the caller can still be reached.
  Status Defragment(const std::string& endpoint, milliseconds timeout) override {
    int k = w_.NodeByClientUrl(endpoint);
    if (!w_.Sleep(w_.rng().Between(milliseconds(1), milliseconds(20)))) return Killed();
    if (k < 0 || !w_.Reach(from_, k) || !w_.Serves(k)) return Status::Unavailable(endpoint + ": connection refused");
    if (maintainer_) w_.CheckMaintainerLeads(from_, "to defragment " + endpoint);
    w_.CheckDefragRequest(from_, k);
    std::shared_ptr<Child> child = w_.nodes[k]->etcd.child;
    const Duration took = w_.StartDefrag(k);
    if (!w_.Sleep(std::min<Duration>(took, timeout))) return Killed();
    if (took > timeout) return Status::DeadlineExceeded(endpoint + ": defragment: context deadline exceeded");
    if (w_.nodes[k]->etcd.child != child || !w_.nodes[k]->etcd.running) {
      return Status::Unavailable(endpoint + ": the connection closed: etcd exited while it defragmented");
    }
    if (!w_.Reach(from_, k)) return Status::Unavailable(endpoint + ": defragment: no answer");
    return Status::Ok();
  }

 private:
  static Status NoKeys() { return Status::Internal("the simulated etcd keeps no keys"); }
  std::string Who() const { return from_ < 0 ? "the operator" : w_.nodes[from_]->name; }

  static std::vector<ClusterMember>::iterator Find(SimCluster& c, MemberId id) {
    return std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == id; });
  }

  // The node whose etcd serves the call, after the call's latency; an error when none does.
  // `asked`: sees the request as it reaches a member, before that member's leader (if it has one)
  // takes it, so a request is checked whether or not a quorum could serve it.
  Result<int> Reach(const std::function<void(SimCluster&)>& asked = nullptr) {
    auto target = w_.PickEndpoint(from_, endpoints_, timeout_);
    if (target.node < 0) return target.error;
    if (asked) asked(*w_.ClusterOf(target.node));
    if (!w_.InQuorum(target.node)) {
      if (!w_.Sleep(timeout_)) return Killed();
      return Status::Unavailable(fmt::format("{}: etcdserver: request timed out", w_.nodes[target.node]->client_url));
    }
    if (!w_.Sleep(w_.rng().Between(milliseconds(1), milliseconds(30)))) return Killed();
    if (!w_.Serves(target.node) || !w_.Reach(from_, target.node) || !w_.InQuorum(target.node)) {
      return Status::Unavailable(fmt::format("{}: etcdserver: leader changed", w_.nodes[target.node]->client_url))
          .With(Reason::kOutcomeUnknown);
    }
    return target.node;
  }

  Result<MemberListing> Listing(int node) {
    SimCluster& c = *w_.ClusterOf(node);
    return MemberListing{c.id, w_.nodes[node]->etcd.id, c.members};
  }

  // etcd 3.4 refuses MemberAdd unless every voter has been connected to the leader for 5 s
  // (HealthInterval); 3.5.30 only unless quorum would still hold. Both are --strict-reconfig-check's.
  bool Healthy(const SimCluster& c) {
    size_t voters = 0, healthy = 0;
    for (const auto& m : c.members) {
      if (m.is_learner) continue;
      ++voters;
      for (const auto& n : w_.nodes) {
        if (n->etcd.running && n->etcd.id == m.id && n->etcd.cluster_id == c.id && n->etcd.connected &&
            w_.Now() - n->etcd.connected_since >= std::chrono::seconds(5)) {
          ++healthy;
        }
      }
    }
    return w_.etcd35() ? healthy >= voters / 2 + 1 : healthy == voters;
  }

  // etcd's strict reconfiguration check (off with --strict-reconfig-check=false): after removing (or
  // promoting) `id`, the voters connected to the leader are still a majority of the voters.
  bool EnoughStartedAfter(const SimCluster& c, MemberId id, bool promote) {
    size_t voters = 0, connected = 0;
    for (const auto& m : c.members) {
      bool voter = !m.is_learner || (promote && m.id == id);
      if (!voter || (!promote && m.id == id)) continue;
      ++voters;
      for (const auto& n : w_.nodes) {
        if (n->etcd.running && n->etcd.id == m.id && n->etcd.cluster_id == c.id && n->etcd.connected) ++connected;
      }
    }
    return connected >= voters / 2 + 1;
  }

  // A change the cluster made whose answer the network lost: the caller cannot tell it happened.
  Status AnswerLost(const char* what) {
    w_.AfterChange();
    if (!w_.FaultsOn() || !w_.rng().Chance(w_.drop_rate())) return Status::Ok();
    if (!w_.Sleep(timeout_)) return Killed();
    return Status::Unavailable(fmt::format("{}: no answer, so it may or may not have been done", what))
        .With(Reason::kOutcomeUnknown);
  }

  World& w_;
  int from_;
  int gen_;
  bool maintainer_;
  std::vector<std::string> endpoints_;
  milliseconds timeout_;
};

class SimChild : public ChildProcess {
 public:
  SimChild(World& w, int node, std::shared_ptr<Child> child) : w_(w), node_(node), child_(std::move(child)) {}
  pid_t pid() const override { return child_->pid; }
  int exit_fd() const override { return child_->exit_fd; }
  std::optional<ExitStatus> exit_status() const override { return seen_; }
  Status Signal(int signal) override {
    if (seen_) return Status::FailedPrecondition("sim: the child has exited");
    w_.SignalEtcd(node_, child_, signal);
    return Status::Ok();
  }
  Result<std::optional<ExitStatus>> Poll() override {
    seen_ = child_->exited;
    return seen_;
  }

 private:
  World& w_;
  int node_;
  std::shared_ptr<Child> child_;
  std::optional<ExitStatus> seen_;
};

class SimLauncher : public ProcessLauncher {
 public:
  SimLauncher(World& w, int node) : w_(w), node_(node) {}
  Result<std::unique_ptr<ChildProcess>> Start(const LaunchSpec& spec) override { return w_.StartEtcd(node_, spec); }

 private:
  World& w_;
  int node_;
};

class SimProvider : public DiscoveryProvider {
 public:
  explicit SimProvider(int node) : node_(node) {}
  Result<std::vector<Member>> Discover() override { return g_world->Discover(node_, &whole_group_); }
  bool ListsWholeGroup() const override { return whole_group_; }
  std::string Describe() const override { return "the simulated discovery"; }

 private:
  int node_;
  bool whole_group_ = false;
};

const RegisterProvider kRegisterSim("sim", [](ProviderParams& params) -> Result<std::unique_ptr<DiscoveryProvider>> {
  auto node = params.TakeRequired("node");
  if (!node.ok()) return node.status();
  if (Status s = params.CheckAllTaken({"node"}); !s.ok()) return s;
  return std::unique_ptr<DiscoveryProvider>(new SimProvider(std::stoi(*node)));
});

}  // namespace

std::unique_ptr<Clock> MakeSimClock(World& w) { return std::make_unique<SimClock>(w); }
std::unique_ptr<Peers> MakeSimPeers(World& w, int node) { return std::make_unique<SimPeers>(w, node); }
std::unique_ptr<ProcessLauncher> MakeSimLauncher(World& w, int node) { return std::make_unique<SimLauncher>(w, node); }
std::unique_ptr<ChildProcess> MakeSimChild(World& w, int node, std::shared_ptr<Child> child) {
  return std::make_unique<SimChild>(w, node, std::move(child));
}

EtcdClientFactory World::ClientFactory(int from, int gen, bool maintainer) {
  return [this, from, gen, maintainer](const EtcdClientOptions& options) -> std::unique_ptr<EtcdClient> {
    return std::make_unique<SimClient>(*this, from, gen, maintainer, options);
  };
}

// A report for `quorate member remove`'s lines, which the simulation only logs.
class OperatorReport : public RemovalReport {
 public:
  explicit OperatorReport(World& w) : w_(w) {}
  void Handled(ClusterId, const ClusterMember& member, Outcome) override {
    w_.Event("operator: member remove " + member.name + " done");
  }
  void NotAMember(ClusterId, const std::string& arg) override { w_.Event("operator: " + arg + " is not a member"); }

 private:
  World& w_;
};

Status OperatorRemoves(World& w, Clock& clock, const std::string& name) {
  std::vector<std::string> endpoints;
  for (const auto& n : w.nodes) endpoints.push_back(n->client_url);
  auto client = w.ClientFactory(-1, 0)({endpoints, {}, std::chrono::milliseconds(5000)});
  OperatorReport report(w);
  RemoveOptions options;
  return RemoveMembers(clock, *client, *client, {name}, options, report);
}

}  // namespace quorate::sim
