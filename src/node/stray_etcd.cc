#include "node/stray_etcd.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "node/process.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "quorate/text.h"

namespace quorate {
namespace {

std::vector<std::string> WalFiles(const std::string& wal_dir) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(wal_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".wal") == 0) files.push_back(wal_dir + "/" + name);
    }
    ::closedir(d);
  }
  return files;
}

// etcd takes an open-file-description lock (fcntl F_OFD_SETLK) on Linux, and flock where those are
// missing; either one shows an etcd at work here.
bool IsLocked(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock query {};
  query.l_type = F_WRLCK;
  query.l_whence = SEEK_SET;
  bool locked = ::fcntl(fd, F_OFD_GETLK, &query) == 0 && query.l_type != F_UNLCK;
  if (!locked) {
    locked = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (!locked) ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return locked;
}

// The processes with a lock through one of their descriptors on a file in `wal_dir`: a locked
// descriptor lists the lock in its /proc fdinfo.
std::vector<pid_t> LockHolders(const std::string& wal_dir) {
  std::vector<pid_t> holders;
  const std::string prefix = wal_dir + "/";
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid_text = proc.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(pid_text.c_str()));
    if (pid == ::getpid()) continue;
    std::error_code fd_ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(fd.path().c_str(), target, sizeof target - 1);
      if (n <= 0 || std::string_view(target, static_cast<size_t>(n)).rfind(prefix, 0) != 0) continue;
      auto info = ReadFile(proc.path().string() + "/fdinfo/" + fd.path().filename().string(), 64 * 1024);
      if (info.ok() && info->find("\nlock:") != std::string::npos) {
        holders.push_back(pid);
        break;
      }
    }
  }
  return holders;
}

std::string CommandOf(pid_t pid) {
  auto cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid), 64 * 1024);
  if (!cmdline.ok()) return "?";
  for (char& c : *cmdline) {
    if (c == '\0') c = ' ';
  }
  return Printable(*cmdline, 200);
}

// Waits until the process behind `pidfd` exits or `deadline` passes; true when it exited.
Result<bool> Exited(int pidfd, Clock::TimePoint deadline, Clock& clock) {
  pollfd p{pidfd, POLLIN, 0};
  auto ready = clock.Poll({&p, 1}, deadline);
  if (!ready.ok()) return ready.status();
  return *ready > 0;
}

Status Stop(pid_t pid, const std::string& data_dir, Clock::Duration grace, Clock& clock) {
  const std::string command = CommandOf(pid);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0 && errno == ESRCH) return Status::Ok();
  if (pidfd < 0) return Status::FromErrno(errno, fmt::format("pidfd_open for pid {}", pid));
  auto signal = [&](int sig) {
    if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0 || errno == ESRCH) return Status::Ok();
    return Status::FailedPrecondition(
        fmt::format("etcd pid {} ({}) holds data dir {} and cannot be sent {}: {}; stop it, then start quorate again",
                    pid, command, data_dir, SignalName(sig), std::strerror(errno)));
  };
  spdlog::warn(
      "etcd pid {} ({}) runs on data dir {} and is not ours (left by an earlier quorate, or started by hand): "
      "stopping it (SIGTERM, SIGKILL after {}s) before starting ours",
      pid, command, data_dir, std::chrono::duration_cast<std::chrono::seconds>(grace).count());
  Status s = signal(SIGTERM);
  auto exited = s.ok() ? Exited(pidfd, clock.Now() + grace, clock) : Result<bool>(s);
  if (exited.ok() && !*exited) {
    spdlog::warn("etcd pid {} did not exit within {}s of SIGTERM: SIGKILL", pid,
                 std::chrono::duration_cast<std::chrono::seconds>(grace).count());
    s = signal(SIGKILL);
    exited = s.ok() ? Exited(pidfd, clock.Now() + grace, clock) : Result<bool>(s);
  }
  ::close(pidfd);
  if (!exited.ok()) return exited.status();
  if (!*exited) {
    return Status::FailedPrecondition(
        fmt::format("etcd pid {} on data dir {} did not exit even after SIGKILL", pid, data_dir));
  }
  return Status::Ok();
}

}  // namespace

Status StopStrayEtcd(const std::string& data_dir, Clock::Duration grace, Clock& clock) {
  std::error_code ec;
  const std::string wal_dir = std::filesystem::weakly_canonical(data_dir + "/member/wal", ec).string();
  if (ec) return Status::Ok();
  std::string locked;
  for (const auto& file : WalFiles(wal_dir)) {
    if (IsLocked(file)) locked = file;
  }
  if (locked.empty()) return Status::Ok();
  std::vector<pid_t> holders = LockHolders(wal_dir);
  // No holder found may be an etcd that let go of its descriptors between the lock check and the
  // /proc scan (killed a moment ago, exiting now): its lock goes with it, so that is waited for,
  // within the grace period, before calling the holder one quorate cannot see.
  Backoff backoff(clock, std::chrono::milliseconds(20), std::chrono::milliseconds(200), clock.Now() + grace, -1);
  while (holders.empty() && IsLocked(locked) && backoff.Wait() == Backoff::kRetry) {
    holders = LockHolders(wal_dir);
  }
  if (holders.empty() && !IsLocked(locked)) return Status::Ok();
  if (holders.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "{} is locked by an etcd quorate cannot see (another PID namespace or user?): stop the etcd running on "
        "data dir {}, then start quorate again",
        locked, data_dir));
  }
  for (pid_t pid : holders) {
    if (Status s = Stop(pid, data_dir, grace, clock); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace quorate
