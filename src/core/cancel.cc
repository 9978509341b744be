#include "core/cancel.h"

namespace quorate {

Cancellation::Registration::~Registration() {
  if (owner_ == nullptr) return;
  std::lock_guard lock(owner_->mu_);
  owner_->hooks_.erase(id_);
}

void Cancellation::Cancel() {
  std::lock_guard lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [id, hook] : hooks_) hook();
}

bool Cancellation::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

Cancellation::Registration Cancellation::OnCancel(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  if (cancelled_) {
    hook();
    return {};
  }
  uint64_t id = next_id_++;
  hooks_.emplace(id, std::move(hook));
  return {this, id};
}

}  // namespace quorate
