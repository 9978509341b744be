#include "node/init.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "core/bucket.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_config.h"
#include "etcd/etcd_wal.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "etcd/peer_probe.h"
#include "store/sealed_bucket.h"

namespace quorate {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr auto kPeerCallTimeout = std::chrono::milliseconds(1000);

std::string Join(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Finds this node in the discovered set: by name, else by an advertised peer URL.
const Member* FindSelf(const std::vector<Member>& members, const Config& config) {
  for (const auto& m : members) {
    if (m.name == config.name) return &m;
  }
  for (const auto& m : members) {
    for (const auto& u : config.initial_advertise_peer_urls) {
      if (std::find(m.peer_urls.begin(), m.peer_urls.end(), u) != m.peer_urls.end()) return &m;
    }
  }
  return nullptr;
}

// This node as it will advertise itself: flags win over discovery, but must agree with it, since
// etcd refuses to start when its advertised peer URLs differ from its --initial-cluster entry.
Result<Member> ResolveSelf(const std::vector<Member>& members, const Config& config) {
  Member self{config.name, config.initial_advertise_peer_urls, config.advertise_client_urls};
  const Member* found = FindSelf(members, config);
  if (found != nullptr) {
    if (!self.peer_urls.empty() && Sorted(self.peer_urls) != Sorted(found->peer_urls)) {
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

// A member added with a peer URL that is not ours can never connect: refuse before MemberAdd.
// The URL must name an address of this machine, and no etcd may already answer there.
Status CheckPeerUrlIsOurs(const Member& self, const TlsFiles& peer_tls) {
  for (const auto& text : self.peer_urls) {
    auto url = ParseUrl(text);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = getaddrinfo(url->host.c_str(), nullptr, &hints, &found); rc != 0) {
      return Status::Unavailable(fmt::format("peer URL {}: cannot resolve {}: {}", text, url->host, gai_strerror(rc)));
    }
    bool local = false;
    for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
      int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      sockaddr_storage addr{};
      std::memcpy(&addr, a->ai_addr, a->ai_addrlen);
      // Port 0: only whether the address is ours matters, not whether etcd's port is free.
      if (a->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(&addr)->sin_port = 0;
      if (a->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = 0;
      local = bind(fd, reinterpret_cast<sockaddr*>(&addr), a->ai_addrlen) == 0;
      close(fd);
    }
    freeaddrinfo(found);
    if (!local) {
      return Status::InvalidArgument(fmt::format(
          "peer URL {} does not name an address of this machine; adding it would give the cluster a member that "
          "can never connect",
          text));
    }
    if (auto view = ProbeMembers(text, peer_tls, kPeerCallTimeout); view.ok() || !view.status().IsUnavailable()) {
      return Status::FailedPrecondition(
          fmt::format("something already answers at peer URL {}; refusing to add a member there", text));
    }
  }
  return Status::Ok();
}

struct MembershipChange {
  MemberId member_id = 0;
  std::string initial_cluster;
};

bool SharesPeerUrl(const ClusterMember& m, const Member& self) {
  for (const auto& u : m.peer_urls) {
    if (std::find(self.peer_urls.begin(), self.peer_urls.end(), u) != self.peer_urls.end()) return true;
  }
  return false;
}

// Replace and join (DESIGN §4 rules 2 and 4): remove the stale ID, add ourselves as a learner, and
// compute the --initial-cluster etcd needs to start `existing`. Each step tolerates having been done
// already, so a run killed half-way converges on the next one.
Result<MembershipChange> ChangeMembership(const Config& c, const Member& self, const Decision& d,
                                          SteadyClock::time_point deadline) {
  EtcdClientOptions options{d.endpoints, c.etcdctl_tls.enabled() ? c.etcdctl_tls : c.client_tls,
                            std::chrono::seconds(5)};
  auto client = MakeEtcdClient(options);
  auto backoff = std::chrono::milliseconds(500);
  auto retry = [&](const Status& s, const char* what) -> Status {
    if (!s.IsUnavailable()) return s;
    if (SteadyClock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format("timed out after --timeout waiting to {}: {}", what, s.message()));
    }
    spdlog::info("waiting to {}: {}", what, s.message());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(4000));
    return Status::Ok();
  };

  if (d.remove_id) {
    while (true) {
      Status s = client->MemberRemove(*d.remove_id);
      if (s.ok() || s.IsNotFound()) {
        spdlog::info("removed stale member {} of {} (its data is gone)", IdToHex(*d.remove_id), self.name);
        break;
      }
      if (Status r = retry(s, "remove the stale member"); !r.ok()) return r;
    }
  }
  MembershipChange change;
  Result<MemberListing> listing = Status::Internal("unset");
  if (d.add_member) {
    if (Status s = CheckPeerUrlIsOurs(self, c.peer_tls); !s.ok()) return s;
    while (true) {
      MemberId added = 0;
      listing = client->MemberAdd(self.peer_urls, /*is_learner=*/true, &added);
      if (listing.ok()) {
        spdlog::info("added {} as learner {}", self.name, IdToHex(added));
        break;
      }
      if (listing.status().code() == Status::Code::kFailedPrecondition) {
        // An earlier run added us and was killed before starting etcd.
        listing = client->MemberList();
        if (!listing.ok()) return listing.status();
        break;
      }
      if (Status r = retry(listing.status(), "add this member as a learner"); !r.ok()) return r;
    }
  } else {
    while (!(listing = client->MemberList()).ok()) {
      if (Status r = retry(listing.status(), "list the members"); !r.ok()) return r;
    }
  }
  std::vector<std::string> entries;
  for (const auto& m : listing->members) {
    bool is_self = SharesPeerUrl(m, self);
    if (is_self) change.member_id = m.id;
    std::string name = is_self ? self.name : (m.name.empty() ? IdToHex(m.id) : m.name);
    for (const auto& u : m.peer_urls) entries.push_back(name + "=" + u);
  }
  if (change.member_id == 0) {
    return Status::Unavailable(fmt::format("the cluster does not list {} after MemberAdd; run init again", self.name));
  }
  change.initial_cluster = fmt::format("{}", fmt::join(entries, ","));
  return change;
}

// The member set sealed in --bucket. Without a discovery fallback, waits for it to appear.
Result<std::optional<MemberSet>> ReadSealed(const Config& c, bool can_discover, SteadyClock::time_point deadline) {
  while (true) {
    auto sealed = ReadSealedBucket(c.bucket, c.initial_cluster_token);
    if (!sealed.ok()) return sealed.status();
    if (*sealed) return std::optional<MemberSet>((*sealed)->members);
    if (can_discover) {
      spdlog::info("--bucket {} has no member set for token '{}' yet: discovering instead", c.bucket,
                   c.initial_cluster_token);
      return std::optional<MemberSet>();
    }
    if (SteadyClock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format(
          "timed out after --timeout: --bucket {} holds no member set for token '{}'; run quorate cluster-init",
          c.bucket, c.initial_cluster_token));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// etcd 3.4, started `new` without a WAL, first asks the other members' peer URLs in sorted order,
// one second each, whether it was bootstrapped already (isMemberBootstrapped), and only then serves
// its own peer URL. An etcd busy with that check has its peer port open and answers nothing, so N
// etcds started at the same moment wait up to N-1 seconds for one another. Hence only the member
// owning the smallest peer URL (the first one every other etcd asks) starts at once; the others
// start once it answers GET /members, which takes its etcd milliseconds, as no peer etcd listens
// yet. Only the start is delayed, never the decision; after kFirstPeerWait this member starts anyway.
constexpr auto kFirstPeerWait = std::chrono::seconds(5);
constexpr auto kFirstPeerPoll = std::chrono::milliseconds(20);
constexpr auto kFirstPeerCallTimeout = std::chrono::milliseconds(200);

void WaitForFirstPeer(const Config& c, const MemberSet& expected, const Member& self) {
  const std::string* first = nullptr;
  for (const auto& m : expected.members()) {
    for (const auto& u : m.peer_urls) {
      if (first == nullptr || u < *first) first = &u;
    }
  }
  if (first == nullptr || std::find(self.peer_urls.begin(), self.peer_urls.end(), *first) != self.peer_urls.end()) {
    return;
  }
  spdlog::info("starting etcd once {} answers: it is the first peer URL every new etcd asks", *first);
  auto until = SteadyClock::now() + kFirstPeerWait;
  while (!ProbeMembers(*first, c.peer_tls, kFirstPeerCallTimeout).ok()) {
    if (SteadyClock::now() >= until) {
      spdlog::info("{} does not answer after {}s: starting etcd anyway", *first, kFirstPeerWait.count());
      return;
    }
    std::this_thread::sleep_for(kFirstPeerPoll);
  }
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
  std::unique_ptr<AgentServer> agent;
};

InitJob::InitJob(Config config, AgentMode agent_mode)
    : config_(std::move(config)), agent_mode_(agent_mode), state_(std::make_unique<State>()) {}
InitJob::~InitJob() = default;

void InitJob::SetRunning(bool running) {
  std::lock_guard lock(state_->mu);
  state_->agent_state.data_state = running ? DataState::kRunning : DataState::kHasData;
  state_->etcd_ran = state_->etcd_ran || running;
}

Result<InitOutcome> InitJob::Run() {
  const Config& c = config_;
  auto deadline = SteadyClock::now() + c.timeout;
  // With --bucket the sealed member set may stand in for discovery entirely.
  std::unique_ptr<DiscoveryProvider> provider;
  bool has_discovery = !c.discovery.empty() || !c.initial_cluster.empty() || !c.discovery_srv.empty();
  if (has_discovery || c.bucket.empty()) {
    auto created = ProviderFromConfig(c);
    if (!created.ok()) return created.status();
    provider = std::move(*created);
  }

  bool has_data = HasEtcdData(c.data_dir);
  // With local data the stored bucket is enough: a restart must not depend on discovery being up.
  std::optional<Bucket> stored;
  Status stored_corrupt;
  if (auto loaded = LoadBucket(c.state_dir); loaded.ok()) {
    stored = std::move(*loaded);
  } else if (!loaded.status().IsNotFound()) {
    stored_corrupt = loaded.status();
  }

  std::vector<Member> discovered;
  if (has_data && stored && stored->members.FindByName(c.name) != nullptr) {
    discovered = stored->members.members();
  } else if (!c.bucket.empty() && !has_data) {
    auto sealed = ReadSealed(c, provider != nullptr, deadline);
    if (!sealed.ok()) return sealed.status();
    if (*sealed) {
      spdlog::info("using the member set sealed in --bucket {} ({} members)", c.bucket, (*sealed)->size());
      discovered = (*sealed)->members();
    }
  } else if (has_data && provider) {
    auto once = provider->Discover();
    if (once.ok()) discovered = std::move(*once);
  }
  if (discovered.empty() && !has_data) {
    auto members = DiscoverExpected(*provider, c, deadline);
    if (!members.ok()) return members.status();
    discovered = std::move(*members);
  }
  const std::string& token = has_data && stored ? stored->members.token() : c.initial_cluster_token;

  Member self;
  if (has_data && (FindSelf(discovered, c) == nullptr || !c.initial_advertise_peer_urls.empty())) {
    // Restarting on our data needs only our own URLs: etcd ignores --initial-cluster then. The flags
    // win over the stored set, so a member whose address changed restarts at the new one, and
    // `run` tells the cluster with MemberUpdate.
    if (c.initial_advertise_peer_urls.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{} has etcd data but '{}' is not in the member bucket or discovery; give --initial-advertise-peer-urls",
          c.data_dir, c.name));
    }
    self = {c.name, c.initial_advertise_peer_urls, c.advertise_client_urls};
    if (self.client_urls.empty()) self.client_urls.push_back(DefaultClientUrl(*ParseUrl(self.peer_urls[0])));
    std::erase_if(discovered, [&](const Member& m) { return m.name == self.name; });
    discovered.push_back(self);
  } else {
    auto resolved = ResolveSelf(discovered, c);
    if (!resolved.ok()) return resolved.status();
    self = std::move(*resolved);
    for (auto& m : discovered) {
      if (m.name == self.name) m = self;
    }
  }
  auto expected = MemberSet::Create(discovered, token);
  if (!expected.ok()) return expected.status().Prefixed(provider ? provider->Describe() : c.bucket);

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

  PlanInput input;
  input.self = self;
  input.expected = *expected;
  input.cluster_size = c.cluster_size.value_or(expected->size());
  input.has_local_data = has_data;
  if (has_data) {
    auto local = ReadWalIdentity(c.data_dir);
    if (local.ok()) {
      input.local = *local;
    } else {
      spdlog::warn("cannot tell whose data {} holds, so a removal of this member goes unnoticed: {}", c.data_dir,
                   local.status().message());
    }
  }
  {
    std::lock_guard lock(state_->mu);
    state_->agent_state = AgentState{self,
                                     has_data ? DataState::kHasData : DataState::kEmpty,
                                     token,
                                     expected->cluster_id(),
                                     expected->IdOf(self),
                                     static_cast<uint32_t>(input.cluster_size),
                                     expected->InitialCluster()};
  }
  bool agent_needed = agent_mode_ == AgentMode::kAlways || (!has_data && expected->size() > 1);
  if (!state_->agent && agent_needed && !c.agent_listen.empty()) {
    auto agent = AgentServer::Start(c.agent_listen, c.peer_tls, [this] {
      std::lock_guard lock(state_->mu);
      return state_->agent_state;
    });
    if (!agent.ok()) return agent.status().Prefixed("--agent-listen");
    state_->agent = std::move(*agent);
  }

  Decision decision;
  std::string last_reason;
  while (true) {
    input.peers.clear();
    std::vector<std::future<PeerFacts>> asks;
    for (const auto& m : expected->members()) {
      if (m.name == self.name) continue;
      asks.push_back(std::async(std::launch::async, [&c, m, &self] {
        PeerFacts facts{m.name, {}, std::nullopt, {}};
        auto peer = ParseUrl(m.peer_urls.front());
        facts.agent = AskAgent(AgentTarget(*peer, c.agent_port), self.name, c.peer_tls, kPeerCallTimeout);
        for (const auto& url : m.peer_urls) {
          auto view = ProbeMembers(url, c.peer_tls, kPeerCallTimeout);
          if (view.ok()) {
            facts.cluster = std::move(*view);
            facts.foreign_answer.clear();
            break;
          }
          if (!view.status().IsUnavailable()) facts.foreign_answer = view.status().message();
          spdlog::debug("{}: {}", m.name, view.status().message());
        }
        return facts;
      }));
    }
    for (auto& f : asks) input.peers.push_back(f.get());
    for (const auto& p : input.peers) {
      spdlog::debug("{}: agent {} ({}), etcd {}", p.name, p.agent.reachable ? "answers" : "unreachable",
                    p.agent.reachable ? DataStateName(p.agent.data_state) : p.agent.error,
                    p.cluster ? "in cluster " + IdToHex(p.cluster->cluster_id) : "not answering");
    }
    {
      std::lock_guard lock(state_->mu);
      input.etcd_ran = state_->etcd_ran;
    }
    decision = Plan(input);
    if (decision.action != Action::kWait) break;
    // Not waited out here: `run` keeps etcd stopped and asks again, answering signals meanwhile.
    if (decision.wait == WaitKind::kRemoved) return Status::Unavailable(decision.reason);
    if (decision.reason != last_reason) {
      spdlog::info("waiting: {}", decision.reason);
      last_reason = decision.reason;
    }
    if (SteadyClock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format("timed out after --timeout {}s: {}",
                                                  std::chrono::duration_cast<std::chrono::seconds>(c.timeout).count(),
                                                  decision.reason));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  spdlog::info("decision: {}: {}", ActionName(decision.action), decision.reason);
  if (decision.action == Action::kNew) WaitForFirstPeer(c, *expected, self);
  MemberId member_id = expected->IdOf(self);
  if (decision.move_data_aside) {
    auto moved = MoveAside(c.data_dir + "/member", "removed");
    if (!moved.ok()) return moved.status();
    spdlog::info("moved {} aside to {}: it is the data of member {}, which the cluster removed", c.data_dir + "/member",
                 *moved, IdToHex(input.local->member_id));
  }
  if (decision.action == Action::kJoin || decision.action == Action::kReplace) {
    auto changed = ChangeMembership(c, self, decision, deadline);
    if (!changed.ok()) return changed.status();
    decision.initial_cluster = changed->initial_cluster;
    member_id = changed->member_id;
  }

  InitOutcome out;
  out.decision = decision;
  out.self = self;
  out.member_id = member_id;
  out.cluster_id = decision.cluster_id.value_or(expected->cluster_id());
  out.initial_cluster = decision.initial_cluster;

  if (Status s = MakeDirs(c.state_dir); !s.ok()) return s;
  if (!has_data || !stored) {
    Bucket bucket{*expected, {decision.initial_cluster_state, NowRfc3339()}};
    if (Status s = SaveBucket(c.state_dir, bucket); !s.ok()) return s;
  }
  EtcdLaunch launch =
      MakeEtcdLaunch(c, self, token, decision.initial_cluster, decision.initial_cluster_state);
  out.bucket_path = c.state_dir + "/" + kBucketFile;
  out.etcd_config_path = c.state_dir + "/" + kEtcdConfigFile;
  out.etcd_env_path = c.state_dir + "/" + kEtcdEnvFile;
  out.etcd_flags = RenderEtcdFlags(launch);
  if (Status s = WriteFileAtomic(out.etcd_config_path, RenderEtcdYaml(launch)); !s.ok()) return s;
  if (Status s = WriteFileAtomic(out.etcd_env_path, RenderEtcdEnv(launch)); !s.ok()) return s;
  return out;
}

std::string FormatInitOutcome(const InitOutcome& o, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::json j = {{"decision", ActionName(o.decision.action)},
                        {"reason", o.decision.reason},
                        {"name", o.self.name},
                        {"memberID", IdToHex(o.member_id)},
                        {"clusterID", IdToHex(o.cluster_id)},
                        {"initialCluster", o.initial_cluster},
                        {"initialClusterState", o.decision.initial_cluster_state},
                        {"bucket", o.bucket_path},
                        {"etcdConfig", o.etcd_config_path},
                        {"etcdEnv", o.etcd_env_path}};
    return j.dump() + "\n";
  }
  return fmt::format(
      "decision: {}\nreason: {}\nmember: {} ({}) in cluster {}\ninitial cluster ({}): {}\nwrote: {} {} {}\n"
      "start etcd with: etcd --config-file {}\n",
      ActionName(o.decision.action), o.decision.reason, o.self.name, IdToHex(o.member_id), IdToHex(o.cluster_id),
      o.decision.initial_cluster_state, o.initial_cluster, o.bucket_path, o.etcd_config_path, o.etcd_env_path,
      o.etcd_config_path);
}

}  // namespace quorate
