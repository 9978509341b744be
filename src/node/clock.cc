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

}  // namespace quorate
