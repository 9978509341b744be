// The deterministic simulator of issue 14: N quorate nodes in one process, each running the real
// init job (gather → plan → apply), supervisor and upkeep through their seams, against etcds
// modelled at the level quorate observes them, a simulated network and a simulated clock. One seed
// decides everything (start times, faults, delays, which thread runs next), so a seed replays bit
// for bit; docs/DESIGN.md "Simulation" lists the invariants checked at every step.
#pragma once

#include <cstdint>
#include <string>

namespace quorate::sim {

struct RunOptions {
  uint64_t seed = 1;
  int nodes = 3;
  // Every event of the run and every log line of the real code, on stderr, for a replay.
  bool verbose = false;
  // The add check of etcd 3.4 (every voter connected for 5 s) or 3.5 (quorum holds); 0: the seed picks.
  int etcd_minor = 0;
  // How the nodes run quorate: `quorate run` (kRun), or `quorate init` before etcd with `quorate
  // upkeep` beside it (kInit: an init container, or a unit's ExecStartPre); kSeedPicks: one in four
  // seeds is init, chosen apart from the run's generator so a seed's run-mode schedule is unchanged.
  enum class Mode { kSeedPicks, kRun, kInit };
  Mode mode = Mode::kSeedPicks;
  // Discovery lists a cloud's whole scaling group, which replaces a failed instance with a new one
  // (new name, new address, empty disk): rule 9's ground. -1: one seed in four, picked like `mode`.
  int cloud = -1;
  // Where the nodes' data and state dirs go (one directory per run, removed after it).
  std::string scratch = "/dev/shm";
};

struct RunResult {
  bool ok = true;
  std::string failure;  // the invariant or liveness check that failed, and the state around it
  // FNV-1a over every event of the run in order: equal for two runs of one seed.
  uint64_t trace_hash = 0;
  // FNV-1a over the decisions the nodes took in order (node, action or wait), for coverage.
  uint64_t decision_hash = 0;
  int quorate_starts = 0;
  int etcd_starts = 0;
  uint64_t steps = 0;
  double simulated_seconds = 0;
  // The run ended with a majority of the cluster's data lost, so waiting was right, and the
  // waiting node said so.
  bool majority_lost = false;
  bool etcd35 = false;
  bool init_mode = false;
  bool cloud = false;
  // A node started `new` in rule 3's init-mode window (DESIGN §4 rule 3, §10): reported, not failed.
  bool init_window = false;
};

RunResult RunSeed(const RunOptions& options);

}  // namespace quorate::sim
