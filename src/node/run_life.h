// The life of `quorate run` (docs/DESIGN.md §5) as one explicit state: RunNode sets it at each
// transition, and /healthz and /readyz read it, from the status server's thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "quorate/status.h"

namespace quorate {

enum class RunState {
  // The first decision: init may wait for peers or a quorum up to --timeout.
  kDeciding,
  // etcd is being launched on a decision.
  kStarting,
  kRunning,
  // etcd exited (by itself, or stopped for a restart quorate asked): the supervisor waits out its
  // backoff before deciding again.
  kExited,
  // init decides again before a restart, as long as it may wait.
  kRedeciding,
  // init asked to keep etcd stopped (this member was removed, or a step to retry); it is asked
  // again after each backoff, and the state stays until it answers otherwise.
  kHeld,
};

class RunLife {
 public:
  // `why`: how etcd last ended (kExited) or why it is held (kHeld); unused otherwise. True when this
  // changes anything (another state, or another reason): a hold asked again is no new decision.
  bool Set(RunState state, std::string why = {});
  RunState state() const;

  // /healthz. Alive but while etcd is down between an exit and the next decision: deciding, held
  // and starting may last far longer than a liveness probe's patience, and a restart of quorate
  // then would cut a membership change short or turn a removal into a rejoin.
  Status Live() const;
  // /readyz. Only a running etcd can be ready, as `etcd_ready` (upkeep's last round) says; it is
  // asked in that state only.
  Status Ready(const std::function<Status()>& etcd_ready) const;

 private:
  mutable std::mutex mu_;
  RunState state_ = RunState::kDeciding;
  std::string why_;
};

}  // namespace quorate
