#include "node/run_life.h"

namespace quorate {

bool RunLife::Set(RunState state, std::string why) {
  std::lock_guard lock(mu_);
  bool changed = state != state_ || why != why_;
  state_ = state;
  why_ = std::move(why);
  return changed;
}

RunState RunLife::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

Status RunLife::Live() const {
  std::lock_guard lock(mu_);
  if (state_ != RunState::kExited) return Status::Ok();
  return Status::Unavailable("etcd is not running; it last ended with " + why_);
}

Status RunLife::Ready(const std::function<Status()>& etcd_ready) const {
  std::unique_lock lock(mu_);
  switch (state_) {
    case RunState::kDeciding:
      return Status::Unavailable("deciding how to start etcd");
    case RunState::kStarting:
      return Status::Unavailable("etcd is starting");
    case RunState::kRunning:
      // Upkeep's answer is its own to lock: asked outside this lock, so a transition never waits on it.
      lock.unlock();
      return etcd_ready();
    case RunState::kExited:
      return Status::Unavailable("etcd is not running; it last ended with " + why_);
    case RunState::kRedeciding:
      return Status::Unavailable("etcd is not running; deciding again how to start it");
    case RunState::kHeld:
      return Status::Unavailable(why_);
  }
  return Status::Unavailable("unknown state");
}

}  // namespace quorate
