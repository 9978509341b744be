// A ProcessLauncher whose children live in fake time (FakeClock), for testing the supervisor and
// `quorate run` without spawning: each Start takes the next planned run, so the test decides when
// and how every child exits, and it sees every start and every signal. One thread only.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "node/process.h"
#include "testing/fake_clock.h"

namespace quorate {

struct FakeRun {
  // Exits by itself after this much fake time with `status`; nullopt: runs until a signal or
  // FakeProcessLauncher::Exit ends it.
  std::optional<Clock::Duration> run_for;
  ExitStatus status = ExitStatus::Exited(1);
  // SIGTERM and SIGINT are recorded but do nothing, as with a child that traps them; SIGKILL
  // always ends it. Otherwise the child dies of the signal at once.
  bool ignore_term = false;
  // Start fails with this instead of starting a child.
  Status start_error;

  static FakeRun ExitAfter(Clock::Duration run_for, ExitStatus status) {
    FakeRun r;
    r.run_for = run_for;
    r.status = status;
    return r;
  }
  static FakeRun UntilSignalled(bool ignore_term) {
    FakeRun r;
    r.ignore_term = ignore_term;
    return r;
  }
  static FakeRun FailStart(Status error) {
    FakeRun r;
    r.start_error = std::move(error);
    return r;
  }
};

class FakeProcessLauncher : public ProcessLauncher {
 public:
  explicit FakeProcessLauncher(FakeClock& clock);
  ~FakeProcessLauncher() override;

  // The runs of the next starts, in order; once they are used up, children run until signalled.
  void Plan(FakeRun run);
  Result<std::unique_ptr<ChildProcess>> Start(const LaunchSpec& spec) override;

  struct Started {
    LaunchSpec spec;
    pid_t pid;
    Clock::TimePoint at;
  };
  struct Signalled {
    pid_t pid;
    int signal;
    Clock::TimePoint at;
  };
  // Successful starts only; pids count up from 1000.
  const std::vector<Started>& starts() const;
  const std::vector<Signalled>& signals() const;
  // Ends the child of starts()[index] now; nothing if it has already exited.
  void Exit(size_t index, ExitStatus status);

 private:
  struct Shared;
  FakeClock& clock_;
  std::vector<FakeRun> plan_;
  size_t next_plan_ = 0;
  std::shared_ptr<Shared> shared_;
};

}  // namespace quorate
