// The simulated world one seed runs in: a baton scheduler over the threads of the real quorate code,
// the clock, the network, the etcds and the fault schedule. Only one thread runs at a time; every seam
// call (a clock wait, a peer ask, an etcd call, a process start, a discovery call) hands the baton
// back to the driver, which picks who runs next with the seeded generator. A crash is a SimCrash
// thrown from the seam call the killed thread is parked in, unwinding the real code.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/cluster.h"
#include "core/config.h"
#include "core/etcd_version.h"
#include "etcd/etcd_client.h"
#include "node/backup_job.h"
#include "node/init.h"
#include "node/peers.h"
#include "node/process.h"
#include "node/restore.h"
#include "node/run.h"
#include "node/signal_watcher.h"
#include "node/upkeep.h"
#include "quorate/clock.h"
#include "quorate/member.h"
#include "sim.h"
#include "status/status_server.h"
#include "testing/mem_vfs.h"

namespace quorate::sim {

using TimePoint = Clock::TimePoint;
using Duration = Clock::Duration;

// Thrown from a seam call to end the quorate process the calling thread belongs to.
struct SimCrash {};

// splitmix64: small, fast, and the same on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }
  Duration Between(std::chrono::milliseconds lo, std::chrono::milliseconds hi);

 private:
  uint64_t state_;
};

struct Wait {
  enum Kind { kNow, kUntil, kFds };
  Kind kind = kNow;
  TimePoint until = Clock::kNever;
  std::vector<pollfd> fds;
};

struct Proc;

// One entry of a cluster's raft log as a member's WAL holds it: the term of the leader that appended
// it, and the client's put it carries (0: the empty entry a leader appends as it takes office, which
// commits what earlier terms left uncommitted).
struct LogEntry {
  uint64_t term = 0;
  uint64_t write = 0;
  bool operator==(const LogEntry&) const = default;
};

struct Task {
  int node = -1;  // -1: the operator
  Proc* proc = nullptr;
  std::function<void()> body;
  std::thread thread;
  std::binary_semaphore go{0};  // the driver hands this task the baton
  Wait wait;
  bool done = false;
  bool killed = false;
  // Parked right after a change went through: a crash here is one between the change and its answer.
  bool after_change = false;
  // Parked right after renaming a file into place, its directory not synced yet.
  bool in_write = false;
  // Parked right after this step of a restore (RestoreStepHook): a crash here is one after it.
  std::string restore_step;
};

// A file renamed into place by a quorate process whose directory was not synced since: a power cut
// may undo the rename, and tears the file when its data was not synced before the rename.
struct PendingRename {
  std::string target;
  bool data_synced = false;
  std::optional<std::string> before;  // what the target held before; nullopt: absent
  std::string content;                // what the rename put there
};

// An etcd process as the supervisor sees it.
struct Child {
  pid_t pid = 0;
  int exit_fd = -1;
  std::optional<ExitStatus> exited;
  ~Child();
};

// One run of `quorate run` on a node, or in init mode one start of its pod (init, then etcd with
// upkeep beside it): its threads and what they share.
struct Proc {
  int node = 0;
  int gen = 0;  // how many quorate processes this node had before this one
  std::vector<Task*> tasks;
  std::unique_ptr<ProcessLauncher> launcher;
  bool etcd_running = false;  // between the supervisor's on_start and on_exit (init mode: etcd's launch and exit)
  // What /healthz and /readyz would ask, while the real code serves them: read for a failure's report.
  std::optional<StatusChecks> probes;
  bool etcd_ran = false;
  // Regular files this process synced (by path), and its renames whose directory it has not synced.
  std::set<std::string> synced;
  std::vector<PendingRename> pending;
};

struct EtcdState {
  bool running = false;
  std::shared_ptr<Child> child;
  MemberId id = 0;
  ClusterId cluster_id = 0;
  int incarnation = -1;
  TimePoint ready_at{};  // its peer port answers from then on
  bool connected = false;  // to the leader, in the quorum's side of the network
  TimePoint connected_since{};
  // A defragmentation runs until then: the member serves no client meanwhile (it keeps its raft role).
  TimePoint defrag_until{};
};

struct Node {
  int index = 0;
  std::string name, host, peer_url, client_url, root, data_dir;
  Config config;
  std::unique_ptr<Proc> proc;
  int gens = 0;
  bool restart_pending = false;
  // Learner churn: its volume goes once its member publishes, its peers' lists lagging from then, or
  // (current_peer >= 0) every peer's but current_peer's from before the add.
  bool lose_volume_once_published = false;
  int current_peer = -1;
  // The real agent's answer while a quorate process of this node serves it (InitOptions::serve_agent),
  // and that process's generation: Ask calls it as a peer's AskAgent reaches the AgentServer.
  std::mutex agent_mu;
  std::function<AgentState()> agent_answer;
  int agent_gen = -1;
  // etcd on empty data writes its WAL a moment after its launch; until then, its member and cluster.
  std::optional<std::pair<MemberId, ClusterId>> wal_pending;
  EtcdState etcd;
  int data_incarnation = -1;  // the cluster incarnation whose WAL the data dir holds
  MemberId data_member = 0;
  std::optional<ClusterView> view;  // what its etcd knows of the membership, kept with its data
  // Its etcd's raft log went past the bootstrap (it was on a quorum's side once), kept with its data.
  bool log_past_bootstrap = false;
  // Its data was made by a `new` start of a member that had started before and lost its data: it
  // holds none of that member's history until a quorum's leader brings it up to date.
  bool data_refounded = false;
  // Its database file as its etcd last wrote it (bbolt's high-water mark of pages: compaction frees
  // pages inside it, only a defragmentation shrinks it), its raft applied index, and when it was last
  // defragmented; all kept with its data.
  int64_t db_size = 0;
  uint64_t applied = 0;
  TimePoint defragmented_at{};
  // A StatefulSet scale-in deleted its pod: it never runs again.
  bool gone = false;
  // When its upkeep's maintenance round last listed the members: the facts a removal or a
  // defragmentation it asks for rest on.
  TimePoint maintenance_look_at{};
  // Whether its own etcd's status, as its maintenance round last read it, named that etcd the leader
  // (§12 M1: only the leader's quorate maintains).
  bool maintainer_told_leader = false;
  // Its etcd's raft log, every entry durable in its WAL once appended; kept with its data (a member
  // that starts on an empty data dir, whatever its ID, has none of it). Of those, the commit index
  // it last learnt, the entries applied to its backend and the ones bbolt committed to the db file:
  // bbolt commits in batches, so an exit loses the applied tail past the last batch, which the WAL
  // replays up to the known commit when etcd starts again.
  std::vector<LogEntry> log;
  uint64_t commit_seen = 0;
  uint64_t kv_applied = 0;
  uint64_t kv_committed = 0;
  TimePoint batch_at{};
  // Its disk stalls until then (RunOptions::laggards): as a follower it appends nothing meanwhile.
  TimePoint stalled_until{};
  // WAL files its etcd wrote, by inode, where last seen: quorate may move them, never delete them.
  std::vector<std::pair<ino_t, std::string>> wals;
  TimePoint slow_until{}, frozen_until{}, odd_discovery_until{};
  int odd_discovery = 0;
  // The live instance the group's own listing leaves out (odd_discovery 3), drawn at the first
  // listing of the window: an instance in standby stays out of every listing until it is counted
  // again, so rule 9's second look (StillOutsideGroup) meets the same gap. -1: none drawn yet.
  int left_out = -1;
  std::vector<uint64_t> asks;  // per peer, for the drops of asks made on GatherFacts' threads
  // Per peer, when this node's init job last asked it (each GatherFacts thread writes its own): the
  // facts a change rests on are those of the last round.
  std::vector<TimePoint> asked_at;
  std::string last_message;    // the last wait or failure the real code gave
  // Its member was removed while this quorate process ran etcd: by the operator, or by M6 (a learner)
  // while that etcd ran; rule 1b holds it, and never adds it back from this process.
  int removed_in_gen = -1;
  int held_removed_gen = -1;   // this quorate process held etcd stopped: its member was removed (rule 1b)
  MemberId removed_under = 0;  // the member removed (as above, or the operator's at any time) while this node held its data
  // Outside the discovered set, with the same token (RunOptions::extra).
  bool extra = false;
  // The operator tries the restore on this node first with the old token, which rule 7b refuses.
  bool restore_trial = false;
  // The member etcd's restore tool wrote for this node (its cluster incarnation and member ID), not
  // yet seen in place under the data dir: the data is that member's once its WAL is (AdoptRestored).
  std::optional<std::pair<int, MemberId>> restored_pending;
  // The rule of the last decision its init job made, when that was a wait (kNone after a start),
  // and when it was made: a change it carries out rests on facts no older than that.
  WaitKind last_wait = WaitKind::kNone;
  Reason last_reason = Reason::kNone;  // of the last failure its init job returned
  TimePoint decided_at{};
  // When its etcd last answered on its peer URL, as which member of which cluster incarnation.
  TimePoint answered_at{};
  TimePoint in_quorum_at{};  // and when it was last on the side of a quorum of its cluster
  MemberId answered_as = 0;
  int answered_inc = -1;
  // The view its etcd answered before it last exited; answered again, in place of the current one,
  // until old_answers_until (a previous incarnation's answers, held up on the way).
  std::optional<ClusterView> prev_view;
  TimePoint old_answers_until{};
  // etcd restarting on its data lists the members as it replays its WAL: until replay_until only
  // the first replay_members of the bootstrap's, none started yet (ViewAnswered).
  TimePoint replay_until{};
  size_t replay_members = 0;
  // Its etcd's serializable member list lags the committed membership by this much until then.
  TimePoint lagging_until{};
  Duration lag{};
};

// One etcd cluster as raft holds it: one incarnation per bootstrap.
struct SimCluster {
  ClusterId id = 0;
  std::string token;
  std::vector<ClusterMember> members;
  std::map<MemberId, Duration> catch_up;  // how long a learner takes to catch up once connected
  std::vector<MemberId> caught_up;
  int adds = 0;
  // The membership from each change on: what a member whose list lags still answers.
  std::vector<std::pair<TimePoint, std::vector<ClusterMember>>> history;
  // The key-value store as maintenance sees it: the revision, the revision compacted up to, the raft
  // index, and the members whose NOSPACE alarm stands (since when).
  int64_t revision = 1;
  int64_t compacted = 0;
  uint64_t raft_index = 1;
  std::vector<MemberId> nospace;
  TimePoint nospace_since{};
  bool disarmed_before = false;  // a NOSPACE alarm was disarmed once already
  MemberId leader = 0;  // raft's, as last elected (World::LeaderSeenBy)
  // The data: raft's current term, and the entries a majority of the voters held in their logs,
  // in order: committed, so each put among them was acknowledged to the writer (and must never be lost).
  uint64_t term = 1;
  std::vector<LogEntry> committed;
  // Rule 3's init-mode window started a member `new` beside a kept log past the bootstrap, which
  // DESIGN §4 accepts: from then on the acknowledged puts of this cluster are not held to `write-lost`.
  bool writes_forfeit = false;
  // Made by etcd's restore tool (rule 7), not by a bootstrap.
  bool restored = false;
  // The keys quorate wrote (rule M6's records); a restore's cluster starts with the backup's puts only.
  std::map<std::string, std::string> keys;
};

class World {
 public:
  explicit World(const RunOptions& options);
  ~World();
  RunResult Run();

  // Seams, called on task threads (holding the baton) unless said otherwise.
  TimePoint Now() const { return now_; }
  // Parks the calling task until `wait` is over. False when the task was killed while unwinding
  // (the caller returns an error without touching the world); throws SimCrash when it was killed.
  bool Yield(Wait wait);
  bool Sleep(Duration d);
  void ThrowIfKilled();
  // Parks the caller at once after a change, so the driver may crash it there.
  void AfterChange();
  // `whole_group`: the answer lists the whole scaling group (DiscoveryProvider::ListsWholeGroup).
  Result<std::vector<Member>> Discover(int node, bool* whole_group);
  // On GatherFacts' threads: reads the world, never changes it (but for counters of its own).
  PeerFacts Ask(int from, const Member& peer);
  Result<ClusterView> Probe(int from, const std::string& peer_url, std::chrono::milliseconds timeout);
  Result<std::unique_ptr<ChildProcess>> StartEtcd(int node, const LaunchSpec& spec);
  void SignalEtcd(int node, const std::shared_ptr<Child>& child, int signal);

  // The etcd API as a client at `from` (a node, or -1 for the operator) meets it.
  struct CallTarget {
    int node = -1;
    Status error;
  };
  // The first endpoint whose etcd answers and is a voter (learners refuse the membership calls).
  // `maintainer`: the client of a node's upkeep, whose maintenance removals are checked by §12's rules.
  EtcdClientFactory ClientFactory(int from, int gen, bool maintainer = false);
  CallTarget PickEndpoint(int from, const std::vector<std::string>& endpoints, std::chrono::milliseconds timeout);
  SimCluster* ClusterOf(int node);
  bool InQuorum(int node);
  bool Reach(int from, int to) const;
  bool Answers(int node) const;
  // Answers and is not defragmenting: a client call reaches it.
  bool Serves(int node) const;
  bool Defragmenting(int node) const;
  // The node whose etcd leads node k's cluster as k sees it: the leader elected last while it runs on
  // a quorum's side, else one elected now by raft's rule (the first voter listed whose log is at
  // least as up to date as those of a majority of the voters, among those on k's side); -1 when k
  // is on no quorum's side.
  int LeaderSeenBy(int k);
  // The bytes of cluster c's database that hold data: the live keys and the history not compacted.
  int64_t InUse(const SimCluster& c) const;
  // The modelled etcd's maintenance (§12), each checked as quorate asks, whatever etcd then does.
  void MaintenanceLook(int from) { nodes[from]->maintenance_look_at = now_; }
  Duration StartDefrag(int node);
  void CheckDefragRequest(int from, int node);
  void CheckMaintainerLeads(int from, const std::string& what);
  void CheckDisarmRequest(const SimCluster& c);
  void CheckMaintenanceRemoval(int from, const SimCluster& c, MemberId id);
  // Learner churn: the volume of node n goes just after its member published itself.
  void LoseVolumeOncePublished(Node& n);
  // A learner was added at these peer URLs: in one maintenance seed in two, its node dies for longer
  // than --learner-deadline (rule M6's stuck learner).
  void LearnerAdded(const std::vector<std::string>& peer_urls);
  int NodeByHost(const std::string& host) const;
  int NodeByClientUrl(const std::string& url) const;
  // quorate's own requests, checked as it asks, whatever the modelled etcd then answers (§10):
  // `from` is the asking node, -1 the operator.
  void CheckAddRequest(int from, const SimCluster& c, const std::vector<std::string>& peer_urls, bool is_learner);
  void CheckRemoveRequest(int from, const SimCluster& c, MemberId id);
  void CheckPromoteRequest(int from, const SimCluster& c, MemberId id);
  // A change went through: kept in the cluster's history for lagging member lists.
  void Changed(SimCluster& c);
  // The membership node k's etcd lists without a linearizable read.
  std::vector<ClusterMember> SerializableListing(int k);
  // What node k's etcd answers on GET /members now (a replaying or previous incarnation's view).
  std::optional<ClusterView> ViewAnswered(int k);
  // The disk as quorate's processes use it, seen through fsync(2) and rename(2), which the
  // simulator wraps at link time (tests/sim/meson.build): on a task thread of a quorate process only.
  void OnFsync(int fd);
  void OnRename(const std::string& from, const std::string& to, std::optional<std::string> before);
  void Mark(const std::string& condition) { result_.reached.insert(condition); }
  bool strict() const { return strict_; }
  void Event(const std::string& text);
  void Decision(int node, const std::string& text);
  void Fail(Check check, const std::string& why);
  void OnLog(int node, const std::string& text);
  bool etcd35() const { return etcd35_; }
  // The etcd every simulated node runs: 3.5.30 relaxed MemberAdd's check, 3.4.23 has the strict one.
  EtcdVersion EtcdVersionOfSim() const { return etcd35_ ? EtcdVersion{3, 5, 30} : EtcdVersion{3, 4, 23}; }
  bool FaultsOn() const { return now_ < fault_end_; }
  Rng& rng() { return rng_; }
  double drop_rate() const { return drop_rate_; }
  std::vector<std::unique_ptr<Node>> nodes;

 private:
  friend class Driver;
  Task* Spawn(Proc* proc, int node, std::function<void()> body);
  void Resume(Task& t);
  bool Ready(Task& t);
  void At(TimePoint t, std::function<void()> fn);
  void StartProc(int node);
  InitOptions InitSeams(Node& n, Proc& p, Peers& peers);
  bool Decided(Node& n, const Result<InitOutcome>& outcome);
  void Redecided(Node& n, Proc& p, const Result<InitOutcome>& again);
  NodeSeams NodeSeamsOf(Node& n, Proc& p);
  void QuorateMain(Node& n, Proc& p);
  void PodMain(Node& n, Proc& p);
  // What a snapshot of the simulated etcd streamed: its cluster, the member's applied puts, the bytes.
  struct Streamed {
    int incarnation = -1;
    std::vector<uint64_t> puts;
    std::string stream;
  };
  void BackupLoop(Node& n, Proc& p);
  SnapshotSource SnapshotOf(int from, const std::string& endpoint, Streamed* streamed);
  // The puts node k's etcd applied, in order.
  std::vector<uint64_t> AppliedPuts(const Node& k) const;
  void CheckBackup(const BackupMeta& meta, const Streamed& streamed, size_t leader_had);
  // The node's quorate starts again after `down`, or after a moment when none is given.
  void CrashProc(int node, bool lose_volume, const std::string& why, std::optional<Duration> down = std::nullopt);
  void EndProc(int node);
  void ExitEtcd(int node, ExitStatus status, const std::string& why);
  std::optional<std::string> BootEtcd(Node& n, const std::map<std::string, std::string>& flags);
  void WriteWal(Node& n, MemberId id, ClusterId cluster_id, int incarnation);
  // The data's raft (DESIGN §10): the writer's puts due by now go to the leader of the newest
  // cluster; the members on the leader's side take its log into theirs, the leader commits once a
  // majority of the voters hold it, and each member applies what it knows committed, bbolt in batches.
  void Writer();
  void Replicate(int inc, int leader);
  void Apply(Node& n);
  // Node k was just elected leader of cluster c: every put acknowledged must be in its log, but those
  // no member's kept data holds any more (lost with a majority's disks, not by quorate).
  void CheckWritesKept(SimCluster& c, int k, const char* when);
  void ClearLog(Node& n);
  // Restore seeds (RunOptions::restore). etcd's `snapshot restore` as the restore runs it on node i:
  // reads the checked copy of the backup (the streamed puts and their sha256) and writes a member
  // of the cluster that the initial cluster and the token make, whose data is the backup's.
  Status RestoreTool(int i, const std::vector<std::string>& args);
  // A restore's step done (node/restore.h's hook): the task parks there, so it may be killed after it.
  void RestoreStep(std::string_view step);
  // The member the restore tool wrote for n is in place under its data dir: the data is that member's.
  void AdoptRestored(Node& n);
  void OperatorRestoreWhenDue();
  void OperatorRestore();
  // Every node started again with --restore-from restoring_ and the new token, one node first with
  // the old token (rule 7b); processes are killed for a while after.
  void RestartRestoring();
  // Recover seeds (RunOptions::recover): a node whose data holds a member of the newest cluster,
  // picked at random (-1: none); every quorate stopped, `quorate recover --from-member` on it.
  int Survivor();
  void OperatorRecover(int s);
  void RecoverOn(int s);
  // etcd's WAL of node n's data as its etcd left it: the log, each entry synced, and the last
  // HardState with the commit it learnt (which trails the entries a follower acknowledged until the
  // leader's next message).
  Status SaveWal(Node& n);
  // etcd started with --force-new-cluster on recover's copy of node s's data (`dir`): it replays
  // the WAL's entries up to its last HardState's commit, and drops the rest.
  Result<std::unique_ptr<ReplayedEtcd>> Replay(int s, const std::string& dir);
  bool RestorePending() const { return restore_ && !restore_began_ && !restore_given_up_; }
  // A quorate process may be killed between two calls: while the faults strike, and for a while
  // after the operator's restore began.
  bool KillsOn() const { return FaultsOn() || now_ < kills_until_; }
  void FlushWal(Node& n);
  // The agent's answer of node k's current quorate process; nullopt when none serves it.
  std::optional<AgentState> AgentAnswerOf(Node& k);
  bool AgentServes(Node& k);
  int LiveIncarnation(ClusterId id);
  bool HoldsData(const Node& n) const;
  void ModelTick();
  void CheckDataKept(int node);
  void ScheduleFaults();
  void Fault();
  void OperatorRemove();
  void ReplaceInstance(int node);
  void PowerCut(Node& n);
  TimePoint FactsSince(int from) const;
  // The voters of c but `except` whose etcd answered since `since`.
  size_t VotersUp(const SimCluster& c, MemberId except, TimePoint since) const;
  std::string Asker(int from) const;
  void OnDecision(int node, const quorate::Decision& d);
  bool Converged(std::string* why);
  // Maintenance seeds: the StatefulSet was scaled in, and no NOSPACE alarm stands (writes recovered).
  bool MaintenanceSettled(std::string* why);
  void Workload();
  void ScaleIn();
  bool MajorityLost();
  bool NeedsDefrag(const Node& n, const SimCluster& c) const;
  std::string Describe();

  RunOptions options_;
  Rng rng_;
  TimePoint start_{}, now_{}, fault_end_{}, end_{};
  bool etcd35_ = false;
  bool init_mode_ = false;
  bool cloud_ = false;
  bool strict_ = true;
  bool extra_ = false;
  bool maintenance_ = false;
  bool learner_churn_ = false;
  bool backups_ = false;
  bool laggards_ = false;
  bool restore_ = false;
  bool recover_ = false;
  bool recovering_ = false;  // every quorate stays stopped while the operator's recover runs
  bool restore_began_ = false;
  bool restore_given_up_ = false;
  TimePoint kills_until_{};
  // The newest backup a schedule committed and CheckBackup found right, and the one being restored.
  struct CheckedBackup {
    std::string url;
    int64_t revision = 0;
    std::vector<uint64_t> puts;
  };
  std::optional<CheckedBackup> newest_backup_, restoring_;
  std::vector<uint64_t> recovered_puts_;  // what the etcd on recover's copy replayed
  // The backup store every node's schedule writes to (RunOptions::backups).
  MemVfs store_;
  bool scale_in_ = false;
  // The writer's next put and when it is due.
  uint64_t next_write_ = 1;
  TimePoint write_due_{};
  // The workload of maintenance seeds: writes each tick, and whether the StatefulSet's replicas
  // (rule M7's source) went down.
  int writes_per_tick_ = 0;
  bool auto_compaction_ = false;
  TimePoint auto_compacted_at_{};
  size_t replicas_ = 0;
  size_t group_size_ = 0;  // the members discovery lists, --cluster-size
  TimePoint operator_began_{};
  int replacements_ = 0;
  std::unique_ptr<Clock> clock_;
  std::string root_;
  std::vector<std::unique_ptr<Task>> tasks_;
  pid_t next_pid_ = 1000;
  std::multimap<TimePoint, std::function<void()>> events_;
  std::vector<SimCluster> clusters_;
  std::map<std::string, std::vector<ClusterId>> cluster_ids_by_token_;
  std::vector<int> group_;
  double drop_rate_ = 0;
  bool operator_done_ = false;

  std::binary_semaphore back_{0};  // a task hands the baton back to the driver

  RunResult result_;
  std::string failure_;
};

}  // namespace quorate::sim
