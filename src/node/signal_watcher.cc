#include "node/signal_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "node/process.h"

namespace quorate {
namespace {

std::atomic<int> g_write_fd{-1};

void OnSignal(int signal) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  // A full pipe means the loop has plenty to read already; dropping a repeat is harmless.
  (void)!::write(g_write_fd.load(std::memory_order_relaxed), &byte, 1);
  errno = saved;
}

}  // namespace

Result<std::unique_ptr<SignalWatcher>> SignalWatcher::Create(const std::vector<int>& signals) {
  for (int s : signals) {
    if (s == SIGKILL || s == SIGSTOP || s <= 0 || s >= NSIG) {
      return Status::InvalidArgument("signal watcher: " + SignalName(s) + " cannot be caught");
    }
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno(errno, "signal watcher: pipe");
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::FailedPrecondition("signal watcher: another one is active; signals have one owner");
  }
  return std::unique_ptr<SignalWatcher>(new SignalWatcher(fds[0], fds[1], signals));
}

SignalWatcher::SignalWatcher(int read_fd, int write_fd, std::vector<int> signals)
    : read_fd_(read_fd), write_fd_(write_fd), signals_(std::move(signals)) {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART keeps other threads' system calls from failing with EINTR; stops and continues of
  // children are not exits and must not wake the loop.
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  previous_.resize(signals_.size());
  for (size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &action, &previous_[i]);
}

SignalWatcher::~SignalWatcher() {
  for (size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &previous_[i], nullptr);
  g_write_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalWatcher::Take() {
  std::vector<int> taken;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return taken;
    }
    taken.insert(taken.end(), buf, buf + n);
  }
}

bool SignalWatcher::watches(int signal) const {
  return std::find(signals_.begin(), signals_.end(), signal) != signals_.end();
}

}  // namespace quorate
