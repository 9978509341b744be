#include "node/run.h"

#include <poll.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bucket.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_config.h"
#include "node/init.h"
#include "quorate/log.h"
#include "status/status_server.h"
#include "node/signal_watcher.h"
#include "node/supervisor.h"

namespace quorate {
namespace {

constexpr auto kUpkeepInterval = std::chrono::seconds(1);

// What the upkeep loop learned last, for /readyz and the metrics.
struct MemberHealth {
  std::mutex mu;
  Status ready = Status::Unavailable("etcd has not answered yet");
  // Why init asked to keep etcd stopped for now (this member was removed, or a step to retry);
  // empty while it may run. quorate is then alive and waiting, only not ready: a liveness probe must
  // not restart it, which would turn a removal into a rejoin.
  std::string held;
};

// The member's own upkeep while etcd runs: promote it once it is a caught-up learner, and bring its
// advertised peer URLs up to date. Only ever acts on this member, so nodes never fight.
class Upkeep {
 public:
  Upkeep(const Config& config, Metrics& metrics, MemberHealth& health)
      : config_(config), metrics_(metrics), health_(health) {}

  void SetSelf(const Member& self) {
    std::lock_guard lock(mu_);
    self_ = self;
    peers_.clear();
    if (auto bucket = LoadBucket(config_.state_dir); bucket.ok()) {
      for (const auto& m : bucket->members.members()) {
        if (m.name == self_.name) continue;
        peers_.insert(peers_.end(), m.client_urls.begin(), m.client_urls.end());
      }
    }
  }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  TlsFiles ClientTls() const { return config_.etcdctl_tls.enabled() ? config_.etcdctl_tls : config_.client_tls; }

  void Loop() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, kUpkeepInterval, [this] { return stopping_; })) {
      Member self = self_;
      std::vector<std::string> peers = peers_;
      lock.unlock();
      Status ready = Tick(self, peers);
      {
        std::lock_guard h(health_.mu);
        if (ready.message() != health_.ready.message()) {
          spdlog::info("readiness: {}", ready.ok() ? "ready (healthy voter)" : ready.message());
        }
        health_.ready = ready;
      }
      lock.lock();
    }
  }

  Status Tick(const Member& self, const std::vector<std::string>& peers) {
    auto own = MakeEtcdClient({self.client_urls, ClientTls(), std::chrono::seconds(2)});
    auto status = own->EndpointStatusOf(self.client_urls.front());
    if (!status.ok()) return Status::Unavailable("etcd does not answer: " + status.status().message());
    if (!status->errors.empty()) {
      return Status::Unavailable(fmt::format("etcd reports: {}", fmt::join(status->errors, "; ")));
    }
    if (status->leader == 0) return Status::Unavailable("etcd has no leader");
    metrics_.SetIsLearner(status->is_learner);
    // A learner cannot serve the membership calls: ask the voters, then ourselves.
    std::vector<std::string> endpoints = peers;
    endpoints.insert(endpoints.end(), self.client_urls.begin(), self.client_urls.end());
    auto cluster = MakeEtcdClient({endpoints, ClientTls(), std::chrono::seconds(2)});
    if (auto listing = cluster->MemberList(); listing.ok()) {
      metrics_.SetMembers(static_cast<int>(listing->members.size()));
      for (const auto& m : listing->members) {
        if (m.id != status->member_id) continue;
        std::vector<std::string> have = m.peer_urls, want = self.peer_urls;
        std::sort(have.begin(), have.end());
        std::sort(want.begin(), want.end());
        if (have != want) {
          Status s = cluster->MemberUpdate(m.id, self.peer_urls);
          spdlog::info("peer URLs of {} changed from {} to {}: MemberUpdate {}", self.name, fmt::join(have, ","),
                       fmt::join(want, ","), s.ok() ? "done" : "failed: " + s.message());
        }
      }
    }
    if (status->is_learner) {
      Status s = cluster->MemberPromote(status->member_id);
      if (s.ok()) {
        spdlog::info("promoted {} ({}) from learner to voter: it caught up with the leader", self.name,
                     IdToHex(status->member_id));
        metrics_.SetIsLearner(false);
        return Status::Ok();
      }
      spdlog::debug("promotion of {} not yet: {}", self.name, s.message());
      return Status::Unavailable("learner, not yet promoted: " + s.message());
    }
    return Status::Ok();
  }

  const Config& config_;
  Metrics& metrics_;
  MemberHealth& health_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  Member self_;
  std::vector<std::string> peers_;
  std::thread thread_;
};

std::vector<std::string> EtcdArgv(const Config& c, const InitOutcome& outcome, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {c.etcd_path};
  argv.insert(argv.end(), outcome.etcd_flags.begin(), outcome.etcd_flags.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Blocks until SIGTERM or SIGINT arrives.
Status WaitForStopSignal() {
  auto watcher = SignalWatcher::Create({SIGTERM, SIGINT});
  if (!watcher.ok()) return watcher.status();
  pollfd readable{(*watcher)->fd(), POLLIN, 0};
  while (true) {
    if (poll(&readable, 1, -1) < 0 && errno != EINTR) return Status::FromErrno(errno, "waiting for a signal");
    for (int signal : (*watcher)->Take()) {
      spdlog::info("{}: quorate upkeep stops", SignalName(signal));
      return Status::Ok();
    }
  }
}

}  // namespace

Status RunNode(const Config& config, const std::vector<std::string>& extra_etcd_args) {
  Metrics metrics;
  MemberHealth health;
  InitOptions init_options;
  init_options.agent_mode = InitOptions::AgentMode::kAlways;
  InitJob job(config, init_options);
  auto outcome = job.Run();
  if (!outcome.ok()) return outcome.status();
  metrics.RecordDecision(outcome->decision.action);

  Upkeep upkeep(config, metrics, health);
  upkeep.SetSelf(outcome->self);

  std::vector<std::string> argv = EtcdArgv(config, *outcome, extra_etcd_args);
  SupervisorOptions options;
  options.spec.argv = argv;
  options.spec.unset_env = EtcdVariablesShadowedBy(argv);
  options.on_start = [&](const ChildProcess& child) {
    job.SetRunning(true);
    spdlog::info("etcd started (pid {}): {}", child.pid(), fmt::join(argv, " "));
  };
  options.on_exit = [&](const SupervisorExit& exit) {
    job.SetRunning(false);
    if (exit.requested) return;
    std::string how = exit.status ? exit.status->ToString() : exit.start_error.message();
    metrics.RecordError("etcd exited: " + how);
    spdlog::warn("etcd exited ({}) after {}s; restarting in {}ms", how,
                 std::chrono::duration_cast<std::chrono::seconds>(exit.uptime).count(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(exit.restart_in).count());
  };
  // Decide again before every restart: the data dir may have been lost or the membership changed.
  options.before_restart = [&](LaunchSpec& spec) {
    auto again = job.Run();
    {
      std::lock_guard lock(health.mu);
      std::string held = again.ok() || !again.status().IsUnavailable() ? "" : again.status().message();
      if (!held.empty() && held != health.held) {
        spdlog::info("decision: wait: {}", held);
        metrics.RecordDecision(Action::kWait);
      }
      health.held = held;
    }
    if (!again.ok()) return again.status();
    metrics.IncEtcdRestarts();
    metrics.RecordDecision(again->decision.action);
    upkeep.SetSelf(again->self);
    argv = EtcdArgv(config, *again, extra_etcd_args);
    spec.argv = argv;
    spec.unset_env = EtcdVariablesShadowedBy(argv);
    return Status::Ok();
  };
  Supervisor supervisor(std::move(options));

  std::unique_ptr<StatusServer> status_server;
  if (!config.status_listen.empty()) {
    StatusChecks checks;
    checks.live = [&] {
      std::lock_guard lock(health.mu);
      return health.held.empty() ? supervisor.Alive() : Status::Ok();
    };
    checks.ready = [&] {
      std::lock_guard lock(health.mu);
      return health.held.empty() ? health.ready : Status::Unavailable(health.held);
    };
    auto started = StatusServer::Start(config.status_listen, metrics, checks);
    if (!started.ok()) return started.status();
    status_server = std::move(*started);
  }
  upkeep.Start();
  Status result = supervisor.Run();
  upkeep.Stop();
  if (result.ok()) spdlog::info("etcd stopped; quorate exits");
  return result;
}


Status UpkeepNode(const Config& config) {
  auto bucket = LoadBucket(config.state_dir);
  if (!bucket.ok()) {
    return Status::FailedPrecondition(fmt::format(
        "no member bucket in --state-dir {}: {}; quorate init writes it before etcd starts", config.state_dir,
        bucket.status().message()));
  }
  const Member* self = bucket->members.FindByName(config.name);
  if (self == nullptr) {
    return Status::InvalidArgument(fmt::format("--name {} is not a member of the bucket in --state-dir {}",
                                               config.name, config.state_dir));
  }
  spdlog::info("upkeep of {} beside its etcd: promoting it once a caught-up learner, keeping its peer URLs",
               self->name);
  Metrics metrics;
  MemberHealth health;
  Upkeep upkeep(config, metrics, health);
  upkeep.SetSelf(*self);
  std::unique_ptr<StatusServer> status_server;
  if (!config.status_listen.empty()) {
    StatusChecks checks;
    checks.live = [] { return Status::Ok(); };  // etcd is another container's to watch
    checks.ready = [&] {
      std::lock_guard lock(health.mu);
      return health.ready;
    };
    auto started = StatusServer::Start(config.status_listen, metrics, checks);
    if (!started.ok()) return started.status();
    status_server = std::move(*started);
  }
  upkeep.Start();
  Status stopped = WaitForStopSignal();
  upkeep.Stop();
  return stopped;
}

}  // namespace quorate
