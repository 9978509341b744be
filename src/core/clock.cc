#include "quorate/clock.h"

#include <algorithm>
#include <cerrno>
#include <climits>

namespace quorate {
namespace {

class SteadyClock : public Clock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }

  Result<int> Poll(std::span<pollfd> fds, TimePoint deadline) override {
    for (;;) {
      int timeout_ms = -1;
      if (deadline != kNever) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Now()).count();
        timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
      }
      int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n >= 0) return n;
      // A signal handler (the SignalWatcher's) interrupts poll; its byte is in the pipe we poll.
      if (errno != EINTR) return Status::FromErrno(errno, "poll");
    }
  }
};

}  // namespace

Clock& RealClock() {
  static SteadyClock clock;
  return clock;
}

Backoff::Backoff(Clock& clock, Clock::Duration first, Clock::Duration max, Clock::TimePoint deadline, int stop_fd)
    : clock_(clock), first_(first), max_(max), next_(first), deadline_(deadline), stop_fd_(stop_fd) {}

Backoff::Outcome Backoff::Wait() {
  Clock::TimePoint now = clock_.Now();
  if (now >= deadline_) return kDeadline;
  Clock::TimePoint until = deadline_ - now < next_ ? deadline_ : now + next_;
  next_ = std::min(next_ * 2, max_);
  pollfd stop{stop_fd_, POLLIN, 0};
  // poll(2) ignores a negative fd, so without one this is a plain sleep until `until`.
  auto ready = clock_.Poll(std::span<pollfd>(&stop, 1), until);
  if (ready.ok() && *ready > 0 && (stop.revents & POLLIN) != 0) return kStopped;
  return kRetry;
}

}  // namespace quorate
