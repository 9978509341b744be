#include "node/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <set>

extern char** environ;

namespace quorate {
namespace {

// Children owned by a live RealChild. Whoever reaps one of them (its owner, or ReapOrphans on
// behalf of PID 1) does so under the lock and leaves the status here, so a status is never lost
// and a pid is never reused while its owner may still signal it.
struct Owned {
  std::optional<ExitStatus> status;
};

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}

std::map<pid_t, std::shared_ptr<Owned>>& Registry() {
  static std::map<pid_t, std::shared_ptr<Owned>> owned;
  return owned;
}

ExitStatus FromSiginfo(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return ExitStatus::Exited(info.si_status);
  return ExitStatus::Signaled(info.si_status);
}

class RealChild : public ChildProcess {
 public:
  RealChild(pid_t pid, int pidfd, std::shared_ptr<Owned> owned)
      : pid_(pid), pidfd_(pidfd), owned_(std::move(owned)) {}

  ~RealChild() override {
    if (!exit_status_) {
      (void)Signal(SIGKILL);
      pollfd p{pidfd_, POLLIN, 0};
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
      (void)Poll();
    }
    ::close(pidfd_);
  }

  pid_t pid() const override { return pid_; }
  int exit_fd() const override { return pidfd_; }
  std::optional<ExitStatus> exit_status() const override { return exit_status_; }

  Status Signal(int signal) override {
    std::string what = "send " + SignalName(signal) + " to pid " + std::to_string(pid_);
    if (exit_status_) return Status::FailedPrecondition(what + ": it has exited");
    // Through the pidfd, so a pid recycled after a reap elsewhere can never be hit.
    if (::syscall(SYS_pidfd_send_signal, pidfd_, signal, nullptr, 0) == 0) return Status::Ok();
    if (errno == ESRCH) return Status::FailedPrecondition(what + ": it has exited");
    return Status::FromErrno(errno, what);
  }

  Result<std::optional<ExitStatus>> Poll() override {
    if (exit_status_) return exit_status_;
    std::lock_guard lock(RegistryMutex());
    if (!owned_->status) {
      siginfo_t info{};
      if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG) != 0) {
        return Status::FromErrno(errno, "waitid for pid " + std::to_string(pid_));
      }
      if (info.si_pid == 0) return std::optional<ExitStatus>();
      owned_->status = FromSiginfo(info);
    }
    Registry().erase(pid_);
    exit_status_ = owned_->status;
    return exit_status_;
  }

 private:
  pid_t pid_;
  int pidfd_;
  std::shared_ptr<Owned> owned_;
  std::optional<ExitStatus> exit_status_;
};

// posix_spawn's attribute objects, released on every path out of Start.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int log_fd = -1;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (log_fd >= 0) ::close(log_fd);
  }
};

class SpawnLauncher : public ProcessLauncher {
 public:
  Result<std::unique_ptr<ChildProcess>> Start(const LaunchSpec& spec) override {
    if (spec.argv.empty()) return Status::InvalidArgument("start: no program given (empty argv)");
    const std::string& program = spec.argv[0];

    std::set<std::string> overridden;
    for (const auto& [name, value] : spec.env) {
      if (name.empty() || name.find('=') != std::string::npos) {
        return Status::InvalidArgument("start " + program + ": '" + name +
                                       "' is not an environment variable name");
      }
      overridden.insert(name);
    }
    overridden.insert(spec.unset_env.begin(), spec.unset_env.end());
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      if (overridden.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(entry);
    }
    for (const auto& [name, value] : spec.env) env_strings.push_back(name + "=" + value);

    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    SpawnSetup setup;
    if (!spec.log_path.empty()) {
      setup.log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (setup.log_fd < 0) return Status::FromErrno(errno, "open log file " + spec.log_path);
      posix_spawn_file_actions_adddup2(&setup.actions, setup.log_fd, STDOUT_FILENO);
      posix_spawn_file_actions_adddup2(&setup.actions, setup.log_fd, STDERR_FILENO);
    }
    // Sockets opened without CLOEXEC (by libraries) would otherwise keep quorate's ports bound
    // in etcd after quorate is gone.
    posix_spawn_file_actions_addclosefrom_np(&setup.actions, STDERR_FILENO + 1);
    // quorate blocks or catches signals of its own; etcd must see SIGTERM/SIGINT as a fresh
    // process would (ignored dispositions and the mask survive exec, handlers do not).
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&setup.attr, &none);
    posix_spawnattr_setsigdefault(&setup.attr, &all);
    posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    // Held from spawn to registration, so ReapOrphans cannot take this child's status unseen.
    std::lock_guard lock(RegistryMutex());
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, program.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
    if (rc != 0) return Status::FromErrno(rc, "start " + program);
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      int err = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return Status::FromErrno(err, "pidfd_open for " + program + " (needs Linux 5.3 or later)");
    }
    auto owned = std::make_shared<Owned>();
    Registry()[pid] = owned;
    return std::unique_ptr<ChildProcess>(new RealChild(pid, pidfd, std::move(owned)));
  }
};

}  // namespace

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string ExitStatus::ToString() const {
  if (signaled) return "killed by " + SignalName(code);
  return "exit code " + std::to_string(code);
}

Result<std::optional<ExitStatus>> ChildProcess::Wait(Clock::Duration timeout, Clock& clock) {
  Clock::TimePoint deadline = clock.Now() + timeout;
  for (;;) {
    auto status = Poll();
    if (!status.ok() || status->has_value()) return status;
    pollfd p{exit_fd(), POLLIN, 0};
    auto ready = clock.Poll({&p, 1}, deadline);
    if (!ready.ok()) return ready.status();
    if (*ready == 0) return Poll();
  }
}

ProcessLauncher& RealProcessLauncher() {
  static SpawnLauncher launcher;
  return launcher;
}

int ReapOrphans() {
  std::lock_guard lock(RegistryMutex());
  int orphans = 0;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG) != 0 || info.si_pid == 0) return orphans;
    auto it = Registry().find(info.si_pid);
    if (it == Registry().end()) {
      ++orphans;
    } else {
      it->second->status = FromSiginfo(info);
    }
  }
}

}  // namespace quorate
