#include "node/init.h"

#include <dirent.h>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "core/bucket.h"
#include "core/maintenance.h"
#include "etcd/etcd_config.h"
#include "etcd/etcd_version.h"
#include "etcd/etcd_wal.h"
#include "node/etcd_binary.h"
#include "node/rotation.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "quorate/text.h"
#include "store/sealed_bucket.h"

namespace quorate {
namespace {

std::string Join(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

// How long the member list of rule 1b may take: a cluster without quorum refuses it at once (no
// leader), so this bounds only a slow one.
constexpr auto kQuorumViewTimeout = std::chrono::seconds(2);
// The first wait for peers not ready yet (Decide), doubling up to kDiscoveryPollInterval.
constexpr auto kFirstAskAgain = std::chrono::milliseconds(30);
// How long a node with data gives its one call of discovery (DESIGN §3).
constexpr auto kDiscoveryBudgetWithData = std::chrono::seconds(5);

// True when a peer's view is of the cluster our WAL names and does not list our member: only the
// quorum view tells a removal from a view still being rebuilt (rule 1b).
bool ViewsLackUs(const PlanInput& input) {
  if (!input.local) return false;
  for (const auto& p : input.peers) {
    if (!p.cluster || p.cluster->cluster_id != input.local->cluster_id) continue;
    bool listed = false;
    for (const auto& m : p.cluster->members) listed |= m.id == input.local->member_id;
    if (!listed) return true;
  }
  return false;
}

bool Lists(const ClusterView& view, MemberId member) {
  return std::any_of(view.members.begin(), view.members.end(), [&](const ClusterMember& m) { return m.id == member; });
}

// Whether the value at LearnerRemovalKey is rule M6's record of a removal it asked: one marked
// abandoned (etcd refused it), or not M6's JSON at all, is none.
bool RecordsRemoval(const std::string& value) {
  auto doc = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("state") || !doc["state"].is_string()) {
    spdlog::warn("the record of rule M6 read is not its JSON, so taken for none: {}", Printable(value, 200));
    return false;
  }
  return doc["state"].get<std::string>() == kLearnerRemoving;
}

// The client URLs of the members the peers list as started: where the quorum view is asked.
std::vector<std::string> ListedClientUrls(const PlanInput& input) {
  std::vector<std::string> urls;
  for (const auto& p : input.peers) {
    if (!p.cluster) continue;
    for (const auto& m : p.cluster->members) {
      for (const auto& u : m.client_urls) {
        if (std::find(urls.begin(), urls.end(), u) == urls.end()) urls.push_back(u);
      }
    }
  }
  return urls;
}

// How long the peer URL of a member outside the expected set is given to answer.
constexpr auto kOutsiderProbeTimeout = std::chrono::seconds(1);

// The members the peers' views list at no expected member's peer URLs, each asked at its own: rule
// 9's departed instances are silent at every one (Probe is Unavailable only when nothing answers),
// and one that answers as etcd is a voter to count (a node outside the set that joined by rule 2).
struct Outsiders {
  std::vector<MemberId> silent;
  std::vector<MemberId> answering;
};
// The views of the membership a decision has: the peers' etcds', and rule 1b's hold's (the member
// list read with quorum when the removal was found).
std::vector<const ClusterView*> ViewsOf(const PlanInput& input) {
  std::vector<const ClusterView*> views;
  for (const auto& p : input.peers) {
    if (p.cluster) views.push_back(&*p.cluster);
  }
  if (input.held_removal) views.push_back(&*input.held_removal);
  return views;
}

Outsiders AskOutsiders(Peers& peers, const PlanInput& input) {
  Outsiders out;
  std::vector<MemberId> asked;
  for (const ClusterView* view : ViewsOf(input)) {
    for (const auto& m : view->members) {
      if (std::find(asked.begin(), asked.end(), m.id) != asked.end()) continue;
      asked.push_back(m.id);
      bool in_group = false;
      for (const auto& e : input.expected.members()) in_group |= SharesUrl(e.peer_urls, m.peer_urls);
      if (in_group || m.peer_urls.empty()) continue;
      bool answers = false;
      bool as_etcd = false;
      for (const auto& url : m.peer_urls) {
        auto view = peers.Probe(url, kOutsiderProbeTimeout);
        answers |= view.ok() || !view.status().IsUnavailable();
        as_etcd |= view.ok();
      }
      if (!answers) out.silent.push_back(m.id);
      if (as_etcd) out.answering.push_back(m.id);
    }
  }
  return out;
}

// The health check before a restart with another etcd binary: which of the other expected members'
// etcds answer, and with what version. One at a time is etcd's rule for an upgrade; a member that
// is down as this one changes binary is said, so a rolling update that goes too fast shows.
std::string OtherVotersBefore(const PlanInput& input) {
  std::vector<std::string> answering, silent;
  for (const auto& p : input.peers) {
    if (!p.cluster) {
      silent.push_back(p.name);
    } else {
      answering.push_back(p.version ? fmt::format("{} {}", p.name, p.version->server.ToString()) : p.name);
    }
  }
  std::string text = fmt::format("{} of the {} other members answer ({})", answering.size(), input.peers.size(),
                                 Join(answering));
  if (!silent.empty()) {
    text += fmt::format("; {} do not: change one member at a time, each once the others are healthy", Join(silent));
  }
  return text;
}

spdlog::level::level_enum UpgradeCheckLevel(const PlanInput& input) {
  for (const auto& p : input.peers) {
    if (!p.cluster) return spdlog::level::warn;
  }
  return spdlog::level::info;
}

// A stop fd that woke a wait for something else (see StopSource) lets the wait go on.
bool StopConfirmed(const StopSource& stop) { return !stop.requested || stop.requested(); }

// Finds this node in the discovered set: by name, else by an advertised peer URL.
const Member* FindSelf(const std::vector<Member>& members, const Config& config) {
  for (const auto& m : members) {
    if (m.name == config.name) return &m;
  }
  for (const auto& m : members) {
    if (SharesUrl(m.peer_urls, config.initial_advertise_peer_urls)) return &m;
  }
  return nullptr;
}

// This node as it will advertise itself: flags win over discovery, but must agree with it, since
// etcd refuses to start when its advertised peer URLs differ from its --initial-cluster entry.
Result<Member> ResolveSelf(const std::vector<Member>& members, const Config& config) {
  Member self{config.name, config.initial_advertise_peer_urls, config.advertise_client_urls};
  const Member* found = FindSelf(members, config);
  if (found != nullptr) {
    if (!self.peer_urls.empty() && !SameUrlSet(self.peer_urls, found->peer_urls)) {
      return Status::InvalidArgument(fmt::format(
          "--initial-advertise-peer-urls {} differs from what discovery lists for '{}': {}; fix the flag or "
          "the discovery records",
          Join(self.peer_urls), found->name, Join(found->peer_urls)));
    }
    if (found->name != config.name) {
      return Status::InvalidArgument(fmt::format("--name {} differs from the name discovery gives {}: '{}'",
                                                 config.name, Join(found->peer_urls), found->name));
    }
    self.peer_urls = found->peer_urls;
    if (self.client_urls.empty()) self.client_urls = found->client_urls;
  }
  if (self.peer_urls.empty()) {
    std::vector<std::string> names;
    for (const auto& m : members) names.push_back(m.name);
    return Status::InvalidArgument(fmt::format(
        "member '{}' is not among the discovered members ({}) and --initial-advertise-peer-urls is not given",
        config.name, Join(names)));
  }
  if (self.client_urls.empty()) self.client_urls.push_back(DefaultClientUrl(*ParseUrl(self.peer_urls[0])));
  return self;
}

std::string DataStateName(DataState s) {
  switch (s) {
    case DataState::kEmpty:
      return "empty";
    case DataState::kHasData:
      return "has data";
    case DataState::kRunning:
      return "running";
    case DataState::kUnknown:
      break;
  }
  return "unknown";
}

std::string TimedOut(const Config& c, const std::string& what) {
  return fmt::format("timed out after --timeout {}s: {}",
                     std::chrono::duration_cast<std::chrono::seconds>(c.timeout).count(), what);
}

// The member set sealed in --bucket. Without a discovery fallback, waits for it to appear.
Result<std::optional<MemberSet>> ReadSealed(const Config& c, bool can_discover, Backoff& backoff,
                                            const StopSource& stop) {
  while (true) {
    auto sealed = ReadSealedBucket(c.bucket, c.initial_cluster_token);
    if (!sealed.ok()) return sealed.status();
    if (*sealed) return std::optional<MemberSet>((*sealed)->members);
    if (can_discover) {
      spdlog::info("--bucket {} has no member set for token '{}' yet: discovering instead", c.bucket,
                   c.initial_cluster_token);
      return std::optional<MemberSet>();
    }
    std::string missing = fmt::format("--bucket {} holds no member set for token '{}'", c.bucket, c.initial_cluster_token);
    switch (WaitOrStop(backoff, stop)) {
      case Backoff::kRetry:
        break;
      case Backoff::kDeadline:
        return Status::DeadlineExceeded(TimedOut(c, missing + "; run quorate cluster-init"));
      case Backoff::kStopped:
        return Status::Cancelled(fmt::format("stopped while waiting: {}; no membership change was under way", missing));
    }
  }
}

// During the move to TLS (§14) this member's phase is recorded before the MemberUpdate that follows
// it, so for a moment the membership may list it at the other twin than its phase says (and a
// restore of the state dir may put it further apart). The planner finds a member by its peer URLs:
// it is given the ones the views list under its name, when they are its own twins.
void AdoptListedTwins(PlanInput& input, const std::vector<std::string>& twins) {
  if (twins.empty()) return;
  for (const auto& p : input.peers) {
    if (!p.cluster) continue;
    for (const auto& m : p.cluster->members) {
      if (m.name != input.self.name || m.peer_urls.empty() || SameUrlSet(m.peer_urls, input.self.peer_urls)) continue;
      bool own = std::all_of(m.peer_urls.begin(), m.peer_urls.end(), [&](const std::string& u) {
        return std::find(twins.begin(), twins.end(), u) != twins.end();
      });
      if (!own) continue;
      spdlog::info("{} is listed at {}, its own twins in the move to TLS: taken as this member", input.self.name,
                   Join(m.peer_urls));
      input.self.peer_urls = m.peer_urls;
      return;
    }
  }
}

// The members a new bucket records: the discovered set, and this node beside it when it joins from
// outside it (rule 2), since a restart (rule 1) and `quorate upkeep` take their own member from there.
Result<MemberSet> BucketMembers(const MemberSet& expected, const Member& self) {
  if (expected.FindByName(self.name) != nullptr) return expected;
  std::vector<Member> members = expected.members();
  members.push_back(self);
  return MemberSet::Create(std::move(members), expected.token());
}

}  // namespace

bool HasEtcdData(const std::string& data_dir) {
  std::string wal = data_dir + "/member/wal";
  DIR* dir = opendir(wal.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".wal") == 0) found = true;
  }
  closedir(dir);
  return found;
}

struct InitJob::State {
  std::mutex mu;
  AgentState agent_state;
  bool etcd_ran = false;
  // Rule 1b's removal, once a majority said so: that member ID never comes back, so the hold stands
  // for its data even when the majority stops answering later. Its member list read with quorum is
  // what each later decision asks about: whether that cluster has lost a majority since.
  struct HeldRemoval {
    MemberId member = 0;
    ClusterView view;
  };
  std::optional<HeldRemoval> removed;
  // The same on a fresh start (not held): this member's data is never started on again.
  std::optional<MemberId> removed_fresh;
  // Our member IDs this process set out to replace (rule 4): rule 3 never starts `new` under one.
  std::set<MemberId> replaced;
  // What each peer's agent said of its data dir when it last answered (PeerFacts::empty_when_last_answered).
  std::map<std::string, DataState> agent_said;
  std::unique_ptr<AgentServer> agent;
  std::shared_ptr<void> agent_served;  // the serve_agent seam's handle, in place of `agent`
};

// What this node knows before asking any peer: its data, its stored bucket, the expected members.
struct InitJob::Local {
  bool has_data = false;
  std::optional<Bucket> stored;
  std::string token;
  Member self;
  MemberSet expected;
  // Discovery listed a whole scaling group just now (rule 9); never for a stored or sealed set.
  bool whole_group = false;
  // This node's phase of the move to TLS (§14), and its peer URLs' http and https twins (none at 0).
  PeerHttpsState https;
  std::vector<std::string> twins;
};

InitJob::InitJob(Config config, InitOptions options)
    : config_(std::move(config)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()),
      own_peers_(options_.peers != nullptr ? nullptr : MakePeers(config_)),
      peers_(options_.peers != nullptr ? *options_.peers : *own_peers_),
      state_(std::make_unique<State>()) {
  if (!options_.etcd_clients) options_.etcd_clients = MakeEtcdClient;
  if (!options_.is_own_address) options_.is_own_address = IsAddressOfThisMachine;
  if (!options_.etcd_version) options_.etcd_version = EtcdBinaryVersion;
  if (!options_.snapshot_sources) {
    const TlsFiles& client_tls = config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls;
    options_.snapshot_sources = RealSnapshotSources(client_tls, config_.backup_timeout);
  }
}

InitJob::~InitJob() = default;

void InitJob::SetRunning(bool running) {
  std::lock_guard lock(state_->mu);
  state_->agent_state.data_state = running ? DataState::kRunning : DataState::kHasData;
  state_->etcd_ran = state_->etcd_ran || running;
}

Result<InitJob::Local> InitJob::GatherLocal(Clock::TimePoint deadline) {
  const Config& c = config_;
  Local local;
  local.https = LoadPeerHttps(c.state_dir);
  // etcd would be started listening on https with no certificate to serve there.
  if (local.https.phase > 0 &&
      (c.peer_tls.cert_file.empty() || c.peer_tls.key_file.empty() || c.peer_tls.trusted_ca_file.empty())) {
    return Status::InvalidArgument(fmt::format(
        "{}/tls/peer-https.json: this member is at phase {} of the move to TLS; give --peer-trusted-ca-file, "
        "--peer-cert-file and --peer-key-file",
        c.state_dir, PeerHttpsPlan().PhaseName(local.https.phase)));
  }
  local.has_data = HasEtcdData(c.data_dir);
  // With --bucket the sealed member set may stand in for discovery entirely.
  std::unique_ptr<DiscoveryProvider> provider;
  bool has_discovery = !c.discovery.empty() || !c.initial_cluster.empty() || !c.discovery_srv.empty();
  if (has_discovery || c.bucket.empty()) {
    // The provider's calls are sockets, on real time whatever clock_ is. A node with data calls it
    // once and can do without it: an API that hangs or throttles (a provider retries throttling up
    // to its deadline) must not hold a restart for --timeout.
    const auto budget = local.has_data ? std::min<Clock::Duration>(c.timeout, kDiscoveryBudgetWithData) : c.timeout;
    auto created = ProviderFromConfig(c, std::chrono::steady_clock::now() + budget);
    if (!created.ok()) return created.status();
    provider = std::move(*created);
  }

  // With local data the stored bucket is enough: a restart must not depend on discovery being up.
  Status stored_corrupt;
  if (auto loaded = LoadBucket(c.state_dir); loaded.ok()) {
    local.stored = std::move(*loaded);
  } else if (!loaded.status().IsNotFound()) {
    stored_corrupt = loaded.status();
  }

  const bool has_data = local.has_data;
  // With data, one call of discovery and no retry: the stored bucket stands in when it fails.
  std::optional<std::vector<Member>> fresh;
  if (has_data && provider) {
    auto once = provider->Discover();
    if (once.ok()) fresh = std::move(*once);
  }
  std::vector<Member> discovered;
  if (has_data && local.stored && local.stored->members.FindByName(c.name) != nullptr) {
    // The bucket holds the peers' addresses as discovery gave them at our first decision; peers move
    // since (a cloud group replaces instances under new addresses), and asking only the old ones, a
    // removal of our member is never seen and etcd is restarted on it for ever. An answer that lists
    // us is newer.
    discovered = fresh && FindSelf(*fresh, c) != nullptr ? *fresh : local.stored->members.members();
  } else if (!c.bucket.empty() && !has_data) {
    Backoff backoff(clock_, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline, options_.stop.fd);
    auto sealed = ReadSealed(c, provider != nullptr, backoff, options_.stop);
    if (!sealed.ok()) return sealed.status();
    if (*sealed) {
      spdlog::info("using the member set sealed in --bucket {} ({} members)", c.bucket, (*sealed)->size());
      discovered = (*sealed)->members();
    }
  } else if (fresh) {
    discovered = std::move(*fresh);
  }
  if (discovered.empty() && !has_data) {
    Backoff backoff(clock_, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline, options_.stop.fd);
    while (true) {
      auto members = DiscoverExpected(*provider, c, backoff);
      if (members.ok()) {
        discovered = std::move(*members);
        local.whole_group = provider->ListsWholeGroup();
        if (local.whole_group) group_ = std::move(provider);
        break;
      }
      if (!members.status().IsCancelled()) return members.status();
      if (StopConfirmed(options_.stop)) {
        return Status::Cancelled(members.status().message() + "; no membership change was under way");
      }
    }
  }
  local.token = has_data && local.stored ? local.stored->members.token() : c.initial_cluster_token;

  if (has_data && (FindSelf(discovered, c) == nullptr || !c.initial_advertise_peer_urls.empty())) {
    // Restarting on our data needs only our own URLs: etcd ignores --initial-cluster then. The flags
    // win over the stored set, so a member whose address changed restarts at the new one, and
    // `run` tells the cluster with MemberUpdate.
    if (c.initial_advertise_peer_urls.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{} has etcd data but '{}' is not in the member bucket or discovery; give --initial-advertise-peer-urls",
          c.data_dir, c.name));
    }
    local.self = {c.name, c.initial_advertise_peer_urls, c.advertise_client_urls};
    if (local.self.client_urls.empty()) {
      local.self.client_urls.push_back(DefaultClientUrl(*ParseUrl(local.self.peer_urls[0])));
    }
    std::erase_if(discovered, [&](const Member& m) { return m.name == local.self.name; });
    discovered.push_back(local.self);
  } else {
    auto resolved = ResolveSelf(discovered, c);
    if (!resolved.ok()) return resolved.status();
    local.self = std::move(*resolved);
    for (auto& m : discovered) {
      if (m.name == local.self.name) m = local.self;
    }
  }
  // The move to TLS (§14): this member as the membership lists it at its phase, every other where it
  // listens (during the move both twins, the one it is listed at first, so a probe finds it at once;
  // the https ones once done): the flags and discovery keep the http URLs the cluster started with.
  if (local.https.phase > 0) {
    local.twins = PeerUrlsAtPhase(local.self.peer_urls, local.https.port, kHttpsPhaseBoth);
    local.self.peer_urls = AdvertisedPeerUrlsAtPhase(local.self.peer_urls, local.https.port, local.https.phase);
    for (auto& m : discovered) {
      m.peer_urls = m.name == local.self.name ? local.self.peer_urls
                                              : PeerUrlsAtPhase(m.peer_urls, local.https.port, local.https.phase);
    }
  }
  auto expected = MemberSet::Create(discovered, local.token);
  if (!expected.ok()) return expected.status().Prefixed(provider ? provider->Describe() : c.bucket);
  local.expected = std::move(*expected);

  // The input is valid from here on, so what cannot be used may be moved: aside, never away.
  if (!stored_corrupt.ok()) {
    auto moved = MoveAside(c.state_dir + "/" + kBucketFile, "corrupt");
    spdlog::warn("{}; not trusted{}", stored_corrupt.message(), moved.ok() ? ", moved aside to " + *moved : "");
  }
  // A member directory without a WAL is a half-made bootstrap etcd cannot start on.
  if (!has_data && PathExists(c.data_dir + "/member")) {
    auto moved = MoveAside(c.data_dir + "/member", "unusable");
    if (!moved.ok()) return moved.status();
    spdlog::info("moved {} aside to {}: it has no WAL, so etcd cannot start on it", c.data_dir + "/member", *moved);
  }
  return local;
}

Status InitJob::ServeAgent(const Local& local, const PlanInput& input) {
  const Config& c = config_;
  {
    std::lock_guard lock(state_->mu);
    state_->agent_state = AgentState{local.self,
                                     local.has_data ? DataState::kHasData : DataState::kEmpty,
                                     local.token,
                                     local.expected.cluster_id(),
                                     local.expected.IdOf(local.self),
                                     static_cast<uint32_t>(input.cluster_size),
                                     local.expected.InitialCluster()};
  }
  bool agent_needed =
      options_.agent_mode == AgentMode::kAlways || (!local.has_data && local.expected.size() > 1);
  if (state_->agent || state_->agent_served || !agent_needed || c.agent_listen.empty()) return Status::Ok();
  auto answer = [this] {
    std::lock_guard lock(state_->mu);
    AgentState& s = state_->agent_state;
    // A log only grows: read the WAL until it shows a leader's entry (rule 3's fact), then no more.
    if ((s.data_state == DataState::kHasData || s.data_state == DataState::kRunning) && !s.log_past_bootstrap) {
      return AnswerWithLog(s, ReadWalPastBootstrap(config_.data_dir));
    }
    return s;
  };
  if (options_.serve_agent) {
    state_->agent_served = options_.serve_agent(answer);
    return Status::Ok();
  }
  auto agent = AgentServer::Start(c.agent_listen, c.peer_tls, answer);
  if (!agent.ok()) return agent.status().Prefixed("--agent-listen");
  state_->agent = std::move(*agent);
  return Status::Ok();
}

Result<Decision> InitJob::Decide(PlanInput& input, const MemberSet& expected, const std::vector<std::string>& twins,
                                 Clock::TimePoint deadline) {
  // Nodes started together serve their agents a moment apart: the first asks again soon, doubling up
  // to the poll interval, so a bootstrap does not lose a whole interval to a peer a few ms late.
  Backoff backoff(clock_, kFirstAskAgain, kDiscoveryPollInterval, deadline, options_.stop.fd);
  // Rule 3's second look waits a whole interval: time for a peer's replay to mark its members started.
  Backoff second_look(clock_, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline, options_.stop.fd);
  std::string last_reason;
  // Rule 3's second look (Decision::look_again): the initial cluster the first look decided on.
  std::string first_look;
  while (true) {
    input.held_removal.reset();
    {
      std::lock_guard lock(state_->mu);
      if (state_->removed && input.local && state_->removed->member == input.local->member_id) {
        input.held_removal = state_->removed->view;
      }
    }
    input.peers = GatherFacts(peers_, expected, input.self.name);
    {
      std::lock_guard lock(state_->mu);
      for (PeerFacts& p : input.peers) {
        if (p.agent.reachable) {
          state_->agent_said[p.name] = p.agent.data_state;
        } else if (auto said = state_->agent_said.find(p.name); said != state_->agent_said.end()) {
          p.empty_when_last_answered = said->second == DataState::kEmpty;
        }
      }
    }
    // Whichever peer leads applies MemberAdd's check: strict if any of them is strict; with no peer
    // version known, as strict as the binary.
    input.member_add_needs_every_voter = false;
    bool any_version = false;
    for (const auto& p : input.peers) {
      if (!p.version) continue;
      any_version = true;
      input.member_add_needs_every_voter |= FeaturesOf(p.version->server).member_add_needs_every_voter;
    }
    if (!any_version && input.binary_version) {
      input.member_add_needs_every_voter = FeaturesOf(*input.binary_version).member_add_needs_every_voter;
    }
    for (const auto& p : input.peers) {
      spdlog::debug("{}: agent {} ({}), etcd {}", p.name, p.agent.reachable ? "answers" : "unreachable",
                    p.agent.reachable ? DataStateName(p.agent.data_state) : p.agent.error,
                    p.cluster ? "in cluster " + IdToHex(p.cluster->cluster_id) : "not answering");
    }
    if (Status moved = FollowMoveToHttps(input, expected, twins); !moved.ok()) return moved;
    bool removed_before = false;
    {
      std::lock_guard lock(state_->mu);
      removed_before = input.local && state_->removed_fresh == input.local->member_id;
    }
    input.silent_outsiders.clear();
    input.answering_outsiders.clear();
    if (!input.has_local_data || input.held_removal) {
      Outsiders outsiders = AskOutsiders(peers_, input);
      if (input.expected_is_whole_group) input.silent_outsiders = StillOutsideGroup(std::move(outsiders.silent), input);
      input.answering_outsiders = std::move(outsiders.answering);
    }
    input.quorum_view.reset();
    input.removed_by_learner_deadline = false;
    if (input.held_removal) {
      // Rule 1b's hold stands whatever the cluster says now; only whether it lost a majority since is asked.
      Decision held = Plan(input);
      if (options_.on_decision) options_.on_decision(held);
      return Status::Unavailable(held.reason);
    }
    if (input.has_local_data && (ViewsLackUs(input) || removed_before)) {
      const TlsFiles& client_tls = config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls;
      // Not cut by --timeout's deadline: the try due at the deadline must see what the others saw, or
      // it would fall back to rule 1 and start etcd on a removed member's data. kQuorumViewTimeout
      // bounds the overrun.
      auto client = options_.etcd_clients({ListedClientUrls(input), client_tls, kQuorumViewTimeout});
      auto listing = client->MemberListLinearizable();
      if (listing.ok()) {
        input.quorum_view = ClusterView{listing->cluster_id, listing->members};
      } else {
        spdlog::debug("no member list read with quorum, so no removal is concluded: {}", listing.status().message());
      }
      // Whose removal it was, when it was one: rule M6's leaves a record (§12), the operator's none.
      if (input.quorum_view && input.quorum_view->cluster_id == input.local->cluster_id &&
          !Lists(*input.quorum_view, input.local->member_id)) {
        auto record = client->Get(LearnerRemovalKey(input.local->member_id));
        if (!record.ok()) {
          spdlog::debug("rule M6's record not read, so no removal is concluded: {}", record.status().message());
          input.quorum_view.reset();
        } else {
          input.removed_by_learner_deadline = *record && RecordsRemoval(**record);
        }
      }
    }
    AdoptListedTwins(input, twins);
    {
      // Only what was seen before this decision: a view that lists us beside a quorum view that lacks
      // us is one that has not applied the removal yet, no sign of when it came.
      std::lock_guard lock(state_->mu);
      input.etcd_ran = state_->etcd_ran && input.local;
    }
    input.removed_before = removed_before;
    {
      std::lock_guard lock(state_->mu);
      input.replaced_here = state_->replaced;
    }
    Decision decision = Plan(input);
    bool removal_uncounted = false;
    if (decision.action == Action::kReplace && !input.quorum_view) {
      // Rule 4 removes a voter: counted again on a member list read with quorum (the peers' views may
      // predate a removal). None read: no quorum now, so the removal could not commit either, and the
      // views' count may be a removed member's (simulator seed 1334 of 3 nodes): nothing is asked.
      const TlsFiles& client_tls = config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls;
      auto listing = options_.etcd_clients({decision.endpoints, client_tls, kQuorumViewTimeout})->MemberListLinearizable();
      if (listing.ok()) {
        input.quorum_view = ClusterView{listing->cluster_id, listing->members};
        decision = Plan(input);
      } else {
        Decision wait;
        wait.wait = WaitKind::kPeersNotReady;
        wait.remove_id = decision.remove_id;
        wait.reason = fmt::format(
            "{}; but no member list could be read with quorum to count the voters on before member {} is removed "
            "({}), so nothing is removed yet",
            decision.reason, IdToHex(*decision.remove_id), listing.status().message());
        decision = std::move(wait);
        removal_uncounted = true;
      }
    }
    {
      std::lock_guard lock(state_->mu);
      // Before the removal is asked: once it may have gone through, a restart of etcd decides again
      // in this process on views that may predate that member's start.
      if (decision.action == Action::kReplace && decision.remove_id) state_->replaced.insert(*decision.remove_id);
      if (decision.data_removed && decision.wait != WaitKind::kRemoved) state_->removed_fresh = input.local->member_id;
    }
    if (options_.on_decision) options_.on_decision(decision);
    bool provisional = decision.look_again;
    if (decision.action != Action::kWait && (!provisional || first_look == decision.initial_cluster)) {
      return decision;
    }
    first_look = provisional ? decision.initial_cluster : "";
    if (provisional) {
      decision.reason = "no member has started yet, so looking once more before starting as a never-started "
                        "initial member: " + decision.reason;
    }
    // Not waited out here: `run` keeps etcd stopped and asks again, answering signals meanwhile.
    if (decision.wait == WaitKind::kRemoved) {
      std::lock_guard lock(state_->mu);
      if (input.local && input.quorum_view) state_->removed = State::HeldRemoval{input.local->member_id, *input.quorum_view};
      return Status::Unavailable(decision.reason);
    }
    // Rule 6: only another binary or another peer version cures it; `init` and the first start of
    // `run` end with this line, a restart under `run` is held and asks again.
    if (decision.wait == WaitKind::kVersion) return Status::FailedPrecondition(decision.reason);
    if (decision.reason != last_reason) {
      spdlog::info("waiting: {}", decision.reason);
      last_reason = decision.reason;
    }
    switch (WaitOrStop(provisional ? second_look : backoff, options_.stop)) {
      case Backoff::kRetry:
        break;
      case Backoff::kDeadline:
        if (removal_uncounted) {
          return Status::DeadlineExceeded(TimedOut(config_, fmt::format("{}: {}", decision.reason, kMajorityMayBeLost)))
              .With(Reason::kNoQuorumCommits);
        }
        return Status::DeadlineExceeded(TimedOut(config_, decision.reason));
      case Backoff::kStopped:
        return Status::Cancelled(
            fmt::format("stopped while waiting: {}; no membership change was under way", decision.reason));
    }
  }
}

// A node that lost its volume after the move to TLS (§14, rule H4) lost its phase with it, and its flags
// may still name the http peer URLs the cluster started with: its peers' etcds, listening on https
// only, are silent there while their agents answer that they run etcd, on another member set (their
// https twins hash to other IDs). The cluster says where it moved: once the move is done on every
// member, this node records itself at its last phase, and init starts again at the https twins.
Status InitJob::FollowMoveToHttps(const PlanInput& input, const MemberSet& expected,
                                  const std::vector<std::string>& twins) {
  const TlsFiles& peer_tls = config_.peer_tls;
  if (input.has_local_data || !twins.empty() || peer_tls.trusted_ca_file.empty() || peer_tls.cert_file.empty() ||
      peer_tls.key_file.empty()) {
    return Status::Ok();
  }
  const bool silent_but_running = std::any_of(input.peers.begin(), input.peers.end(), [&](const PeerFacts& p) {
    return p.agent.reachable && p.agent.data_state == DataState::kRunning &&
           p.agent.expected_cluster_id != expected.cluster_id();
  });
  if (!silent_but_running || std::any_of(input.peers.begin(), input.peers.end(), [](const PeerFacts& p) {
        return p.cluster.has_value();
      })) {
    return Status::Ok();
  }
  std::vector<std::string> urls;
  for (const auto& m : expected.members()) {
    if (m.name == input.self.name) continue;
    urls.insert(urls.end(), m.client_urls.begin(), m.client_urls.end());
  }
  const TlsFiles& client_tls = config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls;
  auto client = options_.etcd_clients({urls, client_tls, kQuorumViewTimeout});
  auto port = DonePeerHttpsPort(*client);
  if (!port.ok() || *port == 0) {
    spdlog::debug("peers run etcd on another member set, and no finished move to TLS says where: {}",
                  port.ok() ? "none done" : port.status().message());
    return Status::Ok();
  }
  if (Status s = SavePeerHttpsDone(config_.state_dir, *port); !s.ok()) return s;
  return Status::Unavailable(fmt::format("the cluster moved its peer URLs to https at port {} (`quorate tls to-https`, "
                                         "done on every member): {} takes its https twins, as its flags may not yet",
                                         *port, input.self.name))
      .With(Reason::kPeerUrlsMoved);
}

// Rule 9 judges a member departed by a listing of the group made after the member was added: one
// added since the first listing (by an instance that listing did not hold yet, whose etcd has not
// started) is silent and in no instance of it too, and removing it would undo that instance's join.
// So the group is listed again now, after the views that showed the members; a silent member at an
// instance of this listing is not departed, and none is when the group cannot be listed whole.
std::vector<MemberId> InitJob::StillOutsideGroup(std::vector<MemberId> silent, const PlanInput& input) {
  if (silent.empty()) return silent;
  auto listed = group_ != nullptr ? group_->Discover() : Result<std::vector<Member>>(Status::Internal("no group"));
  if (!listed.ok() || !group_->ListsWholeGroup()) {
    spdlog::info("the group is not listed whole again ({}), so no silent member outside it is taken for departed",
                 listed.ok() ? "a partial answer" : listed.status().message());
    return {};
  }
  std::erase_if(silent, [&](MemberId id) {
    for (const ClusterView* view : ViewsOf(input)) {
      for (const auto& m : view->members) {
        if (m.id != id) continue;
        for (const auto& instance : *listed) {
          if (!SharesUrl(instance.peer_urls, m.peer_urls)) continue;
          spdlog::info("member {} at {} is silent, but at instance {}, which the group lists now and did not when "
                       "first listed: it joined since, so it has not departed",
                       IdToHex(id), fmt::join(m.peer_urls, ","), instance.name);
          return true;
        }
        return false;
      }
    }
    return false;
  });
  return silent;
}

Result<InitOutcome> InitJob::Carry(const Local& local, const PlanInput& input, Decision decision,
                                   Clock::TimePoint deadline) {
  const Config& c = config_;
  const Member& self = local.self;
  ApplySeams seams{options_.etcd_clients, clock_, peers_, options_.is_own_address, options_.stop, {}};
  if (decision.action == Action::kNew) {
    if (Status s = WaitForFirstPeer(seams, local.expected, self); !s.ok()) return s;
  }
  MemberId member_id = local.expected.IdOf(self);
  if (decision.move_data_aside) {
    auto moved = MoveAside(c.data_dir + "/member", "removed");
    if (!moved.ok()) return moved.status();
    spdlog::info("moved {} aside to {}: it is the data of member {}, which the cluster removed", c.data_dir + "/member",
                 *moved, IdToHex(input.local->member_id));
  }
  if (!c.backup_to.empty()) {
    // A safety net, not a gate: a replacement that heals the cluster does not wait on a store.
    seams.before_remove = [&](EtcdClient& client) {
      auto backup = BackupBeforeChange(c, client, decision.endpoints, options_.snapshot_sources, deadline);
      if (backup.ok()) {
        spdlog::info("backup {} taken before removing member {}", (*backup)->url, IdToHex(*decision.remove_id));
      } else {
        spdlog::warn("no backup before removing member {}, removing it anyway: {}", IdToHex(*decision.remove_id),
                     backup.status().message());
      }
    };
  }
  if (decision.action == Action::kJoin || decision.action == Action::kReplace) {
    const TlsFiles& client_tls = c.etcdctl_tls.enabled() ? c.etcdctl_tls : c.client_tls;
    auto changed = ApplyMembershipChange(seams, client_tls, self, decision, deadline);
    if (!changed.ok()) return changed.status();
    decision.initial_cluster = changed->initial_cluster;
    member_id = changed->member_id;
  }

  InitOutcome out;
  out.decision = decision;
  out.self = self;
  out.member_id = member_id;
  out.cluster_id = decision.cluster_id.value_or(local.expected.cluster_id());
  out.initial_cluster = decision.initial_cluster;

  out.etcd_version = input.binary_version;
  out.cluster_version = ClusterVersion(VersionFactsOf(input));
  if (local.has_data && local.stored && local.stored->cluster.etcd_version && out.etcd_version &&
      *local.stored->cluster.etcd_version != *out.etcd_version) {
    out.version_change =
        fmt::format("{} to {}", local.stored->cluster.etcd_version->ToString(), out.etcd_version->ToString());
    spdlog::log(UpgradeCheckLevel(input), "etcd of {} changes from {}: {}", self.name, out.version_change,
                OtherVotersBefore(input));
  }

  if (Status s = MakeDirs(c.state_dir); !s.ok()) return s;
  std::optional<Bucket> bucket;
  if (!local.has_data || !local.stored) {
    auto members = BucketMembers(local.expected, self);
    if (!members.ok()) return members.status();
    bucket = Bucket{std::move(*members), {decision.initial_cluster_state, NowRfc3339()}};
  } else {
    bucket = local.stored;
  }
  // Done moving to TLS (§14): the bucket lists every member at its https peer URLs from now on.
  bool moved_to_https = false;
  if (local.has_data && local.stored && local.https.phase == kHttpsPhaseHttps) {
    std::vector<Member> members = bucket->members.members();
    for (auto& m : members) {
      auto https = PeerUrlsAtPhase(m.peer_urls, local.https.port, local.https.phase);
      moved_to_https |= https != m.peer_urls;
      m.peer_urls = std::move(https);
    }
    auto translated = MemberSet::Create(std::move(members), bucket->members.token());
    if (!translated.ok()) return translated.status().Prefixed(c.state_dir + "/" + kBucketFile);
    bucket->members = std::move(*translated);
  }
  if (out.etcd_version) bucket->cluster.etcd_version = out.etcd_version;
  bucket->cluster.cluster_version = out.cluster_version;
  // Saved when new or when a version moved: a restart with nothing new writes nothing. A record of
  // versions alone that cannot be written (a full disk) is a warning: the members in it are unchanged,
  // and the next start records them.
  if (!local.has_data || !local.stored) {
    if (Status s = SaveBucket(c.state_dir, *bucket); !s.ok()) return s;
  } else if (moved_to_https || local.stored->cluster.etcd_version != bucket->cluster.etcd_version ||
             local.stored->cluster.cluster_version != bucket->cluster.cluster_version) {
    if (Status s = SaveBucket(c.state_dir, *bucket); !s.ok()) {
      spdlog::warn("etcd versions or https peer URLs not recorded in the member bucket: {}", s.message());
    }
  }
  // During the move to TLS (§14) etcd listens on both twins, not only the one the membership lists.
  Config launch_config = c;
  if (local.https.phase > 0 && local.https.phase < kHttpsPhaseHttps && c.listen_peer_urls.empty()) {
    launch_config.listen_peer_urls = ListenFor(PeerUrlsAtPhase(local.twins, local.https.port, local.https.phase));
  }
  EtcdLaunch launch =
      MakeEtcdLaunch(launch_config, self, local.token, decision.initial_cluster, decision.initial_cluster_state);
  out.bucket_path = c.state_dir + "/" + kBucketFile;
  out.etcd_config_path = c.state_dir + "/" + kEtcdConfigFile;
  out.etcd_env_path = c.state_dir + "/" + kEtcdEnvFile;
  out.etcd_flags = RenderEtcdFlags(launch);
  if (out.etcd_version) out.etcd_flags = SpellEtcdArgs(out.etcd_flags, *out.etcd_version);
  // Written only when their content changes: a restart with nothing new needs no disk at all.
  for (const auto& [path, content] : {std::pair{out.etcd_config_path, RenderEtcdYaml(launch)},
                                      std::pair{out.etcd_env_path, RenderEtcdEnv(launch)}}) {
    auto written = WriteFileIfChanged(path, content);
    if (written.ok()) continue;
    if (options_.etcd_files_required) return written.status();
    spdlog::warn("not updated, etcd does not read it under quorate run: {}", written.status().message());
  }
  return out;
}

Result<InitOutcome> InitJob::Run() {
  const Config& c = config_;
  Clock::TimePoint deadline = clock_.Now() + c.timeout;
  // `etcd --version` forks and execs a Go binary, which took seconds on a loaded machine: asked
  // beside discovery and the agent's start, so the agent answers from the first moment (a peer that
  // finds it silent counts this node as unreachable and polls again), and only the decision, which
  // needs rule 6's facts, waits for it.
  auto binary = std::async(std::launch::async, options_.etcd_version, c.etcd_path).share();
  while (true) {
    auto outcome = RunUntil(deadline, binary);
    if (outcome.ok() || outcome.status().reason() != Reason::kPeerUrlsMoved) return outcome;
    spdlog::info("{}", outcome.status().message());
  }
}

Result<InitOutcome> InitJob::RunUntil(Clock::TimePoint deadline, std::shared_future<Result<EtcdVersion>> binary) {
  const Config& c = config_;
  auto local = GatherLocal(deadline);
  if (!local.ok()) return local.status();

  PlanInput input;
  input.self = local->self;
  input.expected = local->expected;
  input.cluster_size = c.cluster_size.value_or(local->expected.size());
  input.has_local_data = local->has_data;
  input.expected_is_whole_group = local->whole_group;
  if (local->has_data) {
    auto wal = ReadWalIdentity(c.data_dir);
    if (wal.ok()) {
      input.local = *wal;
    } else {
      spdlog::warn("cannot tell whose data {} holds, so a removal of this member goes unnoticed: {}", c.data_dir,
                   wal.status().message());
    }
  }
  if (local->stored) input.recorded_cluster_version = local->stored->cluster.cluster_version;
  if (Status s = ServeAgent(*local, input); !s.ok()) return s;
  if (auto version = binary.get(); version.ok()) {
    input.binary_version = *version;
  } else {
    // An init container need not hold etcd: the rules then go by the peers' versions alone.
    spdlog::info("etcd version unknown, upgrade rules checked without it: {}", version.status().message());
  }

  Backoff stale(clock_, kDiscoveryPollInterval, kDiscoveryPollInterval, deadline, options_.stop.fd);
  while (true) {
    auto decision = Decide(input, local->expected, local->twins, deadline);
    if (!decision.ok()) return decision.status();
    spdlog::info("decision: {}: {}", ActionName(decision->action), decision->reason);
    auto carried = Carry(*local, input, std::move(*decision), deadline);
    if (carried.ok() || carried.status().reason() != Reason::kStaleDecision) return carried;
    spdlog::info("{}", carried.status().message());
    switch (WaitOrStop(stale, options_.stop)) {
      case Backoff::kRetry:
        break;
      case Backoff::kDeadline:
        return carried;
      case Backoff::kStopped:
        return Status::Cancelled(carried.status().message() + "; stopped, and no membership change was made");
    }
    if (!HasEtcdData(config_.data_dir)) {  // a rule 1b join moved it aside before it met the change
      local->has_data = input.has_local_data = false;
      input.local.reset();
    }
  }
}

}  // namespace quorate
