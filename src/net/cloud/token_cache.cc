#include "net/cloud/token_cache.h"

namespace quorate::cloud {

Clock::Duration LifetimeUntil(std::chrono::system_clock::time_point expires) {
  const auto now = std::chrono::system_clock::now();
  if (expires <= now) return Clock::Duration::zero();
  // Long-term keys never expire; ten years stands for that without overflowing the clock's arithmetic.
  const auto left = std::min<std::chrono::system_clock::duration>(expires - now, std::chrono::hours(24 * 3660));
  return std::chrono::duration_cast<Clock::Duration>(left);
}

}  // namespace quorate::cloud
