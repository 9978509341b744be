#include "node/supervisor.h"

#include <signal.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

namespace quorate {

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)),
      launcher_(options_.launcher != nullptr ? *options_.launcher : RealProcessLauncher()),
      clock_(options_.clock != nullptr ? *options_.clock : RealClock()) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) stop_fd_error_ = Status::FromErrno(errno, "supervisor: eventfd");
}

Supervisor::~Supervisor() {
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void Supervisor::Stop() {
  stop_requested_ = true;
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
}

void Supervisor::RequestRestart() {
  restart_requested_ = true;
  uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof one);
}

SupervisorStats Supervisor::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Supervisor::Reap() {
  if (!options_.reap_orphans) return;
  int reaped = ReapOrphans();
  std::lock_guard lock(mu_);
  stats_.orphans_reaped += reaped;
}

Result<std::optional<ExitStatus>> Supervisor::WaitFor(ChildProcess* child,
                                                      Clock::TimePoint deadline,
                                                      bool return_on_stop) {
  for (;;) {
    pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {signals_->fd(), POLLIN, 0}, {-1, POLLIN, 0}};
    if (child != nullptr) fds[2].fd = child->exit_fd();
    auto ready = clock_.Poll(fds, deadline);
    if (!ready.ok()) return ready.status();

    uint64_t drained;
    while (::read(stop_fd_, &drained, sizeof drained) > 0) {
    }
    for (int signal : signals_->Take()) {
      if ((signal == SIGTERM || signal == SIGINT) && stop_signal_ == 0) stop_signal_ = signal;
    }
    if (stop_requested_ && stop_signal_ == 0) stop_signal_ = SIGTERM;
    // Every wake-up, not only on SIGCHLD: a watcher handed in may not watch SIGCHLD.
    Reap();
    std::optional<ExitStatus> exit;
    if (child != nullptr) {
      auto polled = child->Poll();
      if (!polled.ok()) return polled.status();
      exit = *polled;
    }
    if (*ready == 0 || exit || (return_on_stop && (stop_signal_ != 0 || restart_requested_))) return exit;
  }
}

Result<ExitStatus> Supervisor::StopChild(ChildProcess& child) {
  // A child that exited meanwhile makes Signal fail; the wait below then sees the exit. A requested
  // restart stops it as SIGTERM would: etcd then ends cleanly, its WAL synced.
  (void)child.Signal(stop_signal_ != 0 ? stop_signal_ : SIGTERM);
  Clock::TimePoint deadline = clock_.Now() + options_.stop_grace;
  for (;;) {
    auto exit = WaitFor(&child, deadline, false);
    if (!exit.ok()) return exit.status();
    if (*exit) return **exit;
    if (clock_.Now() >= deadline) break;
  }
  (void)child.Signal(SIGKILL);
  for (;;) {
    auto exit = WaitFor(&child, Clock::kNever, false);
    if (!exit.ok()) return exit.status();
    if (*exit) return **exit;
  }
}

Result<SupervisorExit> Supervisor::Supervise(ChildProcess& child, Clock::TimePoint started) {
  auto exit = WaitFor(&child, Clock::kNever, true);
  if (!exit.ok()) return exit.status();
  if (!*exit) {
    auto stopped = StopChild(child);
    if (!stopped.ok()) return stopped.status();
    *exit = *stopped;
  }
  SupervisorExit ended;
  ended.status = **exit;
  // Also when the exit and the stop came together, as with a terminal's Ctrl-C reaching both.
  ended.requested = stop_signal_ != 0;
  ended.restart_requested = !ended.requested && restart_requested_.exchange(false);
  ended.uptime = clock_.Now() - started;
  return ended;
}

Status Supervisor::Run() {
  if (!stop_fd_error_.ok()) return stop_fd_error_;
  std::unique_ptr<SignalWatcher> own_signals;
  signals_ = options_.signals;
  if (signals_ == nullptr) {
    std::vector<int> watched = {SIGTERM, SIGINT};
    if (options_.reap_orphans) watched.push_back(SIGCHLD);
    auto created = SignalWatcher::Create(watched);
    if (!created.ok()) return created.status();
    own_signals = std::move(*created);
    signals_ = own_signals.get();
  }

  LaunchSpec spec = options_.spec;
  // A first crash is restarted at once: etcd with sound data heals fastest that way. Only a crash
  // soon after a restart shows a loop, and those wait initial_backoff, doubling to the cap.
  Clock::Duration backoff = Clock::Duration::zero();
  // Waits out the backoff, answering signals; true when a stop came meanwhile.
  auto pause = [&]() -> Result<bool> {
    Clock::TimePoint until = clock_.Now() + backoff;
    backoff =
        backoff == Clock::Duration::zero() ? options_.initial_backoff : std::min(backoff * 2, options_.max_backoff);
    for (;;) {
      auto waited = WaitFor(nullptr, until, true);
      if (!waited.ok()) return waited.status();
      if (stop_signal_ != 0) return true;
      if (clock_.Now() >= until) return false;
    }
  };
  for (bool first = true;; first = false) {
    if (stop_requested_ || stop_signal_ != 0) return Status::Ok();
    if (!first && options_.before_restart) {
      Status s = options_.before_restart(spec);
      if (s.IsUnavailable()) {
        auto stopped = pause();
        if (!stopped.ok()) return stopped.status();
        if (*stopped) return Status::Ok();
        continue;
      }
      if (!s.ok()) return s;
    }

    SupervisorExit ended;
    Clock::TimePoint started = clock_.Now();
    // A request made while no child ran is met by this start: it reads whatever changed.
    restart_requested_ = false;
    auto child = launcher_.Start(spec);
    if (!child.ok()) {
      if (first) return child.status();
      ended.start_error = child.status();
    } else {
      {
        std::lock_guard lock(mu_);
        ++stats_.starts;
        if (!first) ++stats_.restarts;
        stats_.pid = (*child)->pid();
      }
      if (options_.on_start) options_.on_start(**child);

      auto run = Supervise(**child, started);
      std::lock_guard lock(mu_);
      stats_.pid = 0;
      if (!run.ok()) return run.status();
      ended = *run;
      stats_.last_exit = ended.status;
    }

    if (!ended.requested) {
      if (ended.uptime >= options_.reset_after) backoff = Clock::Duration::zero();
      ended.restart_in = ended.restart_requested ? Clock::Duration::zero() : backoff;
    }
    if (options_.on_exit) options_.on_exit(ended);
    if (ended.requested) return Status::Ok();
    if (ended.restart_requested) continue;

    auto stopped = pause();
    if (!stopped.ok()) return stopped.status();
    if (*stopped) return Status::Ok();
  }
}

}  // namespace quorate
