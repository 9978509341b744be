// Keeps etcd running under `quorate run` (docs/DESIGN.md §5). One child at a time: restarted when it exits
// by itself, at once the first time and after a capped exponential backoff when it keeps crashing;
// stopped on SIGTERM/SIGINT or Stop() by forwarding the signal, waiting a grace period, then
// SIGKILL; orphans reaped when quorate is PID 1. Run() owns the loop and the thread it is called
// on; Stop() and stats() may be called from any thread.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

#include "quorate/clock.h"
#include "node/process.h"
#include "node/signal_watcher.h"
#include "quorate/status.h"

namespace quorate {

// One run of the child as it ended, for on_exit.
struct SupervisorExit {
  std::optional<ExitStatus> status;  // nullopt when the restart itself failed (see start_error)
  Status start_error;
  Clock::Duration uptime{};
  bool requested = false;        // ended by a stop (signal or Stop()): Run() returns next
  // Ended by RequestRestart(): restarted at once, through before_restart, with no backoff, and
  // not counted as a crash (a crash loop's backoff is left as it was).
  bool restart_requested = false;
  Clock::Duration restart_in{};  // the backoff before the next start, when not requested
};

struct SupervisorOptions {
  LaunchSpec spec;
  // The first restart is at once; the waits before the next ones double from initial_backoff up
  // to max_backoff. A run that lasted reset_after or longer starts them over: its crash is a first.
  Clock::Duration initial_backoff = std::chrono::seconds(1);
  Clock::Duration max_backoff = std::chrono::seconds(30);
  Clock::Duration reset_after = std::chrono::seconds(60);
  // Between forwarding the stop signal and SIGKILL.
  Clock::Duration stop_grace = std::chrono::seconds(10);
  // Orphans are re-parented to PID 1, which must reap them or they stay zombies.
  bool reap_orphans = ::getpid() == 1;

  // The seams; null means the real ones.
  ProcessLauncher* launcher = nullptr;
  Clock* clock = nullptr;
  // Null: Run() watches SIGTERM, SIGINT (and SIGCHLD when reaping) itself while it runs. Given:
  // Run() takes every signal from it, acts on those three and drops the others.
  SignalWatcher* signals = nullptr;

  // After each successful start, the first included.
  std::function<void(const ChildProcess&)> on_start;
  // After each exit and each failed restart, before the backoff.
  std::function<void(const SupervisorExit&)> on_exit;
  // Before each restart (not the first start), after the backoff: the place to decide again and
  // change the spec. Unavailable defers the restart: the next backoff is waited out (signals
  // answered) and it is asked again. Any other error ends Run() with it and etcd stays down.
  std::function<Status(LaunchSpec&)> before_restart;
};

struct SupervisorStats {
  int starts = 0;    // successful starts
  int restarts = 0;  // successful starts after the first
  pid_t pid = 0;     // the running child; 0 while none runs
  std::optional<ExitStatus> last_exit;
  int orphans_reaped = 0;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Returns Ok once stopped, with the child gone (its status in stats().last_exit). Errors: the
  // first start failed (etcd missing: later failed restarts are retried), before_restart failed,
  // or the signal watcher or the wait failed; a child still running is then killed.
  Status Run();
  // As if SIGTERM had been received. Also before Run(), which then returns at once.
  void Stop();
  // A deliberate restart (a new trusted CA, DESIGN §14): the child is stopped as by Stop() (its stop
  // signal, the grace period, then SIGKILL) and started again at once through before_restart. The
  // caller has checked that the cluster keeps its quorum without this member. Ignored while no
  // child runs (the next start already reads what changed); a stop wins over it.
  void RequestRestart();
  SupervisorStats stats() const;

 private:
  // Waits until the child exits (nullopt child: never), `deadline` passes, or, when
  // `return_on_stop`, a stop is pending; reaps on the way. Returns the exit when it happened.
  Result<std::optional<ExitStatus>> WaitFor(ChildProcess* child, Clock::TimePoint deadline,
                                            bool return_on_stop);
  // One run of a started child, until it exits or has been stopped.
  Result<SupervisorExit> Supervise(ChildProcess& child, Clock::TimePoint started);
  // Forwards stop_signal_, waits out the grace period, then SIGKILLs; returns how the child ended.
  Result<ExitStatus> StopChild(ChildProcess& child);
  void Reap();

  SupervisorOptions options_;
  ProcessLauncher& launcher_;
  Clock& clock_;
  SignalWatcher* signals_ = nullptr;
  int stop_fd_ = -1;
  Status stop_fd_error_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> restart_requested_{false};
  // The signal a stop was asked with; sticks once set. Only Run()'s thread touches it.
  int stop_signal_ = 0;
  mutable std::mutex mu_;
  SupervisorStats stats_;
};

}  // namespace quorate
