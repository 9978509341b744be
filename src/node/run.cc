#include "node/run.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bucket.h"
#include "etcd/etcd_config.h"
#include "etcd/etcd_version.h"
#include "node/backup_job.h"
#include "node/etcd_binary.h"
#include "node/etcd_env.h"
#include "node/init.h"
#include "node/restore.h"
#include "node/rotation.h"
#include "node/run_life.h"
#include "node/signal_watcher.h"
#include "node/stray_etcd.h"
#include "node/supervisor.h"
#include "node/upkeep.h"
#include "quorate/log.h"
#include "status/status_server.h"

namespace quorate {
namespace {

std::vector<std::string> EtcdArgv(const Config& c, const InitOutcome& outcome, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {c.etcd_path};
  argv.insert(argv.end(), outcome.etcd_flags.begin(), outcome.etcd_flags.end());
  // The operator's flags too are spelt as this binary accepts them, so one manifest outlives an upgrade.
  const auto spelt = outcome.etcd_version ? SpellEtcdArgs(extra, *outcome.etcd_version) : extra;
  argv.insert(argv.end(), spelt.begin(), spelt.end());
  return argv;
}

// The real ones where `seams` gives none.
void FillRealSeams(const Config& config, NodeSeams& seams) {
  if (seams.clock == nullptr) seams.clock = &RealClock();
  if (!seams.serve_status) {
    // The status endpoints on --status-listen; none when it is empty.
    seams.serve_status = [&config](Metrics& metrics, StatusChecks checks) -> Result<std::shared_ptr<void>> {
      if (config.status_listen.empty()) return std::shared_ptr<void>();
      auto server = StatusServer::Start(config.status_listen, metrics, std::move(checks));
      if (!server.ok()) return server.status();
      return std::shared_ptr<void>(std::move(*server));
    };
  }
  if (!seams.run_upkeep) {
    seams.run_upkeep = [](Upkeep& upkeep) {
      upkeep.Start();
      return std::shared_ptr<void>(&upkeep, [](void* started) { static_cast<Upkeep*>(started)->Stop(); });
    };
  }
}

void FillRealSeams(const Config& config, RunSeams& seams) {
  FillRealSeams(config, static_cast<NodeSeams&>(seams));
  if (!seams.find_etcd) {
    seams.find_etcd = [](const std::string& etcd_path) { return FindProgram(etcd_path).status(); };
  }
  if (!seams.stop_stray_etcd) {
    seams.stop_stray_etcd = [clock = seams.clock](const std::string& data_dir) {
      return StopStrayEtcd(data_dir, std::chrono::seconds(10), *clock);
    };
  }
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

Status RunNode(const Config& config, const std::vector<std::string>& extra_etcd_args, RunSeams seams) {
  FillRealSeams(config, seams);
  Clock& clock = *seams.clock;
  // What the operator typed is checked, and the status port bound, before anything is written or
  // moved: a bad --etcd or --status-listen is bad input and leaves the disk as it was.
  if (Status etcd = seams.find_etcd(config.etcd_path); !etcd.ok()) {
    return Status::InvalidArgument(fmt::format("--etcd: {}; give the path of the etcd binary", etcd.message()));
  }
  // The backup store and keys are the operator's input too: checked before anything is written.
  std::unique_ptr<BackupSchedule> backups;
  if (!config.backup_to.empty()) {
    auto settings = BackupSettingsOf(config);
    if (!settings.ok()) return settings.status();
    auto store = OpenVfs(settings->store_url);
    if (!store.ok()) return store.status().Prefixed("--backup-to");
    backups = std::make_unique<BackupSchedule>(config, std::move(*settings), std::move(*store));
  }
  // The CA's files are the operator's input too (rule T6 of §13).
  auto tls = TlsRenewer::Create(config, clock);
  if (!tls.ok()) return tls.status();
  Metrics metrics;
  // Read by the probes from the status server's thread. The supervisor (told of a stop or a rolling
  // change's restart) and upkeep (asked by /readyz while etcd runs) exist only once the first
  // decision is made; until then these point at nothing.
  RunLife life;
  std::atomic<Supervisor*> supervising{nullptr};
  std::atomic<Upkeep*> upkeeping{nullptr};
  StatusChecks checks;
  checks.live = [&] { return life.Live(); };
  checks.ready = [&] { return life.Ready([&] { return upkeeping.load()->Ready(); }); };
  if (backups) metrics.AddSection([&] { return backups->RenderMetrics(); });
  if (*tls) {
    metrics.AddSection([&] { return (*tls)->RenderMetrics(); });
    checks.ready_detail = [&] { return (*tls)->Warnings(); };
  }
  auto status_server = seams.serve_status(metrics, checks);
  if (!status_server.ok()) return status_server.status();

  // `etcd --version` forks and execs a Go binary (most of the 0.06 s between a restore and etcd's
  // start on a quiet machine, and more at load): asked from here, beside the stray etcd's stop and
  // a restore (seconds), so that init's ask, EtcdBinaryVersion too, joins this one or finds its
  // answer kept. Nothing waits on this future but its end (RunNode's); a seam answering for the
  // binary is asked only by init.
  std::future<Result<EtcdVersion>> version_asked_ahead;
  if (!seams.init.etcd_version) {
    version_asked_ahead = std::async(std::launch::async, EtcdBinaryVersion, config.etcd_path);
  }
  if (Status s = seams.stop_stray_etcd(config.data_dir); !s.ok()) return s;
  if (!config.restore_from.empty()) {
    RestoreSeams restore = std::move(seams.restore);
    if (restore.clock == nullptr) restore.clock = &clock;
    if (restore.peers == nullptr) restore.peers = seams.init.peers;
    if (!restore.etcd_clients) restore.etcd_clients = seams.init.etcd_clients;
    if (Status s = RestoreNode(config, std::move(restore)); !s.ok()) return s;
  }
  // One watcher from the start, so a stop signal also ends init's waits (for peers, for quorum),
  // and the supervisor then takes its signals from it.
  bool reap_orphans = ::getpid() == 1;
  std::unique_ptr<SignalWatcher> own_signals;
  if (seams.signals == nullptr) {
    std::vector<int> watched = {SIGTERM, SIGINT};
    if (reap_orphans) watched.push_back(SIGCHLD);
    auto signals = SignalWatcher::Create(watched);
    if (!signals.ok()) return signals.status();
    own_signals = std::move(*signals);
    seams.signals = own_signals.get();
  }
  SignalWatcher& watcher = *seams.signals;
  int stop_signal = 0;
  // The pipe also carries SIGCHLD when reaping orphans: only SIGTERM and SIGINT stop init's waits,
  // and the supervisor, which no longer sees them on the pipe, is told directly.
  auto stop_requested = [&] {
    for (int signal : watcher.Take()) {
      if ((signal == SIGTERM || signal == SIGINT) && stop_signal == 0) stop_signal = signal;
    }
    if (Supervisor* s = supervising.load(); stop_signal != 0 && s != nullptr) s->Stop();
    return stop_signal != 0;
  };
  InitOptions init_options = std::move(seams.init);
  init_options.clock = &clock;
  init_options.agent_mode = InitOptions::AgentMode::kAlways;
  init_options.stop = {watcher.fd(), stop_requested};
  init_options.etcd_files_required = false;

  // Before init: its peer probes and agent calls present the peer certificate, which an expired one
  // (the node was off past its life) would have refused (rule T2).
  if (*tls) {
    if (Status s = (*tls)->BeforeStart(); !s.ok()) return s;
  }
  InitJob job(config, init_options);
  auto outcome = job.Run();
  if (seams.on_decided) seams.on_decided(outcome);
  if (!outcome.ok() && outcome.status().IsCancelled()) {
    spdlog::info("{}: {}; quorate exits", SignalName(stop_signal), outcome.status().message());
    return Status::Ok();
  }
  if (!outcome.ok()) return outcome.status();
  metrics.RecordDecision(outcome->decision.action);
  life.Set(RunState::kStarting);

  UpkeepOptions upkeep_options = std::move(seams.upkeep);
  upkeep_options.clock = &clock;
  upkeep_options.tls = tls->get();
  Upkeep upkeep(config, metrics, upkeep_options);
  // The rolling changes (CA rotation, peers to https) restart etcd through the supervisor, which
  // exists further down.
  RollingChanges rolling(config, [&] {
    if (Supervisor* s = supervising.load(); s != nullptr) s->RequestRestart();
  });
  upkeep.SetRotation(&rolling);
  upkeep.SetSelf(outcome->self, PeerClientUrls(config.state_dir, outcome->self.name));
  upkeep.SetVersionChange(outcome->version_change);
  upkeep.SetEtcdRunning(false);

  std::vector<std::string> argv = rolling.EtcdArgv(EtcdArgv(config, *outcome, extra_etcd_args));
  SupervisorOptions options;
  options.spec.argv = argv;
  options.spec.env = EtcdEnvironmentFor(argv);
  options.reap_orphans = reap_orphans;
  options.launcher = seams.launcher;
  options.clock = &clock;
  options.signals = &watcher;
  options.on_start = [&](const ChildProcess& child) {
    job.SetRunning(true);
    upkeep.SetEtcdRunning(true);
    life.Set(RunState::kRunning);
    if (seams.on_etcd_running) seams.on_etcd_running(true);
    spdlog::info("etcd started (pid {}): {}", child.pid(), fmt::join(argv, " "));
  };
  options.on_exit = [&](const SupervisorExit& exit) {
    job.SetRunning(false);
    upkeep.SetEtcdRunning(false);
    std::string how = exit.status ? exit.status->ToString() : exit.start_error.message();
    life.Set(RunState::kExited, how);
    if (seams.on_etcd_running) seams.on_etcd_running(false);
    if (exit.requested) return;
    if (exit.restart_requested) {
      spdlog::info("etcd stopped ({}) for the restart quorate asked; starting it again", how);
      return;
    }
    if (exit.status && exit.status->success()) {
      // etcd 3.4 and 3.5 end with exit 0 when their member has been removed from the cluster, or
      // when another process stops them: no crash, and no error to export. The decision before the
      // restart says what follows (rule 1b holds a removed member stopped).
      spdlog::info("etcd ended by itself ({}) after {}s, as etcd does once its member is removed from the cluster or "
                   "another process stops it; deciding again in {}ms",
                   how, std::chrono::duration_cast<std::chrono::seconds>(exit.uptime).count(),
                   std::chrono::duration_cast<std::chrono::milliseconds>(exit.restart_in).count());
      return;
    }
    metrics.RecordError("etcd exited: " + how);
    spdlog::warn("etcd exited ({}) after {}s; restarting in {}ms", how,
                 std::chrono::duration_cast<std::chrono::seconds>(exit.uptime).count(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(exit.restart_in).count());
  };
  // Decide again before every restart: the data dir may have been lost or the membership changed.
  options.before_restart = [&](LaunchSpec& spec) {
    // A hold stays one while init is asked again: /readyz goes on saying why etcd is kept stopped.
    if (life.state() != RunState::kHeld) life.Set(RunState::kRedeciding);
    // Our etcd has exited and been reaped, so whatever holds the data dir's WAL now is a stray: one
    // an older quorate left still starting up when this one began (it held no lock to be seen then),
    // or one started by hand while ours was down. Left there, every restart fails on its lock.
    Status before = seams.stop_stray_etcd(config.data_dir);
    // A leaf that expired while etcd was down comes back renewed (rule T2), or the restart is held.
    if (before.ok() && *tls) before = (*tls)->BeforeStart();
    auto again = before.ok() ? job.Run() : Result<InitOutcome>(before);
    if (seams.on_decided) seams.on_decided(again);
    if (!again.ok() && again.status().IsCancelled()) {
      // The supervisor was told to stop; deferring the restart lets it see that and return.
      spdlog::info("{}: {}; quorate exits", SignalName(stop_signal), again.status().message());
      return Status::Unavailable(again.status().message());
    }
    // Only the operator's input ends the supervisor here. Anything else the re-decision met (peers
    // not answering, a timeout, a full disk) holds etcd stopped and is asked again with the
    // supervisor's backoff, so an etcd whose data is fine comes back once it can.
    bool hold = !again.ok() && !again.status().IsInvalidArgument();
    if (hold) {
      // Said once per reason: a hold asked again after every backoff is one decision.
      if (life.Set(RunState::kHeld, again.status().message())) {
        spdlog::info("decision: wait: {}", again.status().message());
        metrics.RecordDecision(Action::kWait);
      }
      return Status::Unavailable(again.status().message());
    }
    if (!again.ok()) return again.status();
    metrics.IncEtcdRestarts();
    metrics.RecordDecision(again->decision.action);
    upkeep.SetSelf(again->self, PeerClientUrls(config.state_dir, again->self.name));
    upkeep.SetVersionChange(again->version_change);
    argv = rolling.EtcdArgv(EtcdArgv(config, *again, extra_etcd_args));
    spec.argv = argv;
    spec.env = EtcdEnvironmentFor(argv);
    life.Set(RunState::kStarting);
    return Status::Ok();
  };
  Supervisor running(std::move(options));
  supervising = &running;
  upkeeping = &upkeep;

  std::shared_ptr<void> upkeep_running = seams.run_upkeep(upkeep);
  if (backups) {
    backups->SetSelf(outcome->self.client_urls);
    backups->SetClientTls([&] { return rolling.ClientTls(config.client_tls).files; });
    backups->Start();
  }
  Status result = running.Run();
  if (backups) backups->Stop();
  upkeep_running.reset();
  // The status server asks these two; they end with this scope, so it stops asking first.
  status_server->reset();
  if (result.ok()) spdlog::info("etcd stopped; quorate exits");
  return result;
}

Status UpkeepNode(const Config& config, UpkeepNodeSeams seams) {
  FillRealSeams(config, seams);
  if (!seams.wait_for_stop) seams.wait_for_stop = WaitForStopSignal;
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
  auto tls = TlsRenewer::Create(config, *seams.clock);
  if (!tls.ok()) return tls.status();
  Metrics metrics;
  UpkeepOptions upkeep_options = std::move(seams.upkeep);
  upkeep_options.clock = seams.clock;
  upkeep_options.tls = tls->get();
  Upkeep upkeep(config, metrics, upkeep_options);
  upkeep.SetSelf(*self, PeerClientUrls(config.state_dir, self->name));
  StatusChecks checks;
  checks.live = [] { return Status::Ok(); };  // etcd is another container's to watch
  checks.ready = [&] { return upkeep.Ready(); };
  if (*tls) {
    metrics.AddSection([&] { return (*tls)->RenderMetrics(); });
    checks.ready_detail = [&] { return (*tls)->Warnings(); };
  }
  auto status_server = seams.serve_status(metrics, checks);
  if (!status_server.ok()) return status_server.status();
  std::shared_ptr<void> upkeep_running = seams.run_upkeep(upkeep);
  return seams.wait_for_stop();
}

}  // namespace quorate
