#include "testing/fake_clock.h"

#include <algorithm>
#include <cerrno>

namespace quorate {

// Far from the epoch so that "now minus a backoff" never underflows in a test.
FakeClock::FakeClock() : now_(std::chrono::hours(1000)) {}

void FakeClock::At(TimePoint at, std::function<void()> fn) { events_.emplace(at, std::move(fn)); }

void FakeClock::Advance(Duration d) {
  TimePoint target = now_ + d;
  while (!events_.empty() && events_.begin()->first <= target) {
    now_ = std::max(now_, events_.begin()->first);
    RunDue();
  }
  now_ = target;
}

void FakeClock::RunDue() {
  // An event may schedule others, so take them one at a time.
  while (!events_.empty() && events_.begin()->first <= now_) {
    auto fn = std::move(events_.begin()->second);
    events_.erase(events_.begin());
    fn();
  }
}

Result<int> FakeClock::Poll(std::span<pollfd> fds, TimePoint deadline) {
  for (;;) {
    RunDue();
    int n = ::poll(fds.data(), fds.size(), 0);
    if (n < 0) return Status::FromErrno(errno, "poll");
    if (n > 0 || now_ >= deadline) return n;
    TimePoint next = deadline;
    if (!events_.empty()) next = std::min(next, events_.begin()->first);
    if (next == kNever) {
      return Status::FailedPrecondition(
          "FakeClock: waiting forever on fds that are not ready, with no event scheduled");
    }
    now_ = std::max(now_, next);
  }
}

}  // namespace quorate
