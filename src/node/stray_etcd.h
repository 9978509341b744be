// An etcd left running on this node's data dir by an earlier `quorate run` that died without
// stopping it (kill -9 of a quorate older than the parent-death signal, or etcd started by hand).
// A second etcd on the same data dir fails forever on "address already in use", so `quorate run`
// stops the stray before it starts its own, and again before every restart (a stray still starting
// up holds no lock yet, and one started by hand may take the data dir while ours is down). A stray is
// told by the lock etcd takes on the WAL files it writes, which only an etcd running on this data
// dir holds.
#pragma once

#include <chrono>
#include <string>

#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate {

// Stops every process holding a lock on a WAL file under `data_dir`: SIGTERM, SIGKILL once `grace`
// has passed, each with one log line. Ok when there was none, or once they have exited;
// FailedPrecondition when a WAL file is locked by a process this one cannot see or signal (another
// PID namespace or user), naming the file.
Status StopStrayEtcd(const std::string& data_dir, Clock::Duration grace = std::chrono::seconds(10),
                     Clock& clock = RealClock());

}  // namespace quorate
