#include "node/process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>

#include "quorate/fs.h"

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

[[noreturn]] void FailChild(int error_fd, int err) {
  ssize_t ignored = ::write(error_fd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

// The child's side of Start, between fork and exec: async-signal-safe calls only. A failure is
// reported through `error_fd` as an errno and the child exits 127.
[[noreturn]] void ExecChild(pid_t parent, int error_fd, int log_fd, const char* path, char* const* argv,
                            char* const* envp) {
  auto fail = [error_fd](int err) { FailChild(error_fd, err); };
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) fail(errno);
  // quorate died before the line above: the signal will never come, so do not start at all.
  if (::getppid() != parent) ::_exit(127);
  // quorate blocks or catches signals of its own; the child must see SIGTERM/SIGINT as a fresh
  // process would (ignored dispositions and the mask survive exec, handlers do not).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (log_fd >= 0 && (::dup2(log_fd, STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0)) fail(errno);
  // Sockets opened without CLOEXEC (by libraries) would otherwise keep quorate's ports bound in
  // the child after quorate is gone. The error pipe closes at exec by itself.
  if (::syscall(SYS_close_range, STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail(errno);
  ::execve(path, argv, envp);
  FailChild(error_fd, errno);
}

class ForkLauncher : public ProcessLauncher {
 public:
  Result<std::unique_ptr<ChildProcess>> Start(const LaunchSpec& spec) override {
    if (spec.argv.empty()) return Status::InvalidArgument("start: no program given (empty argv)");
    const std::string& program = spec.argv[0];
    std::vector<std::string> env_strings;
    for (const auto& [name, value] : spec.env) {
      if (name.empty() || name.find('=') != std::string::npos) {
        return Status::InvalidArgument("start " + program + ": '" + name +
                                       "' is not an environment variable name");
      }
      env_strings.push_back(name + "=" + value);
    }
    auto path = FindProgram(program);
    if (!path.ok()) return path.status();

    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);

    UniqueFd log_fd;
    if (!spec.log_path.empty()) {
      log_fd.reset(::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
      if (!log_fd) return Status::FromErrno(errno, "open log file " + spec.log_path);
    }
    int error_pipe[2];
    if (::pipe2(error_pipe, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for starting " + program);
    UniqueFd error_read(error_pipe[0]), error_write(error_pipe[1]);

    // Held from fork to registration, so ReapOrphans cannot take this child's status unseen.
    std::lock_guard lock(RegistryMutex());
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return Status::FromErrno(errno, "fork to start " + program);
    if (pid == 0) ExecChild(parent, error_write.get(), log_fd.get(), path->c_str(), argv.data(), envp.data());
    error_write.reset();
    // Empty at exec (the pipe is CLOEXEC), or the errno of the step that failed.
    int child_errno = 0;
    ssize_t n;
    while ((n = ::read(error_read.get(), &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    if (n > 0) {
      ::waitpid(pid, nullptr, 0);
      return Status::FromErrno(child_errno, "start " + program);
    }
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

// Where execvp would find `program`, looked up before fork: after it, only async-signal-safe
// calls may run in the child, and a lookup there allocates.
Result<std::string> FindProgram(const std::string& program) {
  auto runnable = [](const std::string& candidate) {
    struct stat st;
    return ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return program;
    return Status::NotFound("start " + program + ": no executable file there");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t colon = std::min(dirs.find(':', start), dirs.size());
    std::string dir = dirs.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (runnable(candidate)) return candidate;
    start = colon + 1;
  }
  return Status::NotFound("start " + program + ": no such program on PATH (" + dirs + ")");
}

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
  static ForkLauncher launcher;
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
