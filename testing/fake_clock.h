// FakeClock, the Clock of tests: fake time, for the supervisor's backoff and grace periods without
// sleeping. Built only into the test binaries (quorate_testing_dep).
#pragma once

#include <poll.h>

#include <functional>
#include <map>
#include <span>

#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate {

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
