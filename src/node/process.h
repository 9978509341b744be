// A child process as an object (after libcamera's Process): Start() reports a program that cannot
// run as an error, the exit is an event on a pollable fd, and signals go through the object. The
// caller owns each ChildProcess; a real one still running when destroyed is killed and reaped, so
// no etcd outlives quorate's handle on it. ProcessLauncher is the seam the supervisor is tested
// through (fake_process.h has the fake).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate {

// How a child ended: an exit code, or the signal that killed it.
struct ExitStatus {
  bool signaled = false;
  int code = 0;  // the exit code, or the signal number when signaled

  static ExitStatus Exited(int code) { return {false, code}; }
  static ExitStatus Signaled(int signal) { return {true, signal}; }
  bool success() const { return !signaled && code == 0; }
  // "exit code 3", "signal 9 (SIGKILL)".
  std::string ToString() const;
  bool operator==(const ExitStatus&) const = default;
};

// "SIGTERM" for 15; "signal 99" for a number without a name.
std::string SignalName(int signal);

// Where execvp would find `program` (a path, or a name on PATH): an executable regular file.
// NotFound naming PATH when there is none.
Result<std::string> FindProgram(const std::string& program);

struct LaunchSpec {
  // argv[0] is a path, or a name looked up on quorate's PATH.
  std::vector<std::string> argv;
  // The child's whole environment: nothing of quorate's own is passed unless it is listed here, so
  // no credential quorate was given reaches the child by accident (etcd_env.h builds etcd's).
  std::vector<std::pair<std::string, std::string>> env;
  // stdout and stderr are appended to this file (created 0600); empty: they are quorate's own.
  std::string log_path;
};

class ChildProcess {
 public:
  virtual ~ChildProcess() = default;
  virtual pid_t pid() const = 0;
  // FailedPrecondition once the child has exited: its pid may already belong to another process.
  virtual Status Signal(int signal) = 0;
  // Readable once the child has exited; stays readable. For poll loops.
  virtual int exit_fd() const = 0;
  // Collects the exit if it has happened, without blocking; nullopt while the child runs.
  virtual Result<std::optional<ExitStatus>> Poll() = 0;
  // The status once Poll() (or Wait) has seen the exit.
  virtual std::optional<ExitStatus> exit_status() const = 0;

  // Waits up to `timeout` on `clock` for the exit; nullopt when the child still runs.
  Result<std::optional<ExitStatus>> Wait(Clock::Duration timeout, Clock& clock = RealClock());
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts `spec`: NotFound/Internal naming the program when it cannot be executed (a missing
  // binary is an error here, not an exit code 127 later); Internal naming the log file when it
  // cannot be opened. The child stays in quorate's process group, so a terminal's Ctrl-C reaches
  // both, and starts with default signal dispositions and an empty signal mask. It gets SIGTERM
  // when quorate dies, even by SIGKILL (a parent-death signal), so no etcd runs on unsupervised:
  // Linux sends it when the *thread* that called Start ends, so call it from one that lives as
  // long as the child should (the supervisor's).
  virtual Result<std::unique_ptr<ChildProcess>> Start(const LaunchSpec& spec) = 0;
};

// fork and exec, and a pidfd (Linux 5.3 or later).
ProcessLauncher& RealProcessLauncher();

// Reaps every exited child, as PID 1 (or a subreaper) must, since orphans are re-parented to it.
// A child owned by a real ChildProcess is reaped too, but its status is kept for that object, so
// nothing is stolen from it. Returns how many children that no ChildProcess owns were reaped.
int ReapOrphans();

}  // namespace quorate
