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

// Fake time for one thread. Poll never blocks: when no fd is ready it jumps to the earlier of the
// deadline and the next event scheduled with At(), runs due events, and looks again. Waiting
// forever with nothing scheduled and nothing ready is reported as an error instead of hanging.
class FakeClock : public Clock {
 public:
  FakeClock();
  TimePoint Now() override { return now_; }
  Result<int> Poll(std::span<pollfd> fds, TimePoint deadline) override;

  // Runs `fn` (from Poll or Advance, on the caller's thread) once fake time reaches `at`.
  void At(TimePoint at, std::function<void()> fn);
  // Moves time forward, running the events that fall due on the way.
  void Advance(Duration d);

 private:
  void RunDue();
  TimePoint now_;
  std::multimap<TimePoint, std::function<void()>> events_;
};

}  // namespace quorate
