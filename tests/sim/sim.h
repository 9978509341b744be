// The deterministic simulator of issue 14: N quorate nodes in one process, each running the real
// `quorate run` (RunNode: init job, supervisor, upkeep) through its seams, against etcds
// modelled at the level quorate observes them, a simulated network and a simulated clock. One seed
// decides everything (start times, faults, delays, which thread runs next), so a seed replays bit
// for bit; docs/DESIGN.md "Simulation" lists the invariants checked at every step.
#pragma once

#include <cstdint>
#include <set>
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
  // etcd's own guards on membership changes (--strict-reconfig-check): 1 on, 0 off as
  // `--strict-reconfig-check=false` makes them, so only quorate's own checks stand between a request
  // and a lost quorum; -1: the seed picks, one in two, apart like `mode`.
  int strict = -1;
  // One node more than --cluster-size, with the same token and its own flags, outside the set
  // discovery lists (a StatefulSet scaled past the size, a second unit started by mistake): rule 2's
  // "a cluster at its size is never grown". -1: one seed in four, picked apart. Never on a cloud,
  // whose group lists every instance it has.
  int extra = -1;
  // The leader's quorate maintains etcd's database (§12) against a modelled workload under a small
  // quota: NOSPACE, fragmentation, stuck learners and, off a cloud and without an extra node, one
  // StatefulSet scale-in in two. -1: one seed in four, picked apart; 0: no maintenance round runs, so
  // a seed replays as it did before the model learnt maintenance (a round asks every member's status).
  int maintenance = -1;
  // A learner lost right after its add. On a cloud its instance is replaced before it is promoted,
  // and in one such replacement of two a voter's instance goes with it: departed learner and
  // departed voter at once, which rule 9 takes learner first (a departed voter taken first leaves
  // the newcomer waiting for a learner that never catches up). Elsewhere its node loses its volume
  // once its etcd started, and comes back while the peers' lists still lack it: its decision to
  // join rests on views without a member that started (rule 2's linearizable read must catch it).
  // -1: one cloud seed in two, picked apart (elsewhere only when asked: it meets an open finding,
  // DESIGN §10); 0: off, as the seeds kept before the model learnt it ran.
  int learner_churn = -1;
  // `quorate run`'s scheduled backup (node/backup_job's BackupSchedule) on every node, into one store
  // in memory, each backup checked against the data the leader had applied. Run mode only (the init
  // mode's `quorate upkeep` takes none). -1: one seed in four, picked apart; 0: off, as the seeds
  // kept before the model had data ran.
  int backups = -1;
  // A follower's disk stalls for a while during the faults: its etcd appends nothing and falls behind
  // while the others commit, so raft's up-to-date rule decides the elections that follow (and a vote
  // from an empty log that should not vote can lose a put). -1: one seed in four, picked apart; 0: off,
  // as the seeds kept before run.
  int laggards = -1;
  // Once the faults stop and the cluster converged, or a node says a majority is lost, the operator
  // restores the newest scheduled backup on every node (`quorate run --restore-from` with a new
  // token, rule 7), trying it first on one node with the old token (rule 7b must refuse it), while
  // quorate processes are killed between any two calls and after each of the restore's steps. Run
  // mode without a cloud, an extra node or maintenance; implies backups. -1: one seed in four,
  // picked apart; 0: off, as the seeds kept before ran.
  int restore = -1;
  // In a restore seed, the operator first recovers from a member whose data survived (`quorate
  // recover --from-member`, rule 8: etcd replays a copy of its WAL, committed to its last entry)
  // and restores that backup instead of the newest scheduled one. -1: one restore seed in two; 0:
  // off, as the seeds kept before ran.
  int recover = -1;
  // Where the nodes' data and state dirs go (one directory per run, removed after it).
  std::string scratch = "/dev/shm";
};

// The checks a run can fail, each named apart from its message: a known finding, a kept seed or
// the mutation catalogue says which one it expects.
enum class Check {
  kNone,
  kException,         // an exception escaped the real code
  kBadInput,          // the real code refused its input: the simulation gives none
  kUpkeepBucket,      // init mode: quorate upkeep finds no member of its own in the bucket init wrote
  kModel,             // the simulator's own files could not be written
  kRestartedRemoved,  // rule 1b: etcd started again after holding it for a removal
  kReAdded,           // rule 1b: a removed member added back by the process that ran it
  kRemovalMisread,    // rule 1b: a member the cluster still lists taken for removed
  kNewOverData,       // rules 1, 3, 5: a `new` start over a cluster that has data
  kTwoClusterIds,     // rule 5: two clusters from one discovery set
  kTorn,              // §3: a file renamed into place before its data was synced, torn by a power cut
  kVoterAdded,        // rule 2: MemberAdd of a voter
  kStartedEmpty,      // rules 2, 4: etcd started with an empty data dir as a member that had started
  kBeyondSize,        // rule 2: MemberAdd to a cluster at --cluster-size
  kRemovedLive,       // rule 9: MemberRemove of a member whose etcd runs at a live instance
  kRemoveQuorum,      // §4: MemberRemove leaving fewer voters up than a quorum
  kPromoteEarly,      // rule 2: MemberPromote of a learner that never reached the quorum's side
  kPromoteQuorum,     // §4: MemberPromote leaving fewer voters up than a quorum
  kDataDeleted,       // §4: a WAL file etcd wrote is gone
  kMajorityLostUnsaid,  // liveness: a majority lost its data and no node waits saying so
  kNoConvergence,       // liveness: no convergence 15 minutes after the faults stopped
  kDefragTwo,           // §12: Defragment of a member while another one defragments
  kDefragLeaderFirst,   // §12: Defragment of the leader while a follower that needs it waits
  kDefragNoMargin,      // §12: Defragment while the other voters up are no quorum
  kDisarmEarly,         // §12 M3: NOSPACE disarmed while a database still leaves no room for a write
  kMaintenanceRemoval,  // §12 M6, M7: a removal that leaves the voters, or those up, short of a quorum
  kMaintenanceNotLeader,  // §12 M1: a maintenance request from a quorate whose etcd said it does not lead
  kNospaceStuck,        // liveness: a NOSPACE alarm stands 15 minutes after the faults stopped
  kWriteLost,           // §4: a put acknowledged by a majority of the voters is missing from a new leader's log
  kBackupData,          // §11: a committed backup does not hold the leader's applied puts at its revision
  kRestoreOldCluster,   // §4 rule 7b: a restore makes the cluster ID of an old cluster, which its old members fit
  kRestoreData,         // §4 rule 7: a restored member does not hold the backup's puts
  kRecoverLost,         // §4 rule 8: recover's backup lacks a put the survivor's log held, acknowledged
};
const char* CheckName(Check check);

struct RunResult {
  bool ok = true;
  Check check = Check::kNone;  // the check that failed
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
  bool strict = true;
  bool extra = false;
  bool maintenance = false;
  bool learner_churn = false;
  bool backups = false;
  bool laggards = false;
  bool restore = false;
  bool recover = false;  // the operator recovered from a surviving member (RunOptions::recover)
  // Nodes whose restore put the backup's member in place (the modelled etcdutl's runs that finished).
  int restores_done = 0;
  int backups_taken = 0;  // committed by the nodes' backup schedules, each checked (World::CheckBackup)
  // The named conditions the run reached (World::Mark): what a kept regression seed must still reach.
  std::set<std::string> reached;
  // Puts acknowledged to the simulated writer (committed by a majority of the voters), every cluster's.
  uint64_t acknowledged = 0;
  // A node started `new` in rule 3's init-mode window (DESIGN §4 rule 3, §10): reported, not failed.
  bool init_window = false;
};

RunResult RunSeed(const RunOptions& options);

}  // namespace quorate::sim
