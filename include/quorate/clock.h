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

}  // namespace quorate
