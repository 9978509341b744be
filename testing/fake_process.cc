#include "testing/fake_process.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

namespace quorate {
namespace {

// What the launcher and a child's handle both see, so either may go first.
struct ChildState {
  pid_t pid = 0;
  bool ignore_term = false;
  int event_fd = -1;
  std::optional<ExitStatus> exited;

  ~ChildState() {
    if (event_fd >= 0) ::close(event_fd);
  }
  void Exit(ExitStatus status) {
    if (exited) return;
    exited = status;
    uint64_t one = 1;
    // An eventfd write of 1 cannot block or fail short of a broken fd.
    (void)!::write(event_fd, &one, sizeof one);
  }
};

}  // namespace

struct FakeProcessLauncher::Shared {
  std::vector<Started> starts;
  std::vector<Signalled> signals;
  std::vector<std::shared_ptr<ChildState>> children;
};

namespace {

class FakeChild : public ChildProcess {
 public:
  FakeChild(std::shared_ptr<ChildState> state, std::function<void(int)> record_signal)
      : state_(std::move(state)), record_signal_(std::move(record_signal)) {}

  pid_t pid() const override { return state_->pid; }
  int exit_fd() const override { return state_->event_fd; }
  std::optional<ExitStatus> exit_status() const override { return seen_; }

  Status Signal(int signal) override {
    if (seen_) {
      return Status::FailedPrecondition("send " + SignalName(signal) + " to pid " +
                                        std::to_string(state_->pid) + ": it has exited");
    }
    record_signal_(signal);
    if (signal == SIGKILL || ((signal == SIGTERM || signal == SIGINT) && !state_->ignore_term)) {
      state_->Exit(ExitStatus::Signaled(signal));
    }
    return Status::Ok();
  }

  Result<std::optional<ExitStatus>> Poll() override {
    seen_ = state_->exited;
    return seen_;
  }

 private:
  std::shared_ptr<ChildState> state_;
  std::function<void(int)> record_signal_;
  std::optional<ExitStatus> seen_;
};

}  // namespace

FakeProcessLauncher::FakeProcessLauncher(FakeClock& clock)
    : clock_(clock), shared_(std::make_shared<Shared>()) {}

FakeProcessLauncher::~FakeProcessLauncher() = default;

void FakeProcessLauncher::Plan(FakeRun run) { plan_.push_back(std::move(run)); }

const std::vector<FakeProcessLauncher::Started>& FakeProcessLauncher::starts() const {
  return shared_->starts;
}

const std::vector<FakeProcessLauncher::Signalled>& FakeProcessLauncher::signals() const {
  return shared_->signals;
}

void FakeProcessLauncher::Exit(size_t index, ExitStatus status) {
  shared_->children.at(index)->Exit(status);
}

Result<std::unique_ptr<ChildProcess>> FakeProcessLauncher::Start(const LaunchSpec& spec) {
  FakeRun run;
  if (next_plan_ < plan_.size()) run = plan_[next_plan_++];
  if (!run.start_error.ok()) return run.start_error;

  auto state = std::make_shared<ChildState>();
  state->pid = static_cast<pid_t>(1000 + shared_->starts.size());
  state->ignore_term = run.ignore_term;
  state->event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state->event_fd < 0) return Status::FromErrno(errno, "eventfd for a fake child");
  shared_->starts.push_back({spec, state->pid, clock_.Now()});
  shared_->children.push_back(state);
  if (run.run_for) {
    clock_.At(clock_.Now() + *run.run_for, [state, status = run.status] { state->Exit(status); });
  }
  std::weak_ptr<Shared> shared = shared_;
  pid_t pid = state->pid;
  FakeClock& clock = clock_;
  auto record = [shared, pid, &clock](int signal) {
    if (auto s = shared.lock()) s->signals.push_back({pid, signal, clock.Now()});
  };
  return std::unique_ptr<ChildProcess>(new FakeChild(std::move(state), std::move(record)));
}

}  // namespace quorate
