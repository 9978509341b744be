// A stop for calls in flight on another thread. A round of upkeep against a cluster without quorum
// sits in calls that each run out their timeout (seconds); the thread that stops quorate joins that
// round, and without this it waited for them all before quorate could exit.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace quorate {

class Cancellation {
 public:
  // While it lives, Cancel() runs the hook given to OnCancel (a gRPC call's TryCancel).
  class Registration {
   public:
    Registration() = default;
    Registration(Cancellation* owner, uint64_t id) : owner_(owner), id_(id) {}
    Registration(Registration&& other) noexcept : owner_(other.owner_), id_(other.id_) { other.owner_ = nullptr; }
    Registration& operator=(Registration&&) = delete;
    Registration(const Registration&) = delete;
    ~Registration();

   private:
    Cancellation* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Once: every later call sees cancelled(), every registered hook runs now.
  void Cancel();
  bool cancelled() const;
  // Runs `hook` at once when cancelled already; otherwise on Cancel(), unless the registration ended
  // first. The hook runs under the lock, so it must not register.
  [[nodiscard]] Registration OnCancel(std::function<void()> hook);

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> hooks_;
};

}  // namespace quorate
