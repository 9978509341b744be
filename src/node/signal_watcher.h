// The one place quorate handles signals. Each watched signal becomes a byte on a pipe (the
// self-pipe trick), so a poll loop sees it beside a child's exit and nothing but one write(2)
// runs in a handler. Handlers rather than a signalfd because a signalfd needs the signal blocked
// in every thread, and gRPC or httplib threads started earlier would take the default action
// (terminate) instead. Handlers are process-wide, so only one watcher exists at a time; the
// previous dispositions come back when it is destroyed.
#pragma once

#include <signal.h>

#include <memory>
#include <vector>

#include "quorate/status.h"

namespace quorate {

class SignalWatcher {
 public:
  // FailedPrecondition while another watcher exists; InvalidArgument for a signal that cannot be
  // caught (SIGKILL, SIGSTOP).
  static Result<std::unique_ptr<SignalWatcher>> Create(const std::vector<int>& signals);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Readable while signals are pending.
  int fd() const { return read_fd_; }
  // The pending signals in arrival order (repeats kept), clearing them. Never blocks.
  std::vector<int> Take();
  bool watches(int signal) const;

 private:
  SignalWatcher(int read_fd, int write_fd, std::vector<int> signals);
  int read_fd_;
  int write_fd_;
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

}  // namespace quorate
