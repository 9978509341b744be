// `quorate run` (docs/DESIGN.md §5): init, then etcd as a supervised child, with the agent and the status
// endpoints serving for as long as it runs, and the member's own upkeep (learner promotion, peer
// URL updates) done in the background; or that upkeep alone, beside an etcd started by others.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "node/init.h"
#include "node/process.h"
#include "node/restore.h"
#include "node/signal_watcher.h"
#include "node/upkeep.h"
#include "quorate/clock.h"
#include "quorate/status.h"
#include "status/status_server.h"

namespace quorate {

// What `quorate run` and `quorate upkeep` do to the world beside etcd's own files, each a seam so the
// simulator (tests/sim) runs them itself; null (or empty) means the real one. --backup-to and the
// TLS flags bring in more, on their own seams (the store's URL, the clock).
struct NodeSeams {
  Clock* clock = nullptr;
  // Serves /healthz, /readyz and /metrics until the handle is dropped; null: StatusServer on
  // --status-listen (none when it is empty).
  std::function<Result<std::shared_ptr<void>>(Metrics& metrics, StatusChecks checks)> serve_status;
  // Upkeep's seams: the clock and the TLS renewer are set over them.
  UpkeepOptions upkeep;
  // Runs upkeep's rounds until the handle is dropped; null: Upkeep::Start, then Stop.
  std::function<std::shared_ptr<void>(Upkeep& upkeep)> run_upkeep;
};

struct RunSeams : NodeSeams {
  // Starts etcd.
  ProcessLauncher* launcher = nullptr;
  // Where SIGTERM and SIGINT arrive. Null: a watcher made by RunNode, of SIGCHLD too when quorate is
  // PID 1 (it then reaps orphans). Only one watcher may exist in a process.
  SignalWatcher* signals = nullptr;
  // Ok when --etcd names a program that can be run; null: FindProgram.
  std::function<Status(const std::string& etcd_path)> find_etcd;
  // Stops an etcd that holds the data dir's WAL and is not ours; null: StopStrayEtcd.
  std::function<Status(const std::string& data_dir)> stop_stray_etcd;
  // The init job's seams: the clock, the agent mode, the stop source and etcd_files_required are
  // set over them.
  InitOptions init;
  // The restore's (--restore-from): its store and etcd's tool; its clock, peers and etcd clients,
  // unless given, are init's.
  RestoreSeams restore;
  // The simulator's view, null in quorate itself: every answer of the init job (the first decision
  // and each one before a restart), and etcd starting (true) or exiting (false) as the supervisor saw it.
  std::function<void(const Result<InitOutcome>& outcome)> on_decided;
  std::function<void(bool running)> on_etcd_running;
};

struct UpkeepNodeSeams : NodeSeams {
  // Returns when quorate upkeep is to stop; null: at SIGTERM or SIGINT.
  std::function<Status()> wait_for_stop;
};

// `extra_etcd_args` are the words after `--`, appended to etcd's command line.
Status RunNode(const Config& config, const std::vector<std::string>& extra_etcd_args, RunSeams seams = {});

// `quorate upkeep`: the member's upkeep and the status endpoints beside an etcd that quorate does
// not run (a plain etcd container after `quorate init`), until SIGTERM or SIGINT. The member is
// --name in the bucket init wrote to --state-dir.
Status UpkeepNode(const Config& config, UpkeepNodeSeams seams = {});

}  // namespace quorate
