// Time and waiting behind one seam, so the supervisor's backoff and grace periods are tested
// without sleeping. Waiting is on file descriptors (a pidfd, a signal pipe, a stop eventfd) with a
// deadline, which is the only way the supervisor ever waits. RealClock() is process-wide.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <map>
#include <span>

#include "quorate/status.h"

namespace quorate {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  static constexpr TimePoint kNever = TimePoint::max();

  virtual ~Clock() = default;
  virtual TimePoint Now() = 0;
  // Waits until one of `fds` is readable or `deadline` (kNever: no deadline) passes, and fills in
  // their revents. Returns how many are ready; 0 when the deadline passed first.
  virtual Result<int> Poll(std::span<pollfd> fds, TimePoint deadline) = 0;
};

// steady_clock and poll(2).
Clock& RealClock();

// The one retry pacing in quorate: waits `first`, then twice as long each time up to `max`, never
// past `deadline`, and returns early when `stop_fd` (the SignalWatcher's pipe, say) is readable, so
// every wait for peers, etcd or a store answers a stop signal at once. Waiting is the Clock's Poll,
// so tests drive it in fake time.
//
//   Backoff backoff(clock, 250ms, 4s, deadline, stop_fd);
//   while (!(s = TryIt()).ok()) {
//     if (auto w = backoff.Wait(); w != Backoff::kRetry) return w == Backoff::kStopped ? ... : ...;
//   }
class Backoff {
 public:
  enum Outcome {
    kRetry,     // waited; try again (the last wait ends at the deadline: one try there is due)
    kDeadline,  // the deadline had passed before this wait: give up
    kStopped,   // stop_fd became readable: give up now, saying so
  };
  Backoff(Clock& clock, Clock::Duration first, Clock::Duration max, Clock::TimePoint deadline = Clock::kNever,
          int stop_fd = -1);

  Outcome Wait();
  // Back to `first`, after a success in a loop that goes on.
  void Reset() { next_ = first_; }
  Clock::Duration next() const { return next_; }
  Clock::TimePoint deadline() const { return deadline_; }
  Clock& clock() const { return clock_; }

 private:
  Clock& clock_;
  Clock::Duration first_;
  Clock::Duration max_;
  Clock::Duration next_;
  Clock::TimePoint deadline_;
  int stop_fd_;
};

}  // namespace quorate
