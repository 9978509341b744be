// Fetched credentials, kept until a margin before they expire, on one clock (the Clock seam, so
// tests move time). Every cloud's credentials go through one of these: one rule for all of them.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>

#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate::cloud {

// Credentials are fetched again when less than this is left of them, so no call carries one that
// expires on the way (AWS's and Azure's SDKs keep the same margin).
inline constexpr auto kRefreshMargin = std::chrono::minutes(5);

// How long a credential holds from when it was asked for, from the wall-clock expiry a cloud names.
Clock::Duration LifetimeUntil(std::chrono::system_clock::time_point expires);

template <typename T>
class TokenCache {
 public:
  // What a fetch gives: the value and how long it holds from when it was asked for.
  struct Fetched {
    T value;
    Clock::Duration lifetime;
  };
  using Fetch = std::function<Result<Fetched>(Clock::TimePoint deadline)>;

  TokenCache(Clock& clock, Fetch fetch) : clock_(clock), fetch_(std::move(fetch)) {}

  // The held value while more than kRefreshMargin is left of it, else a fresh one.
  Result<T> Get(Clock::TimePoint deadline) {
    std::lock_guard lock(mu_);
    if (held_ && clock_.Now() + kRefreshMargin < expires_) return *held_;
    const Clock::TimePoint asked = clock_.Now();
    auto fetched = fetch_(deadline);
    if (!fetched.ok()) return fetched.status();
    held_ = std::move(fetched->value);
    expires_ = asked + fetched->lifetime;
    return *held_;
  }

  // The value was refused (revoked, expired early): the next Get fetches another.
  void Drop() {
    std::lock_guard lock(mu_);
    held_.reset();
  }

 private:
  Clock& clock_;
  Fetch fetch_;
  std::mutex mu_;
  std::optional<T> held_;
  Clock::TimePoint expires_;
};

}  // namespace quorate::cloud
