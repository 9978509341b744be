#include "quorate/init.h"

#include <dirent.h>

#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "quorate/agent.h"
#include "quorate/bucket.h"
#include "quorate/etcd_config.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "quorate/peer_probe.h"

namespace quorate {
namespace {

using Clock = std::chrono::steady_clock;
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

Result<std::unique_ptr<DiscoveryProvider>> ProviderFromConfig(const Config& config) {
  int sources = !config.discovery.empty() + !config.initial_cluster.empty() + !config.discovery_srv.empty();
  if (sources == 0) {
    return Status::InvalidArgument(
        "no discovery: give --initial-cluster, --discovery-srv or --discovery 'provider=NAME ...'");
  }
  if (sources > 1) {
    return Status::InvalidArgument("give only one of --initial-cluster, --discovery-srv and --discovery");
  }
  DiscoverySpec spec;
  if (!config.discovery.empty()) {
    auto parsed = ParseDiscoverySpec(config.discovery);
    if (!parsed.ok()) return parsed.status();
    spec = std::move(*parsed);
  } else if (!config.initial_cluster.empty()) {
    auto members = ParseInitialCluster(config.initial_cluster, "--initial-cluster");
    if (!members.ok()) return members.status();
    spec = {"static", {{"members", config.initial_cluster}}, "--initial-cluster"};
  } else {
    spec = {"dns-srv", {{"domain", config.discovery_srv}}, "--discovery-srv"};
    if (!config.discovery_srv_name.empty()) spec.params["name"] = config.discovery_srv_name;
  }
  ProviderContext context{{config.name, config.initial_advertise_peer_urls, config.advertise_client_urls},
                          config.initial_cluster_token,
                          config.cluster_size};
  if (context.self.client_urls.empty() && !context.self.peer_urls.empty()) {
    context.self.client_urls.push_back(DefaultClientUrl(*ParseUrl(context.self.peer_urls.front())));
  }
  auto provider = ProviderRegistry::Get().Create(spec, context);
  if (!provider.ok() && spec.provider == "static" && !config.initial_cluster.empty()) {
    // The static provider names its key; the user typed --initial-cluster.
    std::string msg = provider.status().message();
    const std::string from = "--discovery members";
    if (auto pos = msg.find(from); pos != std::string::npos) msg.replace(pos, from.size(), "--initial-cluster");
    return Status::InvalidArgument(msg);
  }
  return provider;
}

Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config,
                                             Clock::time_point deadline) {
  std::string last;
  while (true) {
    auto members = provider.Discover();
    std::string progress;
    if (members.ok()) {
      size_t want = config.cluster_size.value_or(provider.ImpliedSize().value_or(members->size()));
      if (members->size() == want && want > 0) return members;
      std::vector<std::string> names;
      for (const auto& m : *members) names.push_back(m.name);
      progress = members->size() < want
                     ? fmt::format("{}/{} discovered: {}; waiting for {} more", members->size(), want,
                                   Join(names), want - members->size())
                     : fmt::format("{} discovered ({}) but --cluster-size is {}; waiting for the extra ones to go",
                                   members->size(), Join(names), want);
    } else if (members.status().IsInvalidArgument()) {
      return members.status().Prefixed(provider.Describe());
    } else {
      progress = fmt::format("{}: {}", provider.Describe(), members.status().message());
    }
    if (progress != last) {
      spdlog::info("{}", progress);
      last = progress;
    }
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format("timed out after --timeout {}s: {}",
                                                  std::chrono::duration_cast<std::chrono::seconds>(config.timeout).count(),
                                                  progress));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

struct InitJob::State {
  std::mutex mu;
  AgentState agent_state;
  std::unique_ptr<AgentServer> agent;
};

InitJob::InitJob(Config config, AgentMode agent_mode)
    : config_(std::move(config)), agent_mode_(agent_mode), state_(std::make_unique<State>()) {}
InitJob::~InitJob() = default;

void InitJob::SetRunning(bool running) {
  std::lock_guard lock(state_->mu);
  state_->agent_state.data_state = running ? DataState::kRunning : DataState::kHasData;
}

Result<InitOutcome> InitJob::Run() {
  const Config& c = config_;
  auto deadline = Clock::now() + c.timeout;
  auto provider = ProviderFromConfig(c);
  if (!provider.ok()) return provider.status();

  // An etcd data dir with a member directory but no WAL is a half-made bootstrap etcd cannot use;
  // it goes aside, never away.
  bool has_data = HasEtcdData(c.data_dir);
  if (!has_data && PathExists(c.data_dir + "/member")) {
    auto moved = MoveAside(c.data_dir + "/member", "unusable");
    if (!moved.ok()) return moved.status();
    spdlog::info("moved {} aside to {}: it has no WAL, so etcd cannot start on it", c.data_dir + "/member", *moved);
  }

  // With local data the stored bucket is enough: a restart must not depend on discovery being up.
  std::optional<Bucket> stored;
  if (auto loaded = LoadBucket(c.state_dir); loaded.ok()) {
    stored = std::move(*loaded);
  } else if (!loaded.status().IsNotFound()) {
    auto moved = MoveAside(c.state_dir + "/" + kBucketFile, "corrupt");
    spdlog::warn("{}; not trusted{}", loaded.status().message(),
                 moved.ok() ? ", moved aside to " + *moved : "");
  }

  std::vector<Member> discovered;
  if (has_data && stored && stored->members.FindByName(c.name) != nullptr) {
    discovered = stored->members.members();
  } else if (has_data) {
    auto once = (*provider)->Discover();
    if (once.ok()) discovered = std::move(*once);
  } else {
    auto members = DiscoverExpected(**provider, c, deadline);
    if (!members.ok()) return members.status();
    discovered = std::move(*members);
  }
  const std::string& token = has_data && stored ? stored->members.token() : c.initial_cluster_token;

  Member self;
  if (has_data && FindSelf(discovered, c) == nullptr) {
    // Restarting on our data needs only our own URLs: etcd ignores --initial-cluster then.
    if (c.initial_advertise_peer_urls.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{} has etcd data but '{}' is not in the member bucket or discovery; give --initial-advertise-peer-urls",
          c.data_dir, c.name));
    }
    self = {c.name, c.initial_advertise_peer_urls, c.advertise_client_urls};
    if (self.client_urls.empty()) self.client_urls.push_back(DefaultClientUrl(*ParseUrl(self.peer_urls[0])));
    discovered = {self};
  } else {
    auto resolved = ResolveSelf(discovered, c);
    if (!resolved.ok()) return resolved.status();
    self = std::move(*resolved);
    for (auto& m : discovered) {
      if (m.name == self.name) m = self;
    }
  }
  auto expected = MemberSet::Create(discovered, token);
  if (!expected.ok()) return expected.status().Prefixed((*provider)->Describe());

  PlanInput input{self, *expected, c.cluster_size.value_or(expected->size()), has_data, {}};
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
        PeerFacts facts{m.name, {}, std::nullopt};
        auto peer = ParseUrl(m.peer_urls.front());
        facts.agent = AskAgent(AgentTarget(*peer, c.agent_port), self.name, c.peer_tls, kPeerCallTimeout);
        for (const auto& url : m.peer_urls) {
          auto view = ProbeMembers(url, c.peer_tls, kPeerCallTimeout);
          if (view.ok()) {
            facts.cluster = std::move(*view);
            break;
          }
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
    decision = Plan(input);
    if (decision.action != Action::kWait) break;
    if (decision.reason != last_reason) {
      spdlog::info("waiting: {}", decision.reason);
      last_reason = decision.reason;
    }
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(fmt::format("timed out after --timeout {}s: {}",
                                                  std::chrono::duration_cast<std::chrono::seconds>(c.timeout).count(),
                                                  decision.reason));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  if (decision.action == Action::kJoin || decision.action == Action::kReplace) {
    return Status::FailedPrecondition(fmt::format("{} ({}): membership changes are not wired yet",
                                                  ActionName(decision.action), decision.reason));
  }
  spdlog::info("decision: {}: {}", ActionName(decision.action), decision.reason);

  InitOutcome out;
  out.decision = decision;
  out.self = self;
  out.member_id = expected->IdOf(self);
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
