#include "world.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/base_sink.h>

#include "core/bucket.h"
#include "core/maintenance.h"
#include "etcd/etcd_wal.h"
#include "node/init.h"
#include "node/run.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "testing/fake_wal.h"

#include <openssl/sha.h>

namespace quorate::sim {

extern World* g_world;
std::unique_ptr<Clock> MakeSimClock(World& w);
std::unique_ptr<Peers> MakeSimPeers(World& w, int node);
std::unique_ptr<ProcessLauncher> MakeSimLauncher(World& w, int node);
std::unique_ptr<ChildProcess> MakeSimChild(World& w, int node, std::shared_ptr<Child> child);
Status OperatorRemoves(World& w, Clock& clock, const std::string& name);

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

thread_local Task* tl_task = nullptr;
thread_local int tl_node = -1;

constexpr const char* kToken = "sim";
// The new --initial-cluster-token a restore is given (rule 7).
constexpr const char* kRestoredToken = "sim-restored";

// The database of maintenance seeds (§12): a quota small enough for the workload to fill within a
// run, live keys far below it, and history that only a compaction frees.
constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kQuotaBytes = 8 * kMiB;
constexpr int64_t kDbBaseBytes = 256 << 10;  // the live keys and bbolt's own pages
constexpr int64_t kWriteBytes = 4 << 10;     // what one revision adds to the history
constexpr milliseconds kWriteTick{100};
// Rule M3 (b) defragments, under NOSPACE, a member with at least this much free (§12).
constexpr int64_t kNospaceFreeBytes = kMiB;
// --compaction-keep-revisions of rule M4's seeds: 2 MiB of history kept, 4 MiB before a
// compaction, so M4 compacts well below the quota.
constexpr int64_t kKeepRevisions = 512;
// etcd's own --auto-compaction-retention, in revision mode: every so often, all but the last few
// revisions; what it frees between two maintenance rounds is well past M5's 45%.
constexpr seconds kAutoCompactEvery{20};
constexpr int64_t kAutoCompactKeeps = 64;
// A maintenance seed runs at least this long, so the workload meets the quota and the rules act.
constexpr seconds kMaintainedAtLeast{90};
constexpr seconds kLearnerDeadline{20};
// The data (DESIGN §10): a writer's put every so often, through the leader; bbolt commits what its
// etcd applied every 100 ms or every 10,000 entries, whichever comes first (etcd's
// --backend-batch-interval and --backend-batch-limit).
constexpr milliseconds kPutEvery{100};
constexpr milliseconds kBatchInterval{100};
constexpr uint64_t kBatchLimit = 10000;
// --backup-schedule of the seeds with backups: several rounds in a run of a minute or two.
constexpr seconds kBackupEvery{10};

// The supervisor takes its stop signals from a watcher; one for a signal nobody sends serves every
// node (only one watcher may exist in a process).
SignalWatcher* SharedWatcher() {
  static std::unique_ptr<SignalWatcher> watcher = [] {
    auto created = SignalWatcher::Create({SIGURG});
    if (!created.ok()) {
      std::fprintf(stderr, "sim: %s\n", created.status().message().c_str());
      std::abort();
    }
    return std::move(*created);
  }();
  return watcher.get();
}

// The real code's log lines go to the node whose thread wrote them.
class SimSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (g_world != nullptr) g_world->OnLog(tl_node, std::string(msg.payload.begin(), msg.payload.end()));
  }
  void flush_() override {}
};

void InstallSink() {
  static bool installed = [] {
    auto logger = std::make_shared<spdlog::logger>("sim", std::make_shared<SimSink>());
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)installed;
}

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

std::string WaitKindName(WaitKind kind) {
  switch (kind) {
    case WaitKind::kNone:
      return "none";
    case WaitKind::kPeersNotReady:
      return "peers-not-ready";
    case WaitKind::kExtra:
      return "extra";
    case WaitKind::kMajorityLost:
      return "majority-lost";
    case WaitKind::kConflict:
      return "conflict";
    case WaitKind::kRemoved:
      return "removed";
    case WaitKind::kVersion:
      return "version";
  }
  return "unknown";
}

}  // namespace

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Duration Rng::Between(milliseconds lo, milliseconds hi) {
  return lo + milliseconds(Below(static_cast<uint64_t>(hi.count() - lo.count() + 1)));
}

Child::~Child() {
  if (exit_fd >= 0) ::close(exit_fd);
}

World::World(const RunOptions& options) : options_(options), rng_(options.seed * 0x2545f4914f6cdd1dULL + 1) {
  // A restore runs `quorate run` off a cloud, without an extra node or maintenance: a seed that picks
  // it picks none of those unless asked (the discovered set is the restored cluster's, and M7's
  // scale-in and the workload's quota would meet the restore halfway).
  const bool restore_picked =
      options.restore == 1 || (options.restore < 0 && Rng(options.seed ^ 0x726573746f726521ULL).Below(4) == 0);
  init_mode_ = options.mode == RunOptions::Mode::kInit ||
               (options.mode == RunOptions::Mode::kSeedPicks && !restore_picked &&
                Rng(options.seed ^ 0x696e69746d6f6465ULL).Below(4) == 0);
  cloud_ = options.cloud == 1 ||
           (options.cloud < 0 && !restore_picked && Rng(options.seed ^ 0x636c6f756467726fULL).Below(4) == 0);
  strict_ = options.strict == 1 || (options.strict < 0 && Rng(options.seed ^ 0x7374726963746f6eULL).Below(2) == 0);
  // A cloud's group lists every instance it has, so an extra node there would be one of them.
  extra_ = !cloud_ && (options.extra == 1 || (options.extra < 0 && !restore_picked &&
                                               Rng(options.seed ^ 0x65787472616e6f64ULL).Below(4) == 0));
  maintenance_ = options.maintenance == 1 || (options.maintenance < 0 && !restore_picked &&
                                              Rng(options.seed ^ 0x6d61696e74656e61ULL).Below(4) == 0);
  restore_ = restore_picked && !init_mode_ && !cloud_ && !extra_ && !maintenance_;
  recover_ = restore_ && (options.recover == 1 ||
                          (options.recover < 0 && Rng(options.seed ^ 0x7265636f76657221ULL).Below(2) == 0));
  learner_churn_ = options.learner_churn == 1 ||
                   (options.learner_churn < 0 && Rng(options.seed ^ 0x6c6561726e636875ULL).Below(2) == 0);
  // `quorate run` takes the scheduled backups; init mode's `quorate upkeep` none.
  backups_ = !init_mode_ && (restore_ || options.backups == 1 ||
                             (options.backups < 0 && Rng(options.seed ^ 0x6261636b75707321ULL).Below(4) == 0));
  laggards_ = options.laggards == 1 || (options.laggards < 0 && Rng(options.seed ^ 0x6c61676761726473ULL).Below(4) == 0);
  // A StatefulSet's pods are named <set>-<ordinal>, one set, every member listed: rule M7's ground.
  scale_in_ = maintenance_ && !cloud_ && !extra_ && Rng(options.seed ^ 0x7363616c65696e73ULL).Below(2) == 0;
  Rng workload(options.seed ^ 0x776f726b6c6f6164ULL);
  // Three ways to keep the history: none, so only NOSPACE compacts (rule M3); quorate's rule M4; or
  // etcd's own auto-compaction, whose freed pages make rule M5 defragment.
  const uint64_t history = workload.Below(3);
  const int64_t keep_revisions = maintenance_ && history == 1 ? kKeepRevisions : 0;
  auto_compaction_ = maintenance_ && history == 2;
  writes_per_tick_ = auto_compaction_ ? 5 + static_cast<int>(workload.Below(6)) : 5 + static_cast<int>(workload.Below(16));
  group_size_ = static_cast<size_t>(options.nodes);
  InstallSink();
  SharedWatcher();
  if (restore_) SetRestoreStepHookForTest([this](std::string_view step) { RestoreStep(step); });
  start_ = now_ = TimePoint(std::chrono::hours(1000));
  write_due_ = start_ + kPutEvery;
  clock_ = MakeSimClock(*this);
  root_ = fmt::format("{}/quorate-sim-{}-{}", options.scratch, ::getpid(), options.seed);
  std::filesystem::remove_all(root_);
  std::filesystem::create_directories(root_);
  const int count = options.nodes + (extra_ ? 1 : 0);
  group_.assign(count, 0);
  replicas_ = static_cast<size_t>(count);
  for (int i = 0; i < count; ++i) {
    auto n = std::make_unique<Node>();
    n->index = i;
    n->name = scale_in_ ? fmt::format("etcd-{}", i) : fmt::format("n{}", i + 1);
    n->host = fmt::format("10.0.0.{}", i + 1);
    n->peer_url = "http://" + n->host + ":2380";
    n->client_url = "http://" + n->host + ":2379";
    n->root = fmt::format("{}/{}", root_, n->name);
    n->data_dir = n->root + "/data";
    n->asks.assign(count, 0);
    n->asked_at.assign(count, TimePoint{});
    n->extra = i >= options.nodes;
    Config& c = n->config;
    c.name = n->name;
    c.data_dir = n->data_dir;
    c.state_dir = n->data_dir + "/quorate";
    c.discovery = fmt::format("provider=sim node={}", i);
    c.cluster_size = static_cast<size_t>(options.nodes);
    c.initial_cluster_token = kToken;
    c.timeout = seconds(60);
    c.etcd_path = "etcd";
    c.agent_listen = n->host + ":2382";
    if (n->extra) {
      // Outside the discovered set, it names its own URLs, as it must to be started at all.
      c.initial_advertise_peer_urls = {n->peer_url};
      c.advertise_client_urls = {n->client_url};
    }
    if (backups_) c.backup_schedule = kBackupEvery;
    c.maintenance = maintenance_;
    if (maintenance_) {
      c.quota_backend_bytes = kQuotaBytes;
      c.defrag_min_bytes = kMiB;
      c.maintenance_pause = seconds(2);
      c.learner_deadline = kLearnerDeadline;
      c.compaction_keep_revisions = keep_revisions;
    }
    nodes.push_back(std::move(n));
  }
}

World::~World() {
  for (auto& n : nodes) {
    if (n->proc) EndProc(n->index);
  }
  for (auto& t : tasks_) {
    if (!t->done) {
      t->killed = true;
      Resume(*t);
    }
    t->thread.join();
  }
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
  if (restore_) SetRestoreStepHookForTest(nullptr);
  if (g_world == this) g_world = nullptr;
}

// --- the baton ---

Task* World::Spawn(Proc* proc, int node, std::function<void()> body) {
  ThrowIfKilled();
  auto task = std::make_unique<Task>();
  Task* t = task.get();
  t->node = node;
  t->proc = proc;
  t->body = std::move(body);
  if (proc != nullptr) proc->tasks.push_back(t);
  tasks_.push_back(std::move(task));
  t->thread = std::thread([this, t] {
    tl_task = t;
    tl_node = t->node;
    t->go.acquire();
    if (!t->killed) {
      try {
        t->body();
      } catch (const SimCrash&) {
      } catch (const std::exception& e) {
        Fail(Check::kException, fmt::format("an exception escaped the real code on {}: {}", t->node >= 0 ? nodes[t->node]->name : "operator",
                         e.what()));
      }
    }
    t->done = true;
    back_.release();
  });
  return t;
}

void World::Resume(Task& t) {
  t.go.release();
  back_.acquire();
}

bool World::Yield(Wait wait) {
  Task* t = tl_task;
  auto killed = [&] {
    if (std::uncaught_exceptions() == 0) throw SimCrash{};
    return false;
  };
  if (t->killed) return killed();
  t->wait = std::move(wait);
  back_.release();
  t->go.acquire();
  t->after_change = t->in_write = false;
  t->restore_step.clear();
  if (t->killed) return killed();
  return true;
}

// A process killed while parked where it cannot unwind (OnRename) runs on to its next seam call;
// what the simulator does for it on the way (records, new threads) ends there instead.
void World::ThrowIfKilled() {
  if (tl_task != nullptr && tl_task->killed && std::uncaught_exceptions() == 0) throw SimCrash{};
}

bool World::Sleep(Duration d) { return Yield({Wait::kUntil, now_ + d, {}}); }

// The flag is the driver's to see while the task is parked here; Yield clears it on waking.
void World::AfterChange() {
  tl_task->after_change = true;
  Yield({Wait::kNow, now_, {}});
}

bool World::Ready(Task& t) {
  switch (t.wait.kind) {
    case Wait::kNow:
      return true;
    case Wait::kUntil:
      return t.wait.until <= now_;
    case Wait::kFds:
      if (t.wait.until <= now_) return true;
      return ::poll(t.wait.fds.data(), t.wait.fds.size(), 0) > 0;
  }
  return false;
}

void World::At(TimePoint t, std::function<void()> fn) { events_.emplace(t, std::move(fn)); }

// --- quorate processes ---

void World::StartProc(int i) {
  Node& n = *nodes[i];
  n.restart_pending = false;
  if (n.proc || n.gone || recovering_) return;
  auto proc = std::make_unique<Proc>();
  proc->node = i;
  proc->gen = n.gens++;
  proc->launcher = MakeSimLauncher(*this, i);
  ++result_.quorate_starts;
  Event(n.name + (init_mode_ ? ": pod starts (quorate init)" : ": quorate starts"));
  Proc* p = proc.get();
  n.proc = std::move(proc);
  if (init_mode_) {
    Spawn(p, i, [this, &n, p] { PodMain(n, *p); });
  } else {
    Spawn(p, i, [this, &n, p] { QuorateMain(n, *p); });
  }
}

// The init job's seams on node n: the simulated clock, peers, etcd and addresses.
InitOptions World::InitSeams(Node& n, Proc& p, Peers& peers) {
  InitOptions options;
  options.clock = clock_.get();
  options.peers = &peers;
  options.etcd_clients = ClientFactory(n.index, p.gen);
  options.is_own_address = [host = n.host](const PeerUrl& url) -> Result<bool> { return url.host == host; };
  options.etcd_files_required = false;
  options.on_decision = [this, i = n.index](const quorate::Decision& d) { OnDecision(i, d); };
  options.etcd_version = [this](const std::string&) -> Result<EtcdVersion> { return EtcdVersionOfSim(); };
  // The job's own answer function is what peers reach; it stops answering when the job ends (its
  // state, and so this handle, goes with it, a crash's unwinding included).
  options.serve_agent = [&n, gen = p.gen](std::function<AgentState()> answer) {
    {
      std::lock_guard lock(n.agent_mu);
      n.agent_answer = std::move(answer);
      n.agent_gen = gen;
    }
    return std::shared_ptr<void>(static_cast<void*>(&n), [gen](void* node) {
      Node& served = *static_cast<Node*>(node);
      std::lock_guard lock(served.agent_mu);
      if (served.agent_gen != gen) return;
      served.agent_answer = nullptr;
      served.agent_gen = -1;
    });
  };
  return options;
}

// Records what the init job decided; false when it failed (bad input fails the run: the simulation
// gives none).
bool World::Decided(Node& n, const Result<InitOutcome>& outcome) {
  ThrowIfKilled();
  n.last_reason = outcome.ok() ? Reason::kNone : outcome.status().reason();
  if (n.last_reason == Reason::kNoQuorumCommits) Mark("a removal no quorum commits");
  if (!outcome.ok()) {
    n.last_message = outcome.status().message();
    Decision(n.index, fmt::format("init failed ({})", static_cast<int>(outcome.status().code())));
    if (outcome.status().IsInvalidArgument()) Fail(Check::kBadInput, n.name + ": init refused its input: " + n.last_message);
    return false;
  }
  Decision(n.index, ActionName(outcome->decision.action));
  return true;
}

// The seams `quorate run` and `quorate upkeep` share on node n: the simulated clock and etcd
// clients; the probes kept for a failure's report, in place of a status server; upkeep's own loop
// (Upkeep::Run) on a task of the process rather than a thread. Dropping the handle stops it, as
// Upkeep::Stop does a thread; the driver ends the process, that task with it, as soon as its first
// task (RunNode's or UpkeepNode's caller) returns.
NodeSeams World::NodeSeamsOf(Node& n, Proc& p) {
  NodeSeams seams;
  seams.clock = clock_.get();
  seams.serve_status = [&p](Metrics&, StatusChecks checks) -> Result<std::shared_ptr<void>> {
    p.probes = std::move(checks);
    return std::shared_ptr<void>(&p, [](void* served) { static_cast<Proc*>(served)->probes.reset(); });
  };
  seams.upkeep.etcd_clients = ClientFactory(n.index, p.gen, /*maintainer=*/true);
  if (scale_in_) {
    // Rule M7's source, as the k8s provider reads it: the StatefulSet's spec.replicas.
    seams.upkeep.scale_target = [this]() -> Result<std::optional<size_t>> {
      if (!Sleep(rng_.Between(milliseconds(1), milliseconds(20)))) return Status::Unavailable("sim: killed");
      return std::optional<size_t>(replicas_);
    };
  }
  seams.run_upkeep = [this, &n, &p](Upkeep& upkeep) {
    Spawn(&p, n.index, [&upkeep] { upkeep.Run(); });
    return std::shared_ptr<void>(&upkeep, [](void* running) { static_cast<Upkeep*>(running)->Stop(); });
  };
  return seams;
}

// Records what a re-decision before a restart answered, as Decided does the first.
void World::Redecided(Node& n, Proc& p, const Result<InitOutcome>& again) {
  ThrowIfKilled();
  n.last_reason = again.ok() ? Reason::kNone : again.status().reason();
  if (n.last_reason == Reason::kNoQuorumCommits) Mark("a removal no quorum commits");
  if (!again.ok() && again.status().IsCancelled()) return;
  if (!again.ok()) {
    n.last_message = again.status().message();
    if (n.last_wait == WaitKind::kRemoved) n.held_removed_gen = p.gen;
    Decision(n.index, fmt::format("hold ({})", static_cast<int>(again.status().code())));
    if (again.status().IsInvalidArgument()) Fail(Check::kBadInput, n.name + ": a re-decision refused its input: " + n.last_message);
    return;
  }
  Decision(n.index, ActionName(again->decision.action));
}

// `quorate run` itself (node/run.cc's RunNode) on the seams: NodeSeamsOf's, the simulated etcd
// launcher, peers and agent; a stop signal nobody sends; no stray etcd (its etcds are the
// simulation's, each ended with its process).
void World::QuorateMain(Node& n, Proc& p) {
  auto peers = MakeSimPeers(*this, n.index);
  RunSeams seams;
  static_cast<NodeSeams&>(seams) = NodeSeamsOf(n, p);
  seams.launcher = p.launcher.get();
  seams.signals = SharedWatcher();
  seams.find_etcd = [](const std::string&) { return Status::Ok(); };
  seams.stop_stray_etcd = [](const std::string&) { return Status::Ok(); };
  seams.init = InitSeams(n, p, *peers);
  bool first = true;
  seams.on_decided = [&](const Result<InitOutcome>& outcome) {
    if (first) {
      first = false;
      (void)Decided(n, outcome);
    } else {
      Redecided(n, p, outcome);
    }
  };
  seams.on_etcd_running = [&p](bool running) {
    p.etcd_running = running;
    p.etcd_ran = p.etcd_ran || running;
  };
  // --restore-from reads the store the schedules write to, and etcd's restore tool is modelled.
  seams.restore.open_store = [this](const std::string& store_url) -> Result<std::unique_ptr<Vfs>> {
    if (store_url != "mem://sim") return Status::NotFound("sim: no store at " + store_url);
    return store_.Share();
  };
  seams.restore.restore_tool = [this, i = n.index](const std::vector<std::string>& args, const std::string&) {
    return RestoreTool(i, args);
  };
  if (backups_) {
    // RunNode starts its backup schedule beside upkeep once the first decision is made; it opens
    // --backup-to itself, so the simulator runs that schedule on its seams here.
    seams.run_upkeep = [this, &n, &p, run_upkeep = seams.run_upkeep](Upkeep& upkeep) {
      std::shared_ptr<void> running = run_upkeep(upkeep);
      Spawn(&p, n.index, [this, &n, &p] { BackupLoop(n, p); });
      return running;
    };
  }
  Status ended = RunNode(n.config, {}, std::move(seams));
  n.last_message = "quorate run ended: " + ended.message();
  if (n.restore_trial) {
    // The operator's first try, with the old token, must be refused as bad input before anything
    // moved (rule 7b); then the node is given the new one. Killed before that check, it tries again.
    if (ended.IsInvalidArgument()) {
      Mark("a restore with the old token refused");
      Event(fmt::format("operator: {} refused the old token ({}); it is given the new one", n.name, ended.message()));
      if (!HoldsData(n)) {
        Fail(Check::kRestoreOldCluster, n.name + ": a restore refused for its old token moved the data it refused to replace");
      }
      n.restore_trial = false;
      n.config.initial_cluster_token = kRestoredToken;
    }
  }
}

// Init mode (an init container, or a systemd unit's ExecStartPre): `quorate init` decides, writes
// etcd's flags and exits, its agent with it (the agent answers only while init runs: cli's Init takes
// the job's default agent mode); etcd then runs from those flags with `quorate upkeep` beside it
// (node/run.cc's UpkeepNode: the member from the bucket init wrote, promoted once caught up). When
// etcd exits, the whole unit starts again, init first.
void World::PodMain(Node& n, Proc& p) {
  auto peers = MakeSimPeers(*this, n.index);
  LaunchSpec spec;
  spec.argv = {n.config.etcd_path};
  {
    InitJob job(n.config, InitSeams(n, p, *peers));
    auto outcome = job.Run();
    if (!Decided(n, outcome)) return;
    spec.argv.insert(spec.argv.end(), outcome->etcd_flags.begin(), outcome->etcd_flags.end());
  }
  Event(fmt::format("{}: quorate init exits, etcd and quorate upkeep start", n.name));
  auto bucket = LoadBucket(n.config.state_dir);
  const Member* self = bucket.ok() ? bucket->members.FindByName(n.config.name) : nullptr;
  if (self == nullptr) {
    Fail(Check::kUpkeepBucket, n.name + ": quorate init exited without a member bucket naming this node, which quorate upkeep needs");
    return;
  }
  auto child = p.launcher->Start(spec);
  if (!child.ok()) {
    n.last_message = "etcd did not start: " + child.status().message();
    return;
  }
  p.etcd_running = p.etcd_ran = true;
  // `quorate upkeep` itself until etcd exits, when the whole unit starts again.
  UpkeepNodeSeams seams;
  static_cast<NodeSeams&>(seams) = NodeSeamsOf(n, p);
  seams.wait_for_stop = [&] {
    pollfd exit{(*child)->exit_fd(), POLLIN, 0};
    (void)clock_->Poll({&exit, 1}, Clock::kNever);
    p.etcd_running = false;
    return Status::Ok();
  };
  Status ended = UpkeepNode(n.config, std::move(seams));
  n.last_message = ended.ok() ? "etcd exited, so the unit starts again" : "quorate upkeep ended: " + ended.message();
}

// `quorate run`'s backup schedule (node/backup_job.cc) as RunNode starts it, a round each
// --backup-schedule, on its seams: the simulated clock (its wall time too) and etcd clients, the
// simulated etcd's snapshot, and the store in memory all nodes share. Each backup a round commits is
// read back through the real store and codec and checked against the data (CheckBackup).
void World::BackupLoop(Node& n, Proc& p) {
  BackupSettings settings;
  settings.store_url = "mem://sim";
  settings.cluster = kToken;
  settings.timeout = seconds(30);
  Streamed streamed;
  BackupScheduleOptions options;
  options.clock = clock_.get();
  options.wall_clock = [this] { return SystemTime(std::chrono::duration_cast<SystemTime::duration>(now_ - start_)); };
  options.etcd_clients = ClientFactory(n.index, p.gen);
  options.sources = [this, i = n.index, &streamed](const std::string& endpoint) { return SnapshotOf(i, endpoint, &streamed); };
  BackupSchedule schedule(n.config, std::move(settings), store_.Share(), std::move(options));
  schedule.SetSelf({n.client_url});
  while (true) {
    Sleep(kBackupEvery);
    // What the writer was told succeeded as the round begins: the puts the cluster's leader applied
    // (etcd answers a put once its leader applied it).
    size_t leader_had = 0;
    if (n.etcd.running && InQuorum(n.index)) {
      if (int leader = LeaderSeenBy(n.index); leader >= 0) leader_had = AppliedPuts(*nodes[leader]).size();
    }
    streamed = Streamed{};
    auto round = schedule.Tick();
    ThrowIfKilled();
    if (round.ok() && round->has_value()) CheckBackup(**round, streamed, leader_had);
  }
}

std::vector<uint64_t> World::AppliedPuts(const Node& k) const {
  std::vector<uint64_t> puts;
  for (size_t i = 0; i < k.kv_applied && i < k.log.size(); ++i) {
    if (k.log[i].write != 0) puts.push_back(k.log[i].write);
  }
  return puts;
}

// etcd's Maintenance.Snapshot of the member at `endpoint`: it commits its backend first (bbolt's
// ForceCommit), then streams the db file (here, the puts it applied) and its sha256; the revision is
// the member's, one past its puts.
SnapshotSource World::SnapshotOf(int from, const std::string& endpoint, Streamed* streamed) {
  return [this, from, endpoint, streamed](const SnapshotSink& sink) -> Result<SnapshotHeader> {
    const int k = NodeByClientUrl(endpoint);
    if (!Sleep(rng_.Between(milliseconds(1), milliseconds(20)))) return Status::Unavailable("sim: killed");
    if (k < 0 || !Reach(from, k) || !Serves(k)) return Status::Unavailable(endpoint + ": snapshot: connection refused");
    Node& m = *nodes[k];
    m.kv_committed = m.kv_applied;
    m.batch_at = now_;
    streamed->incarnation = m.etcd.incarnation;
    streamed->puts = AppliedPuts(m);
    std::string db = fmt::format("{}", fmt::join(streamed->puts, "\n"));
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(db.data()), db.size(), digest);
    streamed->stream = db + std::string(reinterpret_cast<const char*>(digest), sizeof digest);
    if (Status s = sink(streamed->stream); !s.ok()) return s;
    return SnapshotHeader{endpoint, m.etcd.cluster_id, m.etcd.id, static_cast<int64_t>(streamed->puts.size()) + 1,
                          EtcdVersionOfSim().ToString()};
  };
}

// A committed backup, read back whole through the real store and codec, is the snapshot that was
// streamed at the metadata's revision; its puts are the cluster's acknowledged ones in order up to
// that revision; and it holds every put the leader had applied as its round began (quorate backs up
// the leader's own etcd, and only while it leads).
void World::CheckBackup(const BackupMeta& meta, const Streamed& streamed, size_t leader_had) {
  Mark("a scheduled backup committed");
  ++result_.backups_taken;
  struct Collect : Sink {
    Status Write(std::string_view bytes) override {
      got.append(bytes);
      return Status::Ok();
    }
    Status Finish() override { return Status::Ok(); }
    std::string got;
  } read;
  auto store = store_.Share();
  const Status s = ReadBackupThrough(*store, meta, {}, &read);
  std::string wrong;
  if (!s.ok()) {
    wrong = "reading it back failed: " + s.message();
  } else if (read.got != streamed.stream) {
    wrong = fmt::format("it holds {} bytes, not the {} its snapshot streamed", read.got.size(), streamed.stream.size());
  } else if (meta.revision != static_cast<int64_t>(streamed.puts.size()) + 1) {
    wrong = fmt::format("its metadata says revision {}, its data is at {}", meta.revision, streamed.puts.size() + 1);
  } else if (streamed.puts.size() < leader_had) {
    wrong = fmt::format("it holds {} puts, the leader had applied {} as the round began", streamed.puts.size(), leader_had);
  } else if (streamed.incarnation >= 0) {
    const auto& committed = clusters_[streamed.incarnation].committed;
    size_t at = 0;
    for (const LogEntry& e : committed) {
      if (e.write == 0) continue;
      if (at == streamed.puts.size()) break;
      if (streamed.puts[at] != e.write) {
        wrong = fmt::format("its put {} is {}, the cluster acknowledged {} there", at + 1, streamed.puts[at], e.write);
        break;
      }
      ++at;
    }
    if (wrong.empty() && at < streamed.puts.size()) {
      wrong = fmt::format("it holds {} puts, the cluster acknowledged only {}", streamed.puts.size(), at);
    }
  }
  if (!wrong.empty()) {
    Fail(Check::kBackupData, fmt::format("backup {} (revision {}) does not hold the leader's data: {} (§11)", meta.url,
                                         meta.revision, wrong));
  } else {
    Event(fmt::format("backup {} holds {} puts at revision {}", meta.url, streamed.puts.size(), meta.revision));
    newest_backup_ = CheckedBackup{meta.url, meta.revision, streamed.puts};
  }
}

// --- the operator's restore (rule 7) ---

// Restore seeds: once the faults stop, the operator waits for the cluster to converge (a restore on
// the operator's decision: a bad deploy, say) or for a node to say a majority is lost, then restores
// the newest backup; with no backup by then (a majority lost before the first), none is done.
void World::OperatorRestoreWhenDue() {
  std::string why;
  const bool lost = std::any_of(nodes.begin(), nodes.end(), [](const std::unique_ptr<Node>& n) {
    return n->last_wait == WaitKind::kMajorityLost || n->last_reason == Reason::kNoQuorumCommits;
  });
  if (recover_ && (lost || Converged(&why))) {
    if (const int s = Survivor(); s >= 0) {
      if (lost) Mark("a recover after a lost majority");
      OperatorRecover(s);
      return;
    }
  }
  if (newest_backup_ && (lost || Converged(&why))) {
    if (lost) Mark("a restore after a lost majority");
    OperatorRestore();
    return;
  }
  if (now_ >= fault_end_ + std::chrono::minutes(5)) {
    Event(newest_backup_ ? "operator: nothing calls for a restore" : "operator: no backup to restore from");
    restore_given_up_ = true;
    return;
  }
  At(now_ + seconds(1), [this] { OperatorRestoreWhenDue(); });
}

// `quorate run --restore-from` the newest backup with a new token on every node: the operator stops
// every quorate (etcd with it) and starts it again so; one node holding the old cluster's bucket is
// tried first with the old token, as an operator who kept the old manifest would, which rule 7b
// refuses. Kills strike the restarted processes for a while, restore steps included.
void World::OperatorRestore() {
  restore_began_ = true;
  restoring_ = newest_backup_;
  RestartRestoring();
}

void World::RestartRestoring() {
  kills_until_ = now_ + seconds(30);
  end_ = std::max(end_, now_ + std::chrono::minutes(15));
  Mark("the operator restores a backup");
  Event(fmt::format("operator: restores {} (revision {}, {} puts) on every node with token {}", restoring_->url,
                    restoring_->revision, restoring_->puts.size(), kRestoredToken));
  int trial = -1;
  for (auto& n : nodes) {
    if (trial < 0 && !n->gone && HoldsData(*n) && LoadBucket(n->config.state_dir).ok()) trial = n->index;
  }
  for (auto& n : nodes) {
    if (n->gone) continue;
    if (n->proc) EndProc(n->index);
    n->config.restore_from = restoring_->url;
    n->restore_trial = n->index == trial;
    n->config.initial_cluster_token = n->restore_trial ? kToken : kRestoredToken;
    if (!n->restart_pending) {
      n->restart_pending = true;
      At(now_ + rng_.Between(milliseconds(0), milliseconds(2000)), [this, i = n->index] { StartProc(i); });
    }
  }
}

// --- the operator's recover (rule 8) ---

int World::Survivor() {
  if (clusters_.empty()) return -1;
  const int inc = static_cast<int>(clusters_.size()) - 1;
  const SimCluster& c = clusters_[inc];
  std::vector<int> holders;
  for (auto& n : nodes) {
    if (n->gone || !HoldsData(*n) || n->data_incarnation != inc) continue;
    if (std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == n->data_member; })) {
      holders.push_back(n->index);
    }
  }
  return holders.empty() ? -1 : holders[rng_.Below(holders.size())];
}

// Recover seeds: the operator stops every quorate (etcd with it) and runs `quorate recover
// --from-member` on a node whose data survived, any of them (the one the majority-lost wait names,
// or, with the cluster whole, a follower as likely as the leader); its backup is then restored on
// every node as a scheduled one would be.
void World::OperatorRecover(int s) {
  restore_began_ = true;
  recovering_ = true;
  end_ = std::max(end_, now_ + std::chrono::minutes(15));
  Mark("the operator recovers from a surviving member");
  for (auto& n : nodes) {
    if (n->proc) EndProc(n->index);
  }
  Event(fmt::format("operator: quorate recover --from-member {} (its log {} entries, {} known committed)", nodes[s]->name,
                    nodes[s]->log.size(), nodes[s]->commit_seen));
  Spawn(nullptr, -1, [this, s] { RecoverOn(s); });
}

void World::RecoverOn(int s) {
  Node& n = *nodes[s];
  Config c = n.config;
  c.from_member = n.name;
  c.backup_to = "mem://sim";
  c.backup_cluster = kToken;
  c.backup_timeout = seconds(30);
  auto peers = MakeSimPeers(*this, s);
  RecoverSeams seams;
  seams.peers = peers.get();
  seams.etcd_clients = ClientFactory(-1, 0);
  seams.open_store = [this](const std::string& store_url) -> Result<std::unique_ptr<Vfs>> {
    if (store_url != "mem://sim") return Status::NotFound("sim: no store at " + store_url);
    return store_.Share();
  };
  seams.stop_stray_etcd = [this, s](const std::string&) { return SaveWal(*nodes[s]); };
  seams.replay = [this, s](const std::string& dir) { return Replay(s, dir); };
  seams.now = [this] { return SystemTime(std::chrono::duration_cast<SystemTime::duration>(now_ - start_)); };
  auto meta = RecoverFromMember(c, std::move(seams));
  if (!failure_.empty()) return;
  if (!meta.ok()) {
    Fail(Check::kNoConvergence, fmt::format("operator: recover from {} failed: {}", n.name, meta.status().message()));
    return;
  }
  Mark("a recover's backup stored");
  restoring_ = CheckedBackup{meta->url, meta->revision, recovered_puts_};
  At(now_, [this] {
    recovering_ = false;
    RestartRestoring();
  });
}

Status World::SaveWal(Node& n) {
  if (!HoldsData(n)) return Status::Ok();
  WalBuilder w;
  w.Crc();
  w.Metadata(n.data_member, clusters_[n.data_incarnation].id);
  w.Snapshot(0, 0);
  uint64_t term = 1;
  for (size_t i = 0; i < n.log.size(); ++i) {
    w.Entry(n.log[i].term, i + 1, n.log[i].write != 0 ? std::to_string(n.log[i].write) : "");
    term = std::max(term, n.log[i].term);
  }
  w.State(term, 0, std::min<uint64_t>(n.commit_seen, n.log.size()));
  const std::string path = WalFile(n.data_dir);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << w.bytes;
  if (!out.flush()) return Status::Internal("sim: cannot write " + path);
  return Status::Ok();
}

namespace {

// How many entries from the start `log` shares with `committed`. Raft's log matching (an entry of a
// term at an index is the same entry in every log that has one there, with the same entries before
// it) makes "the entries at this index agree" true up to some index and false from there on.
size_t Matching(const std::vector<LogEntry>& log, const std::vector<LogEntry>& committed) {
  size_t lo = 0, hi = std::min(log.size(), committed.size());
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (log[mid - 1] == committed[mid - 1]) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// etcd's Maintenance.Snapshot of the etcd recover started on its copy: the puts it replayed.
class SimReplayed : public ReplayedEtcd {
 public:
  SimReplayed(std::vector<uint64_t> puts, ClusterId cluster_id, MemberId member_id, EtcdVersion version)
      : puts_(std::move(puts)), cluster_id_(cluster_id), member_id_(member_id), version_(version) {}
  Result<SnapshotHeader> Snapshot(const SnapshotSink& sink) override {
    std::string db = fmt::format("{}", fmt::join(puts_, "\n"));
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(db.data()), db.size(), digest);
    if (Status s = sink(db + std::string(reinterpret_cast<const char*>(digest), sizeof digest)); !s.ok()) return s;
    return SnapshotHeader{"sim: etcd on the copy", cluster_id_, member_id_, static_cast<int64_t>(puts_.size()) + 1,
                          version_.ToString()};
  }

 private:
  std::vector<uint64_t> puts_;
  ClusterId cluster_id_;
  MemberId member_id_;
  EtcdVersion version_;
};

}  // namespace

Result<std::unique_ptr<ReplayedEtcd>> World::Replay(int s, const std::string& dir) {
  // etcd reads the copy and replays its WAL, a moment.
  if (!Sleep(rng_.Between(milliseconds(100), milliseconds(2000)))) return Status::Unavailable("sim: killed");
  auto log = ReadWalLog(WalFile(dir + "/data"));
  if (!log.ok()) return Status::Internal("sim: etcd on the copy: " + log.status().message());
  std::vector<uint64_t> puts;
  for (const auto& e : log->entries) {
    if (e.index > log->commit) break;
    uint64_t put = 0;
    if (!e.data.empty() && std::from_chars(e.data.data(), e.data.data() + e.data.size(), put).ec != std::errc()) {
      return Status::Internal("sim: etcd on the copy: an entry that is no put: " + e.data);
    }
    if (put != 0) puts.push_back(put);
  }
  Node& n = *nodes[s];
  const SimCluster& c = clusters_[n.data_incarnation];
  Event(fmt::format("{}: etcd on recover's copy replays {} of its {} entries (commit {}), {} puts", n.name,
                    std::min<uint64_t>(log->commit, log->entries.size()), log->entries.size(), log->commit, puts.size()));
  // Every put of the survivor's log that its cluster acknowledged is in what etcd replayed, those
  // past the commit its WAL saved too.
  if (!c.writes_forfeit) {
    const size_t held = Matching(n.log, c.committed);
    for (size_t i = 0; i < held; ++i) {
      const uint64_t put = c.committed[i].write;
      if (put == 0) continue;
      if (std::find(puts.begin(), puts.end(), put) == puts.end()) {
        Fail(Check::kRecoverLost,
             fmt::format("recover from {} replays {} puts without put {}, acknowledged at index {} and held in {}'s "
                         "log ({} entries, the WAL's last HardState commits {}): rule 8 keeps every write the "
                         "survivor's WAL holds",
                         n.name, puts.size(), put, i + 1, n.name, n.log.size(), n.commit_seen));
        return Status::Unavailable("sim: a failed check");
      }
      if (i >= n.commit_seen) Mark("a recover kept acknowledged puts past the saved commit");
    }
  }
  recovered_puts_ = puts;
  return std::unique_ptr<ReplayedEtcd>(std::make_unique<SimReplayed>(std::move(puts), c.id, n.data_member, EtcdVersionOfSim()));
}

void World::RestoreStep(std::string_view step) {
  if (tl_task == nullptr || tl_task->proc == nullptr) return;
  Mark(fmt::format("a restore step: {}", step));
  tl_task->restore_step = std::string(step);
  tl_task->after_change = true;
  Yield({Wait::kNow, now_, {}});
}

Status World::RestoreTool(int i, const std::vector<std::string>& args) {
  Node& n = *nodes[i];
  // etcdutl reads the snapshot and writes the member in a moment, during which the process may die.
  if (!Sleep(rng_.Between(milliseconds(20), milliseconds(500)))) return Status::Unavailable("sim: killed");
  if (args.size() < 3 || args[0] != "snapshot" || args[1] != "restore") return Status::Internal("sim: etcdutl: unknown command");
  std::map<std::string, std::string> flags;
  bool skip_hash = false;
  for (size_t k = 3; k < args.size(); ++k) {
    if (args[k] == "--skip-hash-check") {
      skip_hash = true;
    } else if (args[k].rfind("--", 0) == 0 && k + 1 < args.size()) {
      flags[args[k].substr(2)] = args[k + 1];
      ++k;
    }
  }
  const std::string out = flags["data-dir"];
  if (std::filesystem::exists(out + "/member")) return Status::Internal("sim: etcdutl: data-dir " + out + " exists");
  auto db = ReadFile(args[2]);
  if (!db.ok()) return Status::Internal("sim: etcdutl: " + db.status().message());
  if (db->size() < SHA256_DIGEST_LENGTH) return Status::Internal("sim: etcdutl: snapshot file too short");
  const std::string body = db->substr(0, db->size() - SHA256_DIGEST_LENGTH);
  if (!skip_hash) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
    if (db->compare(body.size(), SHA256_DIGEST_LENGTH, reinterpret_cast<const char*>(digest), SHA256_DIGEST_LENGTH) != 0) {
      return Status::Internal("sim: etcdutl: snapshot file integrity check failed");
    }
  }
  std::vector<uint64_t> puts;
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    uint64_t put = 0;
    const auto [ptr, ec] = std::from_chars(body.data() + at, body.data() + end, put);
    if (ec != std::errc() || ptr != body.data() + end) return Status::Internal("sim: etcdutl: not a snapshot database");
    puts.push_back(put);
    at = end + 1;
  }
  auto entries = ParseInitialCluster(flags["initial-cluster"], "--initial-cluster");
  if (!entries.ok()) return entries.status();
  const std::string token = flags["initial-cluster-token"];
  std::vector<MemberId> ids;
  std::optional<MemberId> self;
  std::vector<ClusterMember> members;
  for (const auto& e : *entries) {
    ids.push_back(ComputeMemberId(e.peer_urls, token));
    members.push_back({ids.back(), "", e.peer_urls, {}, false});
    if (e.name == flags["name"]) self = ids.back();
  }
  if (!self) return Status::Internal("sim: etcdutl: --name is not in --initial-cluster");
  const ClusterId cid = ComputeClusterId(ids);
  Mark("etcd's restore tool ran");
  // Rule 7b: the old members, whose WALs name their cluster, must never fit the restored one.
  for (const SimCluster& c : clusters_) {
    if (c.id == cid && !c.restored) {
      Fail(Check::kRestoreOldCluster,
           fmt::format("{}'s restore makes cluster {} with token '{}', the ID of a cluster of before: its old members, "
                       "which missed the restore, fit it (rule 7b: a restore needs a new token)",
                       n.name, IdToHex(cid), token));
    }
  }
  auto& seen = cluster_ids_by_token_[token];
  if (std::find(seen.begin(), seen.end(), cid) == seen.end()) seen.push_back(cid);
  if (seen.size() > 1) {
    Fail(Check::kTwoClusterIds, fmt::format("token '{}' has {} cluster IDs after {}'s restore: {} (never two clusters)", token,
                                            seen.size(), n.name, fmt::join(seen, ",")));
  }
  // The restored member holds the backup's puts, the ones acknowledged up to its revision.
  if (restoring_ && puts != restoring_->puts) {
    Fail(Check::kRestoreData, fmt::format("{}'s restore reads {} puts from its copy of the snapshot, the backup {} holds {} "
                                          "(rule 7: the backup's data, checked, into the new member)",
                                          n.name, puts.size(), restoring_->url, restoring_->puts.size()));
  }
  int inc = -1;
  for (size_t k = 0; k < clusters_.size(); ++k) {
    if (clusters_[k].id == cid && clusters_[k].restored) inc = static_cast<int>(k);
  }
  if (inc < 0) {
    SimCluster c;
    c.id = cid;
    c.token = token;
    c.members = members;
    c.history.emplace_back(now_, c.members);
    c.restored = true;
    // etcd's restore starts a new raft log whose snapshot holds the keys: the backup's puts, each
    // acknowledged once, committed in every restored member from the start.
    for (uint64_t put : puts) c.committed.push_back({1, put});
    clusters_.push_back(std::move(c));
    inc = static_cast<int>(clusters_.size()) - 1;
    Event(fmt::format("etcdutl makes cluster {} (incarnation {}) from the backup", IdToHex(cid), inc));
  }
  if (Status s = quorate::WriteWal(out, *self, cid); !s.ok()) return s;
  n.restored_pending = std::pair<int, MemberId>{inc, *self};
  Event(fmt::format("{}: etcdutl restores {} puts as member {} of cluster {} into {}", n.name, puts.size(), IdToHex(*self),
                    IdToHex(cid), out));
  return Status::Ok();
}

namespace {

// The node's data dir holds member `id` of cluster incarnation `inc` from now on, nothing applied yet.
void TakeData(Node& n, int inc, MemberId id) {
  n.data_incarnation = inc;
  n.data_member = id;
  n.log_past_bootstrap = false;
  n.data_refounded = false;
  n.db_size = 0;
  n.applied = 0;
}

}  // namespace

void World::AdoptRestored(Node& n) {
  if (!n.restored_pending) return;
  auto [inc, id] = *n.restored_pending;
  auto wal = ReadWalIdentity(n.data_dir);
  if (!wal.ok() || wal->member_id != id || wal->cluster_id != clusters_[inc].id) return;
  n.restored_pending.reset();
  const SimCluster& c = clusters_[inc];
  TakeData(n, inc, id);
  // Its log is the restore's: the backup's puts, the entries of term 1 (every leader of the restored
  // cluster appends from term 2 on).
  n.log.clear();
  for (const LogEntry& e : c.committed) {
    if (e.term != 1) break;
    n.log.push_back(e);
  }
  n.commit_seen = n.kv_applied = n.kv_committed = n.log.size();
  if (n.view) n.prev_view = n.view;
  n.view = ClusterView{c.id, c.history.front().second};
  const std::string path = WalFile(n.data_dir);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) n.wals.emplace_back(st.st_ino, path);
  ++result_.restores_done;
  Mark("a restored member in place");
  Event(fmt::format("{}: the restored member {} of cluster {} is in place", n.name, IdToHex(id), IdToHex(c.id)));
}

void World::CrashProc(int i, bool lose_volume, const std::string& why, std::optional<Duration> down) {
  Node& n = *nodes[i];
  if (n.proc) {
    Event(fmt::format("{}: quorate crashes ({}){}", n.name, why, lose_volume ? ", volume lost" : ""));
    PowerCut(n);
    EndProc(i);
  }
  if (lose_volume) {
    if (n.view) n.prev_view = n.view;
    std::error_code ignored;
    std::filesystem::remove_all(n.data_dir, ignored);
    n.wals.clear();
    n.data_incarnation = -1;
    n.data_member = 0;
    n.view.reset();
    n.log_past_bootstrap = false;
    n.data_refounded = false;
    n.db_size = 0;
    n.applied = 0;
    n.restored_pending.reset();
    ClearLog(n);
    if (!n.proc) Event(fmt::format("{}: volume lost", n.name));
  }
  if (!n.restart_pending) {
    n.restart_pending = true;
    At(now_ + (down ? *down : rng_.Between(milliseconds(200), milliseconds(8000))), [this, i] { StartProc(i); });
  }
}

// Ends node i's quorate process: its threads unwind from the seam calls they are parked in, and its
// etcd, which gets a parent-death signal, ends with it.
void World::EndProc(int i) {
  Node& n = *nodes[i];
  std::unique_ptr<Proc> proc = std::move(n.proc);
  for (auto it = proc->tasks.rbegin(); it != proc->tasks.rend(); ++it) {
    Task* t = *it;
    if (!t->done) {
      t->killed = true;
      Resume(*t);
    }
    t->thread.join();
  }
  for (Task* t : proc->tasks) {
    std::erase_if(tasks_, [&](const std::unique_ptr<Task>& owned) { return owned.get() == t; });
  }
  if (n.etcd.running) ExitEtcd(i, ExitStatus::Signaled(SIGTERM), "its quorate process ended");
}

// --- etcd ---

bool World::HoldsData(const Node& n) const { return n.data_incarnation >= 0 && HasEtcdData(n.data_dir); }

int World::LiveIncarnation(ClusterId id) {
  for (int inc = static_cast<int>(clusters_.size()) - 1; inc >= 0; --inc) {
    if (clusters_[inc].id != id) continue;
    for (auto& n : nodes) {
      if ((n->etcd.running && n->etcd.incarnation == inc) || (HoldsData(*n) && n->data_incarnation == inc)) return inc;
    }
  }
  return -1;
}

// etcd writes its WAL a moment after its launch (before its peer port answers): the agent beside
// it answers meanwhile from a data dir with no WAL yet. The file is written then, or when etcd ends
// first.
void World::WriteWal(Node& n, MemberId id, ClusterId cluster_id, int incarnation) {
  // etcd on an empty data dir starts a follower, whatever member it was: raft elects anew, and the
  // empty log votes (a leader kept under that ID would cut every follower's log to nothing unchecked).
  if (clusters_[incarnation].leader == id) clusters_[incarnation].leader = 0;
  n.wal_pending = {id, cluster_id};
  At(now_ + milliseconds(1 + static_cast<int>(Rng(options_.seed ^ n.wals.size() ^ (uint64_t{id} << 8)).Below(15))),
     [this, i = n.index, child = n.etcd.child] {
       if (nodes[i]->etcd.child == child) FlushWal(*nodes[i]);
     });
  TakeData(n, incarnation, id);
  ClearLog(n);
}

void World::ClearLog(Node& n) {
  n.log.clear();
  n.commit_seen = n.kv_applied = n.kv_committed = 0;
}

void World::FlushWal(Node& n) {
  if (!n.wal_pending) return;
  auto [id, cluster_id] = *n.wal_pending;
  n.wal_pending.reset();
  if (Status s = quorate::WriteWal(n.data_dir, id, cluster_id); !s.ok()) Fail(Check::kModel, "sim: " + s.message());
  const std::string path = WalFile(n.data_dir);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) n.wals.emplace_back(st.st_ino, path);
}

bool World::AgentServes(Node& k) {
  std::lock_guard lock(k.agent_mu);
  return k.proc && k.agent_answer && k.agent_gen == k.proc->gen;
}

std::optional<AgentState> World::AgentAnswerOf(Node& k) {
  std::function<AgentState()> answer;
  {
    std::lock_guard lock(k.agent_mu);
    if (k.proc && k.agent_gen == k.proc->gen) answer = k.agent_answer;
  }
  if (!answer) return std::nullopt;
  return answer();
}

Result<std::unique_ptr<ChildProcess>> World::StartEtcd(int i, const LaunchSpec& spec) {
  Node& n = *nodes[i];
  if (!Sleep(milliseconds(2))) return Status::Internal("sim: killed");
  if (n.proc && n.proc->gen == n.held_removed_gen) {
    Fail(Check::kRestartedRemoved, fmt::format("{} starts etcd again after holding it stopped because its member was removed (rule 1b)",
                     n.name));
  }
  std::map<std::string, std::string> flags;
  for (size_t k = 1; k < spec.argv.size(); ++k) {
    const std::string& a = spec.argv[k];
    auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  auto child = std::make_shared<Child>();
  child->pid = next_pid_++;
  child->exit_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ++result_.etcd_starts;
  n.etcd = EtcdState{};
  n.etcd.child = child;
  std::optional<std::string> refused = BootEtcd(n, flags);
  if (refused) {
    Event(fmt::format("{}: etcd refuses to start: {}", n.name, *refused));
    n.etcd.running = true;  // until it exits, a moment later
    n.etcd.ready_at = Clock::kNever;
    At(now_ + milliseconds(50), [this, i, child, why = *refused] {
      if (nodes[i]->etcd.child == child && nodes[i]->etcd.running) ExitEtcd(i, ExitStatus::Exited(1), why);
    });
  }
  AfterChange();
  return MakeSimChild(*this, i, child);
}

// What etcd does with its data dir and flags at start; why it exits at once, if it does.
std::optional<std::string> World::BootEtcd(Node& n, const std::map<std::string, std::string>& flags) {
  auto flag = [&](const char* name) {
    auto it = flags.find(name);
    return it == flags.end() ? std::string() : it->second;
  };
  auto run = [&](MemberId id, int inc, ClusterView view) {
    n.etcd.running = true;
    n.etcd.id = id;
    n.etcd.cluster_id = clusters_[inc].id;
    n.etcd.incarnation = inc;
    n.etcd.ready_at = now_ + rng_.Between(milliseconds(20), milliseconds(400));
    if (!n.view || n.view->cluster_id != view.cluster_id) n.view = std::move(view);
  };
  if (flag("data-dir") != n.data_dir) return "sim: --data-dir is not the node's";
  AdoptRestored(n);
  if (HasEtcdData(n.data_dir)) {
    auto wal = ReadWalIdentity(n.data_dir);
    if (!wal.ok()) return "cannot read its WAL: " + wal.status().message();
    int inc = n.data_incarnation;
    if (inc < 0 || clusters_[inc].id != wal->cluster_id) return "sim: a WAL the simulation did not write";
    Event(fmt::format("{}: etcd restarts on its data as {} of {}", n.name, IdToHex(wal->member_id),
                      IdToHex(wal->cluster_id)));
    run(wal->member_id, inc, n.view.value_or(ClusterView{clusters_[inc].id, clusters_[inc].members}));
    // As it replays its WAL, GET /members lists the members replayed so far, none started (§8); in
    // one restart of four the log since the last snapshot is long, and the replay takes seconds.
    n.replay_until = n.etcd.ready_at + (rng_.Chance(0.25) ? rng_.Between(milliseconds(400), milliseconds(3000))
                                                          : rng_.Between(milliseconds(0), milliseconds(400)));
    n.replay_members = 1 + rng_.Below(n.view->members.size());
    return std::nullopt;
  }
  auto entries = ParseInitialCluster(flag("initial-cluster"), "--initial-cluster");
  if (!entries.ok()) return entries.status().message();
  auto advertised = ParseUrlList(flag("initial-advertise-peer-urls"), "--initial-advertise-peer-urls");
  if (!advertised.ok()) return advertised.status().message();
  std::string token = flag("initial-cluster-token");
  std::string state = flag("initial-cluster-state");

  // The etcd answering at the first of these peer URLs that does, and what it knows.
  auto remote = [&]() -> std::optional<ClusterView> {
    for (const auto& e : *entries) {
      for (const auto& u : e.peer_urls) {
        if (std::find(advertised->begin(), advertised->end(), u) != advertised->end()) continue;
        auto url = ParseUrl(u);
        int k = url.ok() ? NodeByHost(url->host) : -1;
        if (k >= 0 && k != n.index && Answers(k) && Reach(n.index, k) && nodes[k]->view) return ViewAnswered(k);
      }
    }
    return std::nullopt;
  };

  if (state == "new") {
    std::vector<MemberId> ids;
    std::optional<MemberId> self;
    for (const auto& e : *entries) {
      ids.push_back(ComputeMemberId(e.peer_urls, token));
      if (e.name == flag("name")) {
        if (!SameUrlSet(e.peer_urls, *advertised)) return "--initial-cluster does not match --initial-advertise-peer-urls";
        self = ids.back();
      }
    }
    if (!self) return "--name is not in --initial-cluster";
    ClusterId cid = ComputeClusterId(ids);
    // etcd 3.4's isMemberBootstrapped: a peer lists this member as started.
    if (auto r = remote(); r && r->cluster_id == cid) {
      for (const auto& m : r->members) {
        if (m.id == *self && m.started()) return fmt::format("member {} has already been bootstrapped", IdToHex(*self));
      }
    }
    bool refounded = false;
    // Invariant: no `new` start where peers hold data of a cluster of the same token, but for an
    // initial member of that very cluster that never started (rule 3).
    for (size_t inc = 0; inc < clusters_.size(); ++inc) {
      const SimCluster& c = clusters_[inc];
      if (c.token != token || LiveIncarnation(c.id) != static_cast<int>(inc)) continue;
      if (c.id != cid) {
        Fail(Check::kNewOverData, fmt::format("{} starts a new cluster {} while cluster {} of the same token has data (rules 1, 5)", n.name,
                         IdToHex(cid), IdToHex(c.id)));
        continue;
      }
      auto it = std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == *self; });
      if (it == c.members.end() || it->started()) {
        std::string what = fmt::format(
            "{} starts `new` as member {} of cluster {}, which {} (rule 3 is for initial members that never started)",
            n.name, IdToHex(*self), IdToHex(cid), it == c.members.end() ? "removed it" : "lists as started before");
        // So many voters started and lost their data that those left are no quorum: a start `new`
        // then overwrites nothing only if no log that is kept went past the bootstrap (rule 3 reads
        // that from the kept WALs); what the lost members held is gone either way. A member that
        // already started anew this way holds none of what it lost.
        size_t voters = 0, lost = 0;
        for (const auto& m : c.members) {
          if (m.is_learner) continue;
          ++voters;
          bool kept = std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) {
            return k->data_incarnation == static_cast<int>(inc) && k->data_member == m.id && !k->data_refounded;
          });
          if (m.started() && !kept) ++lost;
        }
        bool kept_past = std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) {
          return HoldsData(*k) && k->data_incarnation == static_cast<int>(inc) && k->log_past_bootstrap;
        });
        // Rule 3's init-mode window (DESIGN §4): with a majority lost, a holder with no agent
        // answering is judged by its view, and a view that still shows no member started hides a
        // log past the bootstrap. Counted and reported, not failed: the rule chose it over waiting
        // for ever in every init-mode bootstrap where one node started first.
        bool window = kept_past && std::all_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) {
          if (!HoldsData(*k) || k->data_incarnation != static_cast<int>(inc) || !k->log_past_bootstrap) return true;
          bool agent = AgentServes(*k);
          bool view_past = k->view && std::any_of(k->view->members.begin(), k->view->members.end(),
                                                  [](const ClusterMember& v) { return v.started(); });
          return !agent && !view_past;
        });
        if (voters - lost < voters / 2 + 1 && window) {
          Event(fmt::format("{}: a majority lost its data and the kept log past the bootstrap is behind a view "
                            "that shows no start and no agent: rule 3's init-mode window",
                            n.name));
          result_.init_window = true;
          Mark("rule 3's init-mode window");
          clusters_[inc].writes_forfeit = true;
          refounded = true;
        } else if (voters - lost >= voters / 2 + 1 || kept_past) {
          Fail(Check::kNewOverData, what + (kept_past ? ", over a kept log past the bootstrap" : ""));
        } else {
          Event(fmt::format("{}: a majority lost its data, and no kept log went past the bootstrap", n.name));
          refounded = true;
        }
      }
    }
    int inc = LiveIncarnation(cid);
    if (inc < 0) {
      SimCluster c;
      c.id = cid;
      c.token = token;
      for (const auto& e : *entries) c.members.push_back({ComputeMemberId(e.peer_urls, token), "", e.peer_urls, {}, false});
      c.history.emplace_back(now_, c.members);
      clusters_.push_back(std::move(c));
      inc = static_cast<int>(clusters_.size()) - 1;
      auto& seen = cluster_ids_by_token_[token];
      // On a cloud the group replaces instances under new names and addresses, so once every
      // instance that held a cluster's data is gone the same discovery makes another cluster ID:
      // nothing is left to split from. Anywhere else, and while an earlier cluster has data anywhere,
      // a second cluster ID is a split.
      if (cloud_) {
        std::erase_if(seen, [&](ClusterId earlier) { return earlier != cid && LiveIncarnation(earlier) < 0; });
      }
      if (std::find(seen.begin(), seen.end(), cid) == seen.end()) seen.push_back(cid);
      if (seen.size() > 1) {
        Fail(Check::kTwoClusterIds, fmt::format("token '{}' has {} cluster IDs: {} (rule 5: never two clusters from one discovery set)", token,
                         seen.size(), fmt::join(seen, ",")));
      }
      Event(fmt::format("{}: etcd bootstraps cluster {} (incarnation {})", n.name, IdToHex(cid), inc));
    } else {
      Event(fmt::format("{}: etcd starts new as initial member {} of cluster {}", n.name, IdToHex(*self), IdToHex(cid)));
    }
    ClusterView initial{cid, {}};
    for (const auto& e : *entries) initial.members.push_back({ComputeMemberId(e.peer_urls, token), "", e.peer_urls, {}, false});
    WriteWal(n, *self, cid, inc);
    n.data_refounded = refounded;
    if (n.view) n.prev_view = n.view;
    n.view.reset();
    run(*self, inc, initial);
    return std::nullopt;
  }
  if (state != "existing") return "bad --initial-cluster-state " + state;
  // etcd's ValidateClusterAndAssignIDs against the membership a peer answers.
  auto r = remote();
  if (!r) return "could not retrieve cluster information from the given URLs";
  if (r->members.size() != entries->size()) {
    return fmt::format("member count is unequal ({} in --initial-cluster, {} in the cluster)", entries->size(),
                       r->members.size());
  }
  for (const auto& e : *entries) {
    bool matched = std::any_of(r->members.begin(), r->members.end(),
                               [&](const ClusterMember& m) { return SameUrlSet(m.peer_urls, e.peer_urls); });
    if (!matched) return "unmatched member while checking PeerURLs";
  }
  auto self = std::find_if(r->members.begin(), r->members.end(),
                           [&](const ClusterMember& m) { return SharesUrl(m.peer_urls, *advertised); });
  if (self == r->members.end()) return "the cluster does not list this member";
  int inc = LiveIncarnation(r->cluster_id);
  if (inc < 0) return "no such cluster runs";
  const auto& members = clusters_[inc].members;
  auto committed = std::find_if(members.begin(), members.end(), [&](const ClusterMember& m) { return m.id == self->id; });
  if (committed == members.end()) return "the member was removed from the cluster";
  // Invariant: an empty data dir never takes up a member that has started. Its log and its vote went
  // with its data, so raft would count it as the voter it was, and it could vote twice in one term.
  // Such a member is replaced (rule 4: removed, then a new one added), never joined as (rule 2).
  if (committed->started()) {
    Fail(Check::kStartedEmpty, fmt::format("{} starts etcd with an empty data dir as member {} of cluster {}, which "
                                           "started before: its log and vote are lost (rule 4 replaces such a member)",
                                           n.name, IdToHex(self->id), IdToHex(r->cluster_id)));
  }
  Event(fmt::format("{}: etcd joins cluster {} as {}", n.name, IdToHex(r->cluster_id), IdToHex(self->id)));
  WriteWal(n, self->id, r->cluster_id, inc);
  if (n.view) n.prev_view = n.view;
  n.view.reset();
  run(self->id, inc, *r);
  return std::nullopt;
}

void World::SignalEtcd(int i, const std::shared_ptr<Child>& child, int signal) {
  if (nodes[i]->etcd.child != child || !nodes[i]->etcd.running) return;
  if (signal == SIGTERM || signal == SIGINT || signal == SIGKILL) ExitEtcd(i, ExitStatus::Signaled(signal), "signalled");
}

void World::ExitEtcd(int i, ExitStatus status, const std::string& why) {
  Node& n = *nodes[i];
  if (!n.etcd.running) return;
  FlushWal(n);
  Event(fmt::format("{}: etcd exits ({}): {}", n.name, status.ToString(), why));
  // What bbolt had not committed yet goes with the process; the WAL holds it for the next start.
  if (n.kv_applied > n.kv_committed) Mark("an exit lost bbolt's unbatched tail, which the WAL replays");
  n.kv_applied = n.kv_committed;
  n.etcd.running = false;
  n.etcd.connected = false;
  std::shared_ptr<Child> child = n.etcd.child;
  child->exited = status;
  uint64_t one = 1;
  (void)!::write(child->exit_fd, &one, sizeof one);
}

bool World::Answers(int i) const {
  const Node& n = *nodes[i];
  return n.etcd.running && now_ >= n.etcd.ready_at;
}

bool World::Defragmenting(int i) const { return nodes[i]->etcd.running && now_ < nodes[i]->etcd.defrag_until; }

bool World::Serves(int i) const { return Answers(i) && !Defragmenting(i); }

// Raft keeps its leader while the leader runs on a quorum's side (and a member cut off from the
// quorum knows none, as etcd's check-quorum makes it); only then is another one elected.
int World::LeaderSeenBy(int k) {
  SimCluster* c = ClusterOf(k);
  if (c == nullptr || !InQuorum(k)) return -1;
  auto running = [&](const ClusterMember& m) {
    if (m.is_learner) return -1;
    for (auto& j : nodes) {
      if (j->etcd.incarnation == nodes[k]->etcd.incarnation && j->etcd.id == m.id && Answers(j->index) &&
          Reach(k, j->index)) {
        return j->index;
      }
    }
    return -1;
  };
  for (const auto& m : c->members) {
    if (m.id != c->leader) continue;
    if (int j = running(m); j >= 0) return j;
  }
  // raft's election: a voter gives its vote only to a candidate whose log is at least as up to date
  // as its own (the last entry's term, then the length), and a candidate needs the votes of a
  // majority of all the voters. The most up to date of a quorum's side always wins; which one of
  // several that could, the order of the members decides, as it did before the model had data.
  std::vector<int> side;
  size_t voters = 0;
  for (const auto& m : c->members) {
    if (m.is_learner) continue;
    ++voters;
    if (int j = running(m); j >= 0) side.push_back(j);
  }
  auto at_least_as_up_to_date = [](const Node& a, const Node& b) {
    const uint64_t at = a.log.empty() ? 0 : a.log.back().term;
    const uint64_t bt = b.log.empty() ? 0 : b.log.back().term;
    return at != bt ? at > bt : a.log.size() >= b.log.size();
  };
  for (int j : side) {
    const size_t votes = static_cast<size_t>(
        std::count_if(side.begin(), side.end(), [&](int v) { return at_least_as_up_to_date(*nodes[j], *nodes[v]); }));
    if (votes * 2 <= voters) continue;
    Node& leader = *nodes[j];
    c->leader = leader.etcd.id;
    // The new term's empty entry: once a majority holds it, everything before it is committed.
    leader.log.push_back({++c->term, 0});
    if (j != side.front()) Mark("an election the up-to-date rule decided");
    CheckWritesKept(*c, j, "is elected leader");
    return j;
  }
  return -1;
}

void World::CheckWritesKept(SimCluster& c, int k, const char* when) {
  if (c.committed.empty() || c.writes_forfeit) return;
  const Node& leader = *nodes[k];
  const size_t held = Matching(leader.log, c.committed);
  if (held == c.committed.size()) return;
  // A put no member's kept data holds any more went with the disks of every voter that had it (a
  // majority lost): nothing quorate could keep. One some member still holds, a leader lacks only
  // because raft counted a vote that member's data should have cast.
  const int inc = static_cast<int>(&c - clusters_.data());
  size_t kept = 0;
  std::string holder;
  for (auto& n : nodes) {
    if (!HoldsData(*n) || n->data_incarnation != inc) continue;
    if (std::none_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == n->data_member; })) {
      continue;
    }
    if (size_t m = Matching(n->log, c.committed); m > kept) {
      kept = m;
      holder = n->name;
    }
  }
  for (size_t i = held; i < kept; ++i) {
    if (c.committed[i].write == 0) continue;
    Fail(Check::kWriteLost,
         fmt::format("{} {} of cluster {} (term {}) without put {}, acknowledged at index {} once a majority "
                     "of the voters held it, which {} still holds: {} of the {} entries committed are missing from "
                     "its log (§4: no acknowledged write is ever lost)",
                     leader.name, when, IdToHex(c.id), c.term, c.committed[i].write, i + 1, holder,
                     c.committed.size() - held, c.committed.size()));
    return;
  }
  Event(fmt::format("{} {} of cluster {} without the last {} committed entries, which no member's kept data "
                    "holds any more",
                    leader.name, when, IdToHex(c.id), c.committed.size() - held));
  Mark("acknowledged puts lost with the disks that held them");
  c.committed.resize(held);
}

void World::Writer() {
  if (now_ < write_due_) return;
  const auto due = (now_ - write_due_) / kPutEvery + 1;
  write_due_ += due * kPutEvery;
  if (clusters_.empty()) return;
  const int inc = static_cast<int>(clusters_.size()) - 1;
  SimCluster& c = clusters_[inc];
  // Under NOSPACE etcd refuses every put (§12).
  if (!c.nospace.empty()) return;
  for (auto& n : nodes) {
    if (!n->etcd.running || n->etcd.incarnation != inc || !InQuorum(n->index)) continue;
    const int leader = LeaderSeenBy(n->index);
    // A leader that defragments serves no client; a put that finds no leader is the writer's to
    // retry, never acknowledged.
    if (leader < 0 || !Serves(leader)) return;
    for (int64_t w = 0; w < due; ++w) nodes[leader]->log.push_back({c.term, next_write_++});
    return;
  }
}

void World::Replicate(int inc, int l) {
  SimCluster& c = clusters_[inc];
  const Node& leader = *nodes[l];
  size_t voters = 0, holding = 0;
  std::vector<Node*> synced;
  for (const auto& m : c.members) {
    voters += !m.is_learner;
    for (auto& n : nodes) {
      if (n->etcd.incarnation != inc || n->etcd.id != m.id || !Answers(n->index) || !Reach(l, n->index)) continue;
      // A follower whose disk stalls appends nothing: it falls behind while the others commit.
      if (n->index != l && n->stalled_until > now_) break;
      // A follower's log takes the leader's: the entries after the last one both hold go, the
      // leader's from there are appended (each one in the WAL, durable, before it is acknowledged).
      if (n->log.size() != leader.log.size() || (!n->log.empty() && n->log.back() != leader.log.back())) {
        n->log.resize(Matching(n->log, leader.log));
        n->log.insert(n->log.end(), leader.log.begin() + static_cast<long>(n->log.size()), leader.log.end());
      }
      holding += !m.is_learner;
      synced.push_back(n.get());
      break;
    }
  }
  // Committed once a majority of the voters holds it, and a leader that kept what was committed
  // before (CheckWritesKept ended the run otherwise) holds the committed entries first.
  const size_t known = c.committed.size();
  if (holding * 2 > voters && leader.log.size() > c.committed.size() && failure_.empty()) {
    c.committed.insert(c.committed.end(), leader.log.begin() + static_cast<long>(c.committed.size()), leader.log.end());
  }
  // The leader knows at once how far it committed; its followers learn it from its next message,
  // so a follower's commit trails the entries it acknowledged until then (its WAL's last HardState
  // too: what rule 8's recover commits on its copy).
  for (Node* n : synced) n->commit_seen = std::min(n == &leader ? c.committed.size() : known, n->log.size());
}

void World::Apply(Node& n) {
  n.kv_applied = std::max(n.kv_applied, std::min<uint64_t>(n.commit_seen, n.log.size()));
  if (n.kv_applied > n.kv_committed && (now_ - n.batch_at >= kBatchInterval || n.kv_applied - n.kv_committed >= kBatchLimit)) {
    n.kv_committed = n.kv_applied;
    n.batch_at = now_;
  }
}

int64_t World::InUse(const SimCluster& c) const { return kDbBaseBytes + (c.revision - c.compacted) * kWriteBytes; }

bool World::Reach(int from, int to) const {
  if (from < 0 || to < 0 || from == to) return true;
  if (nodes[to]->slow_until > now_ || nodes[from]->slow_until > now_) return false;
  return group_[from] == group_[to];
}

SimCluster* World::ClusterOf(int i) {
  const Node& n = *nodes[i];
  return n.etcd.incarnation >= 0 ? &clusters_[n.etcd.incarnation] : nullptr;
}

// Whether node i's etcd is on the side of the network where a majority of its cluster's voters run.
bool World::InQuorum(int i) {
  SimCluster* c = ClusterOf(i);
  if (c == nullptr || !Answers(i)) return false;
  size_t voters = 0, with_me = 0;
  for (const auto& m : c->members) {
    if (m.is_learner) continue;
    ++voters;
    for (auto& k : nodes) {
      if (Answers(k->index) && k->etcd.incarnation == nodes[i]->etcd.incarnation && k->etcd.id == m.id &&
          Reach(i, k->index)) {
        ++with_me;
      }
    }
  }
  return voters > 0 && with_me * 2 > voters;
}

// What raft does between two steps: members on the quorum's side publish themselves, learn the
// membership, catch up; a member that learns it was removed stops.
void World::ModelTick() {
  // The clusters some node is on the quorum's side of, and one such node of each.
  std::vector<std::pair<int, int>> quorate_sides;
  for (auto& np : nodes) {
    Node& n = *np;
    AdoptRestored(n);
    if (!Answers(n.index)) continue;
    Apply(n);
    n.answered_at = now_;
    n.answered_as = n.etcd.id;
    n.answered_inc = n.etcd.incarnation;
    SimCluster& c = clusters_[n.etcd.incarnation];
    bool in_quorum = InQuorum(n.index);
    if (!in_quorum) {
      n.etcd.connected = false;
      continue;
    }
    auto it = std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == n.etcd.id; });
    if (it == c.members.end()) {
      ExitEtcd(n.index, ExitStatus::Exited(0), "the member has been permanently removed from the cluster");
      continue;
    }
    n.in_quorum_at = now_;
    if (std::none_of(quorate_sides.begin(), quorate_sides.end(),
                     [&](const std::pair<int, int>& side) { return side.first == n.etcd.incarnation; })) {
      quorate_sides.emplace_back(n.etcd.incarnation, n.index);
    }
    if (!n.etcd.connected) {
      n.etcd.connected = true;
      n.etcd.connected_since = now_;
    }
    if (!n.log_past_bootstrap) {
      // A leader's entries reach every member on the quorum's side, into its WAL.
      FlushWal(n);
      if (Status s = AppendWalEntry(n.data_dir, 2, c.members.size() + 1); !s.ok()) Fail(Check::kModel, "sim: " + s.message());
      n.log_past_bootstrap = true;
    }
    n.data_refounded = false;
    if (!it->started()) {
      it->name = n.name;
      it->client_urls = {n.client_url};
      Event(fmt::format("{}: member {} published", n.name, IdToHex(it->id)));
      if (n.lose_volume_once_published) LoseVolumeOncePublished(n);
    }
    // A learner whose disk stalls appends nothing, so it does not catch up meanwhile.
    if (it->is_learner && std::find(c.caught_up.begin(), c.caught_up.end(), it->id) == c.caught_up.end() &&
        now_ - n.etcd.connected_since >= c.catch_up[it->id] && n.stalled_until <= now_) {
      c.caught_up.push_back(it->id);
    }
    if (n.frozen_until <= now_) n.view = ClusterView{c.id, c.members};
    if (maintenance_) {
      if (!Defragmenting(n.index)) n.db_size = std::max(n.db_size, InUse(c));
      // A voter, or a learner caught up, has applied what the leader committed; a learner catching
      // up gets there as its catch-up time passes, which is the progress rule M6 watches; while its
      // disk stalls it applies nothing.
      bool behind = it->is_learner && std::find(c.caught_up.begin(), c.caught_up.end(), it->id) == c.caught_up.end();
      if (!behind) {
        n.applied = c.raft_index;
      } else if (n.stalled_until <= now_) {
        const auto took = std::max<int64_t>(1, c.catch_up[it->id].count());
        n.applied = std::max(n.applied, c.raft_index * static_cast<uint64_t>((now_ - n.etcd.connected_since).count()) /
                                            static_cast<uint64_t>(took));
      }
    }
  }
  for (auto [inc, k] : quorate_sides) {
    if (int leader = LeaderSeenBy(k); leader >= 0) Replicate(inc, leader);
  }
}

// --- peers, network, discovery ---

int World::NodeByHost(const std::string& host) const {
  for (const auto& n : nodes) {
    if (n->host == host) return n->index;
  }
  return -1;
}

int World::NodeByClientUrl(const std::string& url) const {
  for (const auto& n : nodes) {
    if (n->client_url == url) return n->index;
  }
  return -1;
}

PeerFacts World::Ask(int from, const Member& peer) {
  PeerFacts facts{peer.name, {false, "deadline exceeded", DataState::kUnknown, "", 0}, std::nullopt, {}, std::nullopt};
  auto url = ParseUrl(peer.peer_urls.front());
  int k = url.ok() ? NodeByHost(url->host) : -1;
  if (k < 0) return facts;
  // Asks run on GatherFacts' threads at once: their drops come from a hash, not the shared generator.
  uint64_t draw = Rng(options_.seed ^ (static_cast<uint64_t>(from) << 40) ^ (static_cast<uint64_t>(k) << 32) ^
                      nodes[from]->asks[k]++)
                      .Next();
  bool dropped = FaultsOn() && static_cast<double>(draw >> 11) * 0x1.0p-53 < drop_rate_;
  nodes[from]->asked_at[k] = now_;
  Node& p = *nodes[k];
  if (dropped || !Reach(from, k)) return facts;
  if (p.wal_pending && AgentServes(p)) Mark("an agent asked before its etcd wrote the WAL");
  if (auto s = AgentAnswerOf(p)) {
    facts.agent = {true, "", s->data_state, s->token, s->cluster_id, s->log_past_bootstrap};
  } else {
    facts.agent = {false, "connection refused", DataState::kUnknown, "", 0};
  }
  for (const auto& u : peer.peer_urls) {
    auto parsed = ParseUrl(u);
    int j = parsed.ok() ? NodeByHost(parsed->host) : -1;
    if (j >= 0 && nodes[j]->peer_url == u && Answers(j) && Reach(from, j) && nodes[j]->view) {
      facts.cluster = ViewAnswered(j);
      // Rule 1b's hazard: a view that lacks the asker's member, which the cluster still lists.
      const Node& asker = *nodes[from];
      if (facts.cluster && HoldsData(asker) && asker.data_incarnation >= 0 &&
          facts.cluster->cluster_id == clusters_[asker.data_incarnation].id) {
        const auto lists = [&](const std::vector<ClusterMember>& ms) {
          return std::any_of(ms.begin(), ms.end(), [&](const ClusterMember& m) { return m.id == asker.data_member; });
        };
        if (!lists(facts.cluster->members) && lists(clusters_[asker.data_incarnation].members)) {
          Mark("a view lacks the asker's member, which the cluster lists");
        }
      }
      facts.version = VersionAnswer{EtcdVersionOfSim(), EtcdVersion{EtcdVersionOfSim().major, EtcdVersionOfSim().minor, 0}};
      break;
    }
  }
  return facts;
}

Result<ClusterView> World::Probe(int from, const std::string& peer_url, milliseconds timeout) {
  auto url = ParseUrl(peer_url);
  int k = url.ok() ? NodeByHost(url->host) : -1;
  bool reachable = k >= 0 && Reach(from, k);
  if (!Sleep(reachable ? rng_.Between(milliseconds(1), milliseconds(10)) : Duration(timeout))) {
    return Status::Unavailable("sim: killed");
  }
  if (k >= 0 && nodes[k]->peer_url == peer_url && Answers(k) && Reach(from, k) && nodes[k]->view) return *ViewAnswered(k);
  return Status::Unavailable(peer_url + "/members: connection refused");
}

World::CallTarget World::PickEndpoint(int from, const std::vector<std::string>& endpoints, milliseconds timeout) {
  bool silent = false;
  for (const auto& e : endpoints) {
    int k = NodeByClientUrl(e);
    if (k < 0) continue;
    if (!Reach(from, k)) {
      silent = true;
      continue;
    }
    if (!Serves(k)) continue;
    SimCluster* c = ClusterOf(k);
    auto it = std::find_if(c->members.begin(), c->members.end(),
                           [&](const ClusterMember& m) { return m.id == nodes[k]->etcd.id; });
    if (it == c->members.end() || it->is_learner) continue;
    return {k, Status::Ok()};
  }
  if (!Sleep(silent ? Duration(timeout) : Duration(milliseconds(2)))) return {-1, Status::Unavailable("sim: killed")};
  return {-1, Status::Unavailable(fmt::format("no endpoint answers of {}", fmt::join(endpoints, ",")))};
}

Result<std::vector<Member>> World::Discover(int i, bool* whole_group) {
  *whole_group = false;
  if (!Sleep(rng_.Between(milliseconds(1), milliseconds(20)))) return Status::Unavailable("sim: killed");
  Node& n = *nodes[i];
  std::vector<Member> members;
  // The pods that exist: after a scale-in, those of the ordinals going are listed until deleted.
  for (size_t k = 0; k < group_size_; ++k) {
    const Node& m = *nodes[k];
    if (!m.gone) members.push_back({m.name, {m.peer_url}, {m.client_url}});
  }
  const size_t listed = members.size();
  // A cloud's provider lists the whole group or fails: a page it could not read (the odd answers of
  // the first two kinds) is an error, retried; one still listing an instance that is gone, or one
  // whose listing left a live instance out, is whole as far as the provider knows.
  if (cloud_ && n.odd_discovery_until > now_ && n.odd_discovery < 2) {
    return Status::Unavailable("sim: a page of the group's instances could not be read");
  }
  *whole_group = cloud_;
  if (n.odd_discovery_until > now_ && listed > 1) {
    size_t other = (static_cast<size_t>(i) + 1 + rng_.Below(listed - 1)) % listed;
    switch (n.odd_discovery) {
      case 0:  // partial: one member not listed yet
        members.erase(members.begin() + static_cast<long>(other));
        break;
      case 1:  // one member still at its old address
        members[other].peer_urls = {fmt::format("http://10.0.9.{}:2380", other + 1)};
        members[other].client_urls = {fmt::format("http://10.0.9.{}:2379", other + 1)};
        break;
      case 2:  // a member that is gone is still listed
        members.push_back({"gone", {"http://10.0.9.99:2380"}, {"http://10.0.9.99:2379"}});
        break;
      default:  // the group's own listing leaves out a live instance (in standby, say: not counted)
                // and lists, in its place, one still pending, so the count is the group's size
        if (n.left_out >= 0 && static_cast<size_t>(n.left_out) < listed) {
          Mark("a live instance left out of two listings in a row");
          other = static_cast<size_t>(n.left_out);
        }
        n.left_out = static_cast<int>(other);
        if (static_cast<size_t>(i) != other) {
          Mark("a whole-group listing left out a live instance");
          members[other] = {fmt::format("pending-{}", other + 1), {fmt::format("http://10.0.8.{}:2380", other + 1)},
                            {fmt::format("http://10.0.8.{}:2379", other + 1)}};
        }
        break;
    }
  }
  return members;
}

// What node k's etcd answers on its peer URL: while it replays its WAL, the members replayed so
// far, none started yet; while a previous incarnation's answers arrive, the view that one had.
std::optional<ClusterView> World::ViewAnswered(int k) {
  Node& n = *nodes[k];
  if (!n.view) return std::nullopt;
  if (n.old_answers_until > now_ && n.prev_view) {
    Mark("an answer from a previous incarnation");
    return n.prev_view;
  }
  if (n.replay_until > now_ && n.etcd.incarnation >= 0) {
    // The log replays in its order: the bootstrap's members come first, one at a time, and none has
    // started until the publishes after them. A member added later is replayed only after those
    // publishes, so a view that lists none started holds initial members only (the answerer's own,
    // if it joined later, is not among them).
    const std::vector<ClusterMember>& initial = clusters_[n.etcd.incarnation].history.front().second;
    ClusterView partial{n.view->cluster_id, {}};
    for (size_t m = 0; m < n.replay_members && m < initial.size(); ++m) {
      ClusterMember replayed = initial[m];
      replayed.name.clear();
      replayed.client_urls.clear();
      partial.members.push_back(std::move(replayed));
    }
    Mark("a partial view of a member replaying its WAL");
    if (partial.members.size() < initial.size() &&
        std::any_of(partial.members.begin(), partial.members.end(), [&](const ClusterMember& m) { return m.id == n.etcd.id; })) {
      Mark("a replaying view lists its answerer but not every initial member");
    }
    // Initial members leave the membership only by removal: one the replay still lists was removed
    // since (rule 3 must not start `new` under it).
    const std::vector<ClusterMember>& now_members = clusters_[n.etcd.incarnation].members;
    for (const auto& r : partial.members) {
      if (std::none_of(now_members.begin(), now_members.end(), [&](const ClusterMember& m) { return m.id == r.id; })) {
        Mark("a replaying view lists a member removed since");
      }
    }
    return partial;
  }
  // A member removed while its etcd was down answers, restarted on its data, the membership it last
  // saw: itself and every voter of then (rule 4 must not count on such a view).
  if (n.etcd.incarnation >= 0) {
    const auto& members = clusters_[n.etcd.incarnation].members;
    const auto id = n.etcd.id;
    if (std::none_of(members.begin(), members.end(), [&](const ClusterMember& m) { return m.id == id; }) &&
        std::any_of(n.view->members.begin(), n.view->members.end(), [&](const ClusterMember& m) { return m.id == id; })) {
      Mark("a removed member answers the membership from before its removal");
    }
  }
  return n.view;
}

std::vector<ClusterMember> World::SerializableListing(int k) {
  const Node& n = *nodes[k];
  const SimCluster& c = clusters_[n.etcd.incarnation];
  if (n.lagging_until <= now_) return c.members;
  const std::vector<ClusterMember>* then = &c.history.front().second;
  for (const auto& [since, members] : c.history) {
    if (since <= now_ - n.lag) then = &members;
  }
  if (then->size() != c.members.size()) Mark("a member list that lags");
  return *then;
}

void World::Changed(SimCluster& c) {
  c.history.emplace_back(now_, c.members);
  ++c.raft_index;
}

// --- faults ---

void World::ScheduleFaults() {
  etcd35_ = rng_.Chance(0.5);
  if (options_.etcd_minor != 0) etcd35_ = options_.etcd_minor == 5;
  fault_end_ = start_ + rng_.Between(milliseconds(5000), milliseconds(90000));
  end_ = fault_end_ + std::chrono::minutes(15);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Duration delay = rng_.Chance(0.8) ? rng_.Between(milliseconds(0), milliseconds(3000))
                                      : rng_.Between(milliseconds(0), milliseconds(30000));
    At(start_ + delay, [this, i] { StartProc(static_cast<int>(i)); });
  }
  int faults = static_cast<int>(rng_.Below(9));
  for (int k = 0; k < faults; ++k) {
    At(start_ + rng_.Between(milliseconds(0), std::chrono::duration_cast<milliseconds>(fault_end_ - start_)),
       [this] { Fault(); });
  }
  // Not beside a scale-in: rule M7 counts the members against spec.replicas, so with a member the
  // operator removed it never takes out a going ordinal's (§10).
  if (rng_.Chance(0.25) && !scale_in_) {
    At(start_ + rng_.Between(milliseconds(5000), std::chrono::duration_cast<milliseconds>(fault_end_ - start_) +
                                                     milliseconds(5000)),
       [this] { OperatorRemove(); });
  }
  if (laggards_) {
    // Drawn after the schedule above, so the faults a seed shares with its run without stalls come first.
    for (int k = 1 + static_cast<int>(rng_.Below(4)); k > 0; --k) {
      At(start_ + rng_.Between(milliseconds(0), std::chrono::duration_cast<milliseconds>(fault_end_ - start_)), [this] {
        Node& n = *nodes[rng_.Below(nodes.size())];
        n.stalled_until = std::min(fault_end_, now_ + rng_.Between(milliseconds(1000), milliseconds(15000)));
        Event(fmt::format("fault: {}'s disk stalls for {:.1f}s: its etcd falls behind the leader's log", n.name,
                          Seconds(n.stalled_until - now_)));
        Mark("a follower's disk stalled");
      });
    }
  }
  if (restore_) At(fault_end_, [this] { OperatorRestoreWhenDue(); });
  if (maintenance_) {
    At(start_ + kWriteTick, [this] { Workload(); });
    if (scale_in_) At(fault_end_, [this] { ScaleIn(); });
  }
  At(fault_end_, [this] {
    Event("faults stop; partitions heal");
    std::fill(group_.begin(), group_.end(), 0);
    drop_rate_ = 0;
    for (auto& n : nodes) {
      n->slow_until = n->frozen_until = n->odd_discovery_until = now_;
      if (!n->proc && !n->restart_pending) {
        n->restart_pending = true;
        At(now_ + rng_.Between(milliseconds(0), milliseconds(2000)), [this, i = n->index] { StartProc(i); });
      }
    }
  });
}

void World::Fault() {
  int i = static_cast<int>(rng_.Below(nodes.size()));
  Node& n = *nodes[i];
  Duration lasting = rng_.Between(milliseconds(500), milliseconds(20000));
  TimePoint until = std::min(now_ + lasting, fault_end_);
  switch (rng_.Below(cloud_ ? 13 : 12)) {
    case 0:
    case 1:
      CrashProc(i, false, "fault");
      break;
    case 2:
      CrashProc(i, true, "fault");
      break;
    case 3:
      if (n.etcd.running) ExitEtcd(i, ExitStatus::Signaled(SIGKILL), "fault: etcd crashes");
      break;
    case 4:
      Event("fault: every node crashes at once");
      for (auto& m : nodes) CrashProc(m->index, rng_.Chance(0.15), "all at once");
      break;
    case 5: {
      std::vector<int> groups(nodes.size());
      for (auto& g : groups) g = static_cast<int>(rng_.Below(2));
      Event(fmt::format("fault: partition {}", fmt::join(groups, "")));
      group_ = groups;
      At(until, [this] {
        Event("partition heals");
        std::fill(group_.begin(), group_.end(), 0);
      });
      break;
    }
    case 6:
      Event(fmt::format("fault: {} is slow to answer", n.name));
      n.slow_until = until;
      break;
    case 7:
      Event(fmt::format("fault: {}'s etcd answers a stale membership", n.name));
      n.frozen_until = std::min(until, now_ + rng_.Between(milliseconds(200), milliseconds(5000)));
      break;
    case 8:
      drop_rate_ = 0.05 + 0.3 * static_cast<double>(rng_.Below(100)) / 100;
      Event(fmt::format("fault: the network drops {:.2f} of answers", drop_rate_));
      At(until, [this] { drop_rate_ = 0; });
      break;
    case 9:
      n.odd_discovery = static_cast<int>(rng_.Below(cloud_ ? 4 : 3));
      n.odd_discovery_until = until;
      n.left_out = -1;
      Event(fmt::format("fault: discovery answers {} oddly ({})", n.name, n.odd_discovery));
      break;
    case 10:
      n.lag = rng_.Between(milliseconds(200), milliseconds(5000));
      n.lagging_until = until;
      Event(fmt::format("fault: {}'s etcd lists the members {:.1f}s behind unless asked linearizably", n.name,
                        Seconds(n.lag)));
      break;
    case 11:
      n.old_answers_until = std::min(until, now_ + rng_.Between(milliseconds(200), milliseconds(5000)));
      Event(fmt::format("fault: answers of {}'s previous etcd arrive late", n.name));
      break;
    default:
      ReplaceInstance(i);
      break;
  }
}

// The scaling group replaces node i's instance: the old one is gone with its disk and address, and a
// new one comes up under a new name at a new address (what rule 9 repairs).
void World::ReplaceInstance(int i) {
  Node& n = *nodes[i];
  Event(fmt::format("fault: the group replaces {}'s instance", n.name));
  CrashProc(i, true, "instance terminated");
  ++replacements_;
  n.name = fmt::format("n{}-{}", i + 1, replacements_);
  n.host = fmt::format("10.0.{}.{}", 10 + replacements_, i + 1);
  n.peer_url = "http://" + n.host + ":2380";
  n.client_url = "http://" + n.host + ":2379";
  n.config.name = n.name;
  n.config.agent_listen = n.host + ":2382";
  Event(fmt::format("{}: the new instance, at {}", n.name, n.host));
  // Right after a replacement the group's own listing may still leave a live instance out: the
  // newcomer, whose rule 9 reads it, must find that instance's peer URLs answering.
  if (rng_.Chance(0.5)) {
    n.odd_discovery = 3;
    n.odd_discovery_until = std::min(fault_end_, now_ + rng_.Between(milliseconds(1000), milliseconds(20000)));
    n.left_out = -1;
    Event(fmt::format("fault: discovery answers {} oddly ({})", n.name, n.odd_discovery));
  }
}

// The workload of a maintenance seed, a batch of writes each tick through the leader: each member
// that applies one checks its own quota, as etcd does, and raises NOSPACE for itself when the write
// finds no room; then every write is refused until the alarm is disarmed.
void World::Workload() {
  At(now_ + kWriteTick, [this] { Workload(); });
  if (clusters_.empty()) return;
  const int inc = static_cast<int>(clusters_.size()) - 1;
  SimCluster& c = clusters_[inc];
  std::vector<Node*> applying;
  int leader = -1;
  for (auto& n : nodes) {
    if (!n->etcd.running || n->etcd.incarnation != inc || !InQuorum(n->index)) continue;
    if (leader < 0) leader = LeaderSeenBy(n->index);
    if (!Defragmenting(n->index)) applying.push_back(n.get());
  }
  // A leader that defragments holds every write up (why §12 defragments it last).
  if (leader < 0 || Defragmenting(leader)) return;
  if (auto_compaction_ && now_ - auto_compacted_at_ >= kAutoCompactEvery) {
    auto_compacted_at_ = now_;
    if (c.revision - kAutoCompactKeeps > c.compacted) {
      c.compacted = c.revision - kAutoCompactKeeps;
      Event(fmt::format("etcd compacts its history up to revision {} by itself", c.compacted));
    }
  }
  if (!c.nospace.empty()) return;
  for (int w = 0; w < writes_per_tick_; ++w) {
    for (Node* n : applying) {
      if (n->db_size + kWriteBytes > kQuotaBytes) c.nospace.push_back(n->etcd.id);
    }
    if (!c.nospace.empty()) {
      c.nospace_since = now_;
      std::vector<std::string> ids;
      for (MemberId id : c.nospace) ids.push_back(IdToHex(id));
      Event(fmt::format("etcd raises NOSPACE for {}: writes are refused", fmt::join(ids, ",")));
      Mark("NOSPACE raised");
      return;
    }
    ++c.revision;
    ++c.raft_index;
    for (Node* n : applying) n->db_size = std::max(n->db_size, InUse(c));
  }
}

// The StatefulSet is scaled in (rule M7's ground), once the faults stopped and the cluster is whole:
// its spec.replicas go down first; Kubernetes then deletes the pods of the ordinals going, highest
// first, each after its grace period, so the leader may read the new replicas while their members
// still run. In one scale-in of two, a pod that stays restarts meanwhile, a voter down as M7 decides.
void World::ScaleIn() {
  if (std::string why; !Converged(&why)) {
    At(now_ + seconds(5), [this] { ScaleIn(); });
    return;
  }
  replicas_ = nodes.size() - (nodes.size() == 5 && rng_.Chance(0.5) ? 2 : 1);
  // Without --cluster-size the k8s provider implies the size from spec.replicas, which every
  // discovery reads anew: the running init jobs see the new size too.
  for (auto& n : nodes) n->config.cluster_size = replicas_;
  Event(fmt::format("the StatefulSet is scaled in to {} replicas", replicas_));
  Mark("a StatefulSet scaled in");
  Duration after{};
  for (size_t i = nodes.size(); i-- > replicas_;) {
    after += rng_.Between(milliseconds(500), milliseconds(15000));
    At(now_ + after, [this, i] {
      Node& n = *nodes[i];
      n.gone = true;
      Event(n.name + ": its pod is deleted");
      if (n.proc) EndProc(static_cast<int>(i));
    });
  }
  if (rng_.Chance(0.5)) {
    At(now_ + rng_.Between(milliseconds(0), milliseconds(3000)), [this, i = static_cast<int>(rng_.Below(replicas_))] {
      CrashProc(i, false, "its pod restarts during the scale-in");
    });
  }
}

// A learner's node loses its volume just after its member published itself, while its peers still
// answer member lists from before: its next decision may take the views' added member, unstarted,
// for its own to start as, whose ID an empty data dir must never start as (rule 4 replaces it). With
// a current peer, the other peers' lists are from before the add and lack the member, and the current
// one goes down with the volume for a while: the decision is to join on the lagging lists, and the
// add's membership read, once a quorum answers again, finds the member at its peer URL started (§4
// rule 2); etcd's own start asks whichever peer answers, the current one among them.
void World::LoseVolumeOncePublished(Node& n) {
  n.lose_volume_once_published = false;
  if (!FaultsOn()) return;
  const Duration lost_after = rng_.Between(milliseconds(0), milliseconds(500));
  const Duration stale = lost_after + rng_.Between(milliseconds(1500), milliseconds(4500));
  for (auto& peer : nodes) {
    if (peer.get() != &n && peer->index != n.current_peer) {
      peer->frozen_until = std::max(peer->frozen_until, now_ + stale);
    }
  }
  At(now_ + lost_after, [this, i = n.index, current = std::exchange(n.current_peer, -1)] {
    if (!FaultsOn() || !nodes[i]->proc) return;
    if (current >= 0 && nodes[current]->proc) {
      Mark("a new member's volume lost after its start while its peers' lists predate its add");
      CrashProc(current, false, "its machine goes down with the new member's volume",
                rng_.Between(milliseconds(500), milliseconds(4000)));
    }
    Mark("a new member's volume lost after its start while its peers' lists lack it");
    CrashProc(i, true, "volume lost right after its member published", rng_.Between(milliseconds(100), milliseconds(600)));
  });
}

void World::LearnerAdded(const std::vector<std::string>& peer_urls) {
  if (learner_churn_ && !cloud_ && FaultsOn() && rng_.Chance(0.5)) {
    // The new member's node loses its volume soon after its etcd started, and comes back while its
    // peers still answer member lists from before the add: a decision to join on views that lack a
    // member that has started, which the linearizable list before MemberAdd must catch (rule 2).
    // In one case in two the volume goes just after the member published itself
    // (LoseVolumeOncePublished).
    for (auto& n : nodes) {
      if (!SharesUrl(peer_urls, {n->peer_url})) continue;
      if (rng_.Chance(0.5)) {
        n->lose_volume_once_published = true;
        // In one case of two every peer's list but one's lags from the add on, until the publish and
        // after it (followers whose disks stall apply the membership seconds late); the fault's end
        // thaws them.
        if (rng_.Chance(0.5)) {
          n->current_peer = static_cast<int>((n->index + 1 + rng_.Below(nodes.size() - 1)) % nodes.size());
          for (auto& peer : nodes) {
            if (peer.get() != n.get() && peer->index != n->current_peer) {
              peer->frozen_until = std::max(peer->frozen_until, now_ + seconds(20));
            }
          }
        }
        continue;
      }
      const Duration stale = rng_.Between(milliseconds(2000), milliseconds(6000));
      for (auto& peer : nodes) {
        if (peer.get() != n.get()) peer->frozen_until = std::max(peer->frozen_until, now_ + stale);
      }
      At(now_ + rng_.Between(milliseconds(500), milliseconds(1500)), [this, i = n->index] {
        if (!FaultsOn() || !nodes[i]->proc) return;
        Mark("a new member's volume lost while its peers' lists lack it");
        CrashProc(i, true, "volume lost right after its add", rng_.Between(milliseconds(100), milliseconds(600)));
      });
    }
    return;
  }
  if (learner_churn_ && cloud_ && FaultsOn() && rng_.Chance(0.5)) {
    for (auto& n : nodes) {
      if (!SharesUrl(peer_urls, {n->peer_url})) continue;
      const bool with_voter = rng_.Chance(0.5);
      const int other = static_cast<int>((n->index + 1 + rng_.Below(nodes.size() - 1)) % nodes.size());
      At(now_ + rng_.Between(milliseconds(100), milliseconds(3000)), [this, i = n->index, other, with_voter] {
        // Only while faults strike, and only the instance that holds the learner still.
        if (!FaultsOn() || !nodes[i]->proc) return;
        Mark("a learner's instance replaced before its promotion");
        ReplaceInstance(i);
        if (with_voter) {
          Mark("a learner's and a voter's instances replaced at once");
          ReplaceInstance(other);
        }
      });
    }
    return;
  }
  if (!maintenance_ || !FaultsOn() || !rng_.Chance(0.5)) return;
  for (auto& n : nodes) {
    if (!SharesUrl(peer_urls, {n->peer_url})) continue;
    Duration down = kLearnerDeadline + rng_.Between(milliseconds(5000), milliseconds(20000));
    // In one case of two the machine lives and only its disk stalls: the learner appends nothing,
    // rule M6 removes it under the quorate process that ran its etcd, and M6's record must have
    // that process join again (§12 M6; the stuck-learner-rejoin test on real etcd).
    const bool disk_only = rng_.Chance(0.5);
    At(now_ + rng_.Between(milliseconds(100), milliseconds(3000)), [this, i = n->index, down, disk_only] {
      if (!nodes[i]->proc) return;
      if (disk_only) {
        Mark("a learner's disk stalled past --learner-deadline");
        Event(fmt::format("fault: {}'s disk stalls for {:.1f}s: its learner appends nothing", nodes[i]->name,
                          Seconds(std::min(fault_end_, now_ + down) - now_)));
        // Ended with the faults, as every stall: the end's check that each member holds every
        // acknowledged put is made once the cluster converged.
        nodes[i]->stalled_until = std::min(fault_end_, now_ + down);
        return;
      }
      Mark("a learner's node died");
      CrashProc(i, false, "its machine dies for longer than --learner-deadline, its learner left behind", down);
    });
  }
}

// The operator scales down by one the etcdctl way: `quorate member remove NAME` (node/member_remove).
void World::OperatorRemove() {
  if (operator_done_) return;
  operator_done_ = true;
  operator_began_ = now_;
  std::string name = nodes[rng_.Below(nodes.size())]->name;
  Event("operator: quorate member remove " + name);
  Spawn(nullptr, -1, [this, name] {
    Status s = OperatorRemoves(*this, *clock_, name);
    Event(fmt::format("operator: member remove {}: {}", name, s.ok() ? "ok" : s.message()));
  });
}

// --- what the real code decides and writes ---

void World::OnDecision(int i, const quorate::Decision& d) {
  Node& n = *nodes[i];
  n.decided_at = now_;
  n.last_wait = d.action == Action::kWait ? d.wait : WaitKind::kNone;
  Mark(d.action == Action::kWait ? "wait " + WaitKindName(d.wait) : std::string("decide ") + ActionName(d.action));
  if (d.remove_id) Mark(std::string("decide ") + ActionName(d.action) + " removing a member");
  if (d.data_removed && d.wait == WaitKind::kMajorityLost) Mark("a held removal says its cluster lost a majority");
  // Invariant: rule 1b says a member was removed only on a member list read with quorum, which holds
  // every committed change; a removed ID never comes back. The cluster's committed membership still
  // listing the member means the removal was read off a view that lags or is partial, and the
  // data of a live member is then held, or moved aside for a join beside it.
  if (d.data_removed && HoldsData(n) && n.data_incarnation >= 0) {
    const SimCluster& c = clusters_[n.data_incarnation];
    if (std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == n.data_member; })) {
      Fail(Check::kRemovalMisread,
           fmt::format("{} says its member {} was removed from cluster {}, which lists it still (rule 1b: a removal is "
                       "read only on a member list read with quorum)",
                       n.name, IdToHex(n.data_member), IdToHex(c.id)));
    }
  }
  if (d.action == Action::kLateInitial &&
      std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) { return HoldsData(*k) && !AgentServes(*k); })) {
    Mark("a late start beside a holder with no agent");
  }
  for (const auto& c : clusters_) {
    for (const auto& m : c.members) {
      if (d.remove_id && m.id == *d.remove_id && d.action == Action::kReplace && !m.started()) {
        Mark("a never-started member replaced");
      }
    }
  }
  // Ground truth the decision met: this node's member started and lost its data, and a view that
  // answers shows it as never started (rule 3's hazard).
  if (HoldsData(n)) return;
  for (const auto& c : clusters_) {
    for (const auto& m : c.members) {
      if (!m.started() || !SharesUrl(m.peer_urls, {n.peer_url})) continue;
      for (auto& k : nodes) {
        if (!Answers(k->index) || !k->view || k->view->cluster_id != c.id) continue;
        for (const auto& v : k->view->members) {
          if (v.id == m.id && !v.started()) Mark("a member that lost its data looks never started");
        }
      }
    }
  }
}

// The machine of node n loses power: what its quorate process renamed into place without syncing
// the directory since may be undone, and a file renamed before its data was synced is torn.
void World::PowerCut(Node& n) {
  if (!n.proc) return;
  for (auto it = n.proc->pending.rbegin(); it != n.proc->pending.rend(); ++it) {
    const PendingRename& r = *it;
    std::string left;
    bool present = true;
    if (rng_.Chance(0.5)) {
      Mark("a power cut undid a rename");
      present = r.before.has_value();
      left = r.before.value_or("");
    } else if (!r.data_synced) {
      left = r.content.substr(0, rng_.Below(r.content.size()));
    } else {
      continue;
    }
    std::error_code ignored;
    std::filesystem::remove(r.target, ignored);
    if (present) {
      std::FILE* f = std::fopen(r.target.c_str(), "w");
      if (f != nullptr) {
        std::fwrite(left.data(), 1, left.size(), f);
        std::fclose(f);
      }
    }
    Event(fmt::format("{}: power cut: {} {}", n.name, r.target, present ? "holds " + std::to_string(left.size()) + " bytes" : "is gone"));
    // The restore's checked copy of the snapshot is read only by the try that wrote it (restore.cc's
    // FileSink syncs nothing, by design): left torn here, a later try that read it would hand the
    // modelled etcdutl puts that are not the backup's, which `restore-data` catches.
    const bool restore_copy = r.target.rfind(n.config.state_dir + "/restore/", 0) == 0;
    if (present && left != r.content && (!r.before || left != *r.before) && !restore_copy) {
      Fail(Check::kTorn, fmt::format("a power cut on {} left {} torn: it was renamed into place before its data was synced (§3: a "
                       "reader never sees half a file)",
                       n.name, r.target));
    }
  }
  n.proc->pending.clear();
}

void World::OnFsync(int fd) {
  Proc& p = *tl_task->proc;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  std::error_code ec;
  std::filesystem::path path = std::filesystem::read_symlink(link, ec);
  struct stat st;
  if (ec || ::fstat(fd, &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    p.synced.insert(path.string());
  } else if (S_ISDIR(st.st_mode)) {
    std::erase_if(p.pending, [&](const PendingRename& r) { return std::filesystem::path(r.target).parent_path() == path; });
  }
}

void World::OnRename(const std::string& from, const std::string& to, std::optional<std::string> before) {
  Task* t = tl_task;
  Proc& p = *t->proc;
  PendingRename r;
  r.target = to;
  r.data_synced = p.synced.erase(from) > 0;
  r.before = std::move(before);
  if (auto content = ReadFile(to); content.ok()) r.content = *content;
  p.pending.push_back(std::move(r));
  // Parked here, the driver may cut the power between the rename and the directory's sync. Not
  // through Yield: rename(2) is declared noexcept, so a crash cannot unwind from here; the calls
  // of a killed process fail instead (the wrappers below) until its next seam call throws.
  t->in_write = true;
  t->wait = {Wait::kNow, now_, {}};
  back_.release();
  t->go.acquire();
  t->after_change = t->in_write = false;
}

// --- invariants ---


// A change is retried on the facts of the decision behind it until it goes through, and those facts
// are the last round of asks before it (for the operator, what `member remove` probed once it
// began): a member whose etcd answered since then counts as up, so only a request no fact could
// have justified fails.
TimePoint World::FactsSince(int from) const {
  if (from < 0) return operator_began_;
  const auto& asked = nodes[from]->asked_at;
  return *std::max_element(asked.begin(), asked.end());
}

size_t World::VotersUp(const SimCluster& c, MemberId except, TimePoint since) const {
  int inc = static_cast<int>(&c - clusters_.data());
  size_t up = 0;
  for (const auto& m : c.members) {
    if (m.is_learner || m.id == except) continue;
    up += std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) {
      return k->answered_as == m.id && k->answered_inc == inc && k->answered_at >= since;
    });
  }
  return up;
}

std::string World::Asker(int from) const { return from < 0 ? "the operator" : nodes[from]->name; }

void World::CheckAddRequest(int from, const SimCluster& c, const std::vector<std::string>& peer_urls, bool is_learner) {
  if (!is_learner) Fail(Check::kVoterAdded, Asker(from) + " asks MemberAdd of a voter, not a learner (rule 2: new members join as learners)");
  // A retry of an add that went through meets its own member: nothing grows.
  if (std::any_of(c.members.begin(), c.members.end(),
                  [&](const ClusterMember& m) { return SharesUrl(m.peer_urls, peer_urls); })) {
    return;
  }
  if (c.members.size() + 1 > group_size_) {
    Fail(Check::kBeyondSize, fmt::format("{} asks MemberAdd of {} to cluster {}, which has {} members already, --cluster-size {} (rule 2: "
                     "a cluster at its size is never grown)",
                     Asker(from), fmt::join(peer_urls, ","), IdToHex(c.id), c.members.size(), group_size_));
  }
}

void World::CheckRemoveRequest(int from, const SimCluster& c, MemberId id) {
  auto it = std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == id; });
  if (it == c.members.end()) return;
  // quorate's rules remove the member at the asker's own peer URLs (rules 3, 4) or one whose instance
  // departed (rule 9); one running at a live instance's peer URL, reachable as the decision was made
  // and still, is neither.
  if (from >= 0 && !SharesUrl(it->peer_urls, {nodes[from]->peer_url})) {
    for (auto& k : nodes) {
      if (k->index == from || !SharesUrl(it->peer_urls, {k->peer_url})) continue;
      if (Answers(k->index) && k->etcd.id == id && k->etcd.ready_at <= nodes[from]->decided_at &&
          Reach(from, k->index)) {
        Fail(Check::kRemovedLive, fmt::format("{} asks MemberRemove of member {}, whose etcd runs at {} and answered all along (rule 9 "
                         "takes only a departed instance's seat, whose peer URLs are silent)",
                         Asker(from), IdToHex(id), k->peer_url));
      }
    }
  }
  if (it->is_learner) return;
  size_t voters = 0;
  for (const auto& m : c.members) voters += !m.is_learner && m.id != id;
  size_t up = VotersUp(c, id, FactsSince(from));
  if (up < voters / 2 + 1) {
    Fail(Check::kRemoveQuorum, fmt::format("{} asks MemberRemove of voter {} while {} of the {} voters left have answered since its facts "
                     "were gathered, fewer than a quorum (§4: changes never lose quorum)",
                     Asker(from), IdToHex(id), up, voters));
  }
}

void World::CheckPromoteRequest(int from, const SimCluster& c, MemberId id) {
  auto it = std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == id; });
  if (it == c.members.end() || !it->is_learner) return;
  int inc = static_cast<int>(&c - clusters_.data());
  // A learner whose etcd never reached the quorum's side has no log to have caught up with; upkeep
  // asks only once its own etcd reports a leader (the window covers a crash since).
  bool reached = std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& k) {
    return k->answered_as == id && k->answered_inc == inc && k->in_quorum_at >= now_ - seconds(5) &&
           k->in_quorum_at != TimePoint{};
  });
  if (!reached) {
    Fail(Check::kPromoteEarly, fmt::format("{} asks MemberPromote of learner {}, whose etcd has not been on the quorum's side, so it cannot "
                     "have caught up (rule 2: promote when caught up)",
                     Asker(from), IdToHex(id)));
  }
  size_t voters = 1;
  for (const auto& m : c.members) voters += !m.is_learner;
  size_t up = VotersUp(c, 0, now_ - seconds(5)) + (reached ? 1 : 0);
  if (up < voters / 2 + 1) {
    Fail(Check::kPromoteQuorum, fmt::format("{} asks MemberPromote of {} while {} of the {} voters after it answer, fewer than a quorum",
                     Asker(from), IdToHex(id), up, voters));
  }
}

// §12's rule for which member's database is to be defragmented now: under NOSPACE, each member once
// after the alarm, when it has free pages to take back or is over the disarm limit (M3 b); otherwise
// past the thresholds (M5).
bool World::NeedsDefrag(const Node& n, const SimCluster& c) const {
  const int64_t free = std::max<int64_t>(0, n.db_size - InUse(c));
  if (!c.nospace.empty()) {
    return n.defragmented_at < c.nospace_since &&
           (free >= kNospaceFreeBytes || n.db_size > kQuotaBytes / 100 * kDisarmBelowPercent);
  }
  return n.db_size >= n.config.defrag_min_bytes && free * 100 >= int64_t{n.config.defrag_min_percent} * n.db_size;
}

// A defragmentation quorate asks for (§12's gate): no other member defragments, the leader only
// once no follower that needs it waits, and the voters but the one defragmented that answered since
// the round's facts are a quorum.
void World::CheckDefragRequest(int from, int k) {
  const Node& target = *nodes[k];
  const SimCluster& c = *ClusterOf(k);
  for (auto& j : nodes) {
    if (j->index != k && Defragmenting(j->index)) {
      Fail(Check::kDefragTwo, fmt::format("{} asks to defragment {} while {} still defragments (§12: one member at a time)",
                                          Asker(from), target.name, j->name));
    }
  }
  if (LeaderSeenBy(k) == k) {
    for (auto& j : nodes) {
      if (j->index == k || j->etcd.incarnation != target.etcd.incarnation || !Serves(j->index) ||
          !Reach(from, j->index) || !NeedsDefrag(*j, c)) {
        continue;
      }
      bool member = std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == j->etcd.id; });
      if (member) {
        Fail(Check::kDefragLeaderFirst, fmt::format("{} asks to defragment the leader {} while follower {} needs it too and answers "
                                                    "(§12: followers first, the leader last)",
                                                    Asker(from), target.name, j->name));
      }
    }
  }
  size_t voters = 0;
  for (const auto& m : c.members) voters += !m.is_learner;
  size_t up = VotersUp(c, target.etcd.id, nodes[from]->maintenance_look_at);
  // Under NOSPACE one or two voters go without the margin (§12: they can never spare one, and the
  // cluster takes no write until the space is back).
  const bool no_margin_to_keep = !c.nospace.empty() && voters <= 2;
  if (up < voters / 2 + 1 && !no_margin_to_keep) {
    Fail(Check::kDefragNoMargin, fmt::format("{} asks to defragment {} while {} of the {} voters but it answered since its round "
                                             "began, no quorum (§12: the others must be a quorum without it)",
                                             Asker(from), target.name, up, voters));
  }
}

void World::CheckMaintainerLeads(int from, const std::string& what) {
  if (from < 0 || nodes[from]->maintainer_told_leader) return;
  Fail(Check::kMaintenanceNotLeader, fmt::format("{} asks {} while its own etcd's status last said another member leads "
                                                 "(§12 M1: only the leader's quorate maintains, so two never race)",
                                                 Asker(from), what));
}

void World::CheckDisarmRequest(const SimCluster& c) {
  const int inc = static_cast<int>(&c - clusters_.data());
  for (auto& n : nodes) {
    if (!HoldsData(*n) || n->data_incarnation != inc) continue;
    bool member = std::any_of(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == n->data_member; });
    if (member && n->db_size + kWriteBytes > kQuotaBytes) {
      Fail(Check::kDisarmEarly, fmt::format("NOSPACE disarmed while the database of {} is {} bytes, no room for a write under the {} "
                                            "byte quota (§12 M3: never disarmed while its cause is there)",
                                            n->name, n->db_size, kQuotaBytes));
    }
  }
}

// A removal by the leader's maintenance (rules M6, M7): the voters after it are a quorum of those
// before, and a voter goes only while the voters left that answered since the round's facts are a
// quorum of themselves (M7's own rule, §4's "changes never lose quorum").
void World::CheckMaintenanceRemoval(int from, const SimCluster& c, MemberId id) {
  auto it = std::find_if(c.members.begin(), c.members.end(), [&](const ClusterMember& m) { return m.id == id; });
  if (it == c.members.end()) return;
  size_t before = 0;
  for (const auto& m : c.members) before += !m.is_learner;
  const size_t after = before - (it->is_learner ? 0 : 1);
  if (after < before / 2 + 1) {
    Fail(Check::kMaintenanceRemoval, fmt::format("{}'s maintenance removes {}, leaving {} voters of the {} before, fewer than a quorum of them",
                                                 Asker(from), IdToHex(id), after, before));
  }
  if (it->is_learner) return;
  size_t up = VotersUp(c, id, nodes[from]->maintenance_look_at);
  if (up < after / 2 + 1) {
    Fail(Check::kMaintenanceRemoval, fmt::format("{}'s maintenance removes voter {} while {} of the {} voters left answered since its "
                                                 "round began, fewer than a quorum",
                                                 Asker(from), IdToHex(id), up, after));
  }
}

// Node k's etcd begins a defragmentation, which it finishes whatever becomes of the caller: bbolt
// copies the live pages into a new file, at a pace slowed from a real disk's so that faults strike
// in the middle of it. An etcd that exits first keeps its old file.
Duration World::StartDefrag(int k) {
  Node& n = *nodes[k];
  const Duration took = milliseconds(500 + n.db_size * 500 / kMiB);
  n.etcd.defrag_until = now_ + took;
  const SimCluster& c = *ClusterOf(k);
  Mark(!c.nospace.empty() ? "a member defragmented under NOSPACE" : "a member defragmented past the thresholds");
  if (LeaderSeenBy(k) == k) Mark("the leader defragmented");
  Event(fmt::format("{}: etcd defragments its {} byte database, serving nothing for {:.1f}s", n.name, n.db_size, Seconds(took)));
  // Faults strike in the middle of it: the leader's etcd exits (its quorate lives on, leadership
  // moves while the defragmentation goes on), or any fault of the schedule.
  if (FaultsOn() && rng_.Chance(0.3)) {
    At(now_ + rng_.Between(milliseconds(0), std::chrono::duration_cast<milliseconds>(took)), [this, k] {
      if (!FaultsOn()) return;
      int leader = nodes[k]->etcd.running ? LeaderSeenBy(k) : -1;
      if (leader >= 0 && rng_.Chance(0.5)) {
        ExitEtcd(leader, ExitStatus::Signaled(SIGKILL), "fault: the leader's etcd crashes during a defragmentation");
      } else {
        Fault();
      }
    });
  }
  At(n.etcd.defrag_until, [this, k, child = n.etcd.child] {
    Node& m = *nodes[k];
    if (m.etcd.child != child || !m.etcd.running) return;
    m.db_size = InUse(clusters_[m.etcd.incarnation]);
    m.defragmented_at = now_;
    Event(fmt::format("{}: defragmented to {} bytes", m.name, m.db_size));
  });
  return took;
}

void World::CheckDataKept(int i) {
  Node& n = *nodes[i];
  bool moved = std::any_of(n.wals.begin(), n.wals.end(), [](const std::pair<ino_t, std::string>& w) {
    struct stat st;
    return ::stat(w.second.c_str(), &st) != 0 || st.st_ino != w.first;
  });
  if (!moved) return;
  std::vector<std::pair<ino_t, std::string>> present;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(n.root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".wal") continue;
    struct stat st;
    if (::stat(it->path().c_str(), &st) == 0) present.emplace_back(st.st_ino, it->path().string());
  }
  for (auto& wal : n.wals) {
    auto found = std::find_if(present.begin(), present.end(),
                              [&](const std::pair<ino_t, std::string>& p) { return p.first == wal.first; });
    if (found == present.end()) {
      Fail(Check::kDataDeleted, fmt::format("a WAL file etcd wrote on {} is gone (§4: data is moved aside, never deleted)", n.name));
      n.wals.clear();
      return;
    }
    wal.second = found->second;
  }
}

// Every node but one the operator removed (while its quorate ran etcd) runs etcd as a started voter
// of the one live cluster, which has exactly those members.
bool World::Converged(std::string* why) {
  int inc = -1;
  size_t expected = 0;
  for (auto& n : nodes) {
    if (n->gone) continue;
    if (!n->proc) {
      *why = n->name + " has no quorate process";
      return false;
    }
    // Rule 1b holds a node on a member the operator removed, once its etcd ran under this process
    // (and a fresh process that only learns of the removal from its own etcd ran it too).
    bool out = n->removed_under != 0 && n->removed_under == n->data_member && HoldsData(*n) &&
               !n->etcd.running && n->last_wait == WaitKind::kRemoved;
    // A node for which the cluster has no seat (an extra one, or one whose seat another took) waits,
    // saying it is extra; the size check below holds the cluster to the rest.
    out |= !n->etcd.running && n->last_wait == WaitKind::kExtra;
    if (out) continue;
    ++expected;
    if (!Answers(n->index)) {
      *why = n->name + "'s etcd does not run";
      return false;
    }
    if (inc < 0) inc = n->etcd.incarnation;
    if (n->etcd.incarnation != inc) {
      *why = "the nodes run etcds of different clusters";
      return false;
    }
  }
  if (inc < 0) {
    *why = "no etcd runs";
    return false;
  }
  const SimCluster& c = clusters_[inc];
  if (c.members.size() != expected || c.members.size() > group_size_) {
    *why = fmt::format("the cluster has {} members, {} expected", c.members.size(), expected);
    return false;
  }
  for (const auto& m : c.members) {
    if (m.is_learner || !m.started()) {
      *why = fmt::format("member {} is {}", IdToHex(m.id), m.is_learner ? "a learner" : "not started");
      return false;
    }
    bool runs = std::any_of(nodes.begin(), nodes.end(), [&](const std::unique_ptr<Node>& n) {
      return n->etcd.running && n->etcd.incarnation == inc && n->etcd.id == m.id;
    });
    if (!runs) {
      *why = fmt::format("member {} runs nowhere", IdToHex(m.id));
      return false;
    }
  }
  return true;
}

bool World::MaintenanceSettled(std::string* why) {
  if (!maintenance_) return true;
  if (now_ < start_ + kMaintainedAtLeast) {
    *why = "the workload runs on";
    return false;
  }
  if (scale_in_ && replicas_ == nodes.size()) {
    *why = "the StatefulSet is not scaled in yet";
    return false;
  }
  if (!clusters_.empty() && !clusters_.back().nospace.empty()) {
    *why = fmt::format("a NOSPACE alarm raised {:.0f}s ago still stands: writes are refused",
                       Seconds(now_ - clusters_.back().nospace_since));
    return false;
  }
  return true;
}

// A majority of the last cluster's voters lost their data: no rule may replace them (rule 4).
bool World::MajorityLost() {
  if (clusters_.empty()) return false;
  const SimCluster& c = clusters_.back();
  size_t voters = 0, with_data = 0;
  for (const auto& m : c.members) {
    if (m.is_learner) continue;
    ++voters;
    // A pod a scale-in deleted keeps its volume, but never runs on it again.
    for (auto& n : nodes) {
      if (HoldsData(*n) && !n->gone && n->data_incarnation == static_cast<int>(clusters_.size()) - 1 &&
          n->data_member == m.id) {
        ++with_data;
      }
    }
  }
  return with_data < voters / 2 + 1;
}

std::string World::Describe() {
  std::string out = fmt::format("t={:.3f}s etcd {}{}", Seconds(now_ - start_), etcd35_ ? "3.5" : "3.4",
                                strict_ ? "" : " (--strict-reconfig-check=false)");
  for (size_t inc = 0; inc < clusters_.size(); ++inc) {
    const SimCluster& c = clusters_[inc];
    out += fmt::format("\n  cluster {} (incarnation {}, term {}, {} entries committed):", IdToHex(c.id), inc, c.term,
                       c.committed.size());
    for (const auto& m : c.members) {
      out += fmt::format(" {}[{}{}{}]", IdToHex(m.id), m.name.empty() ? "?" : m.name, m.is_learner ? ",learner" : "",
                         m.started() ? "" : ",unstarted");
    }
  }
  // A probe's answer as the status server would give it.
  auto answer = [](const Status& s) { return s.ok() ? std::string("200") : "503 " + s.message(); };
  for (auto& n : nodes) {
    out += fmt::format("\n  {}: quorate {}, etcd {}{}, data {} (log {} entries, last term {}, bbolt {}); last: {}", n->name,
                       n->proc ? "up" : "down", n->etcd.running ? "running as " + IdToHex(n->etcd.id) : "stopped",
                       n->etcd.running && !InQuorum(n->index) ? " (no quorum)" : "",
                       HoldsData(*n) ? IdToHex(n->data_member) : "none", n->log.size(),
                       n->log.empty() ? 0 : n->log.back().term, n->kv_committed, n->last_message);
    // Read with every task parked at the driver, none inside the code the probes ask.
    if (n->proc && n->proc->probes) {
      out += fmt::format("\n      /healthz {}; /readyz {}", answer(n->proc->probes->live()),
                         answer(n->proc->probes->ready()));
    }
  }
  return out;
}

void World::Event(const std::string& text) {
  std::string line = fmt::format("{:.3f} {}", Seconds(now_ - start_), text);
  for (char c : line) {
    result_.trace_hash ^= static_cast<uint8_t>(c);
    result_.trace_hash *= 0x100000001b3ULL;
  }
  result_.trace_hash ^= '\n';
  result_.trace_hash *= 0x100000001b3ULL;
  if (options_.verbose) std::fprintf(stderr, "%s\n", line.c_str());
}

void World::Decision(int node, const std::string& text) {
  std::string line = nodes[node]->name + ":" + text + ";";
  for (char c : line) {
    result_.decision_hash ^= static_cast<uint8_t>(c);
    result_.decision_hash *= 0x100000001b3ULL;
  }
  Event(nodes[node]->name + ": decision " + text);
}

void World::Fail(Check check, const std::string& why) {
  if (!failure_.empty()) return;
  failure_ = why;
  result_.check = check;
  Event("INVARIANT: " + why);
}

void World::OnLog(int node, const std::string& text) {
  if (node >= 0 && text.rfind("waiting: ", 0) == 0) {
    nodes[node]->last_message = text;
    Decision(node, "wait");
  }
  if (options_.verbose) {
    std::fprintf(stderr, "%.3f   [%s] %s\n", Seconds(now_ - start_), node >= 0 ? nodes[node]->name.c_str() : "-",
                 text.c_str());
  }
}

RunResult World::Run() {
  g_world = this;
  result_.trace_hash = result_.decision_hash = 0xcbf29ce484222325ULL;
  ScheduleFaults();
  result_.etcd35 = etcd35_;
  result_.init_mode = init_mode_;
  result_.cloud = cloud_;
  result_.strict = strict_;
  result_.extra = extra_;
  if (!strict_) Mark("etcd's guards off");
  if (extra_) Mark("an extra node");
  result_.maintenance = maintenance_;
  result_.learner_churn = learner_churn_;
  result_.backups = backups_;
  result_.laggards = laggards_;
  result_.restore = restore_;
  result_.recover = recover_;
  if (backups_) Mark("scheduled backups");
  std::string why;
  while (failure_.empty()) {
    // The world stood still since the last step, so the puts due meanwhile meet it as it was.
    Writer();
    while (!events_.empty() && events_.begin()->first <= now_) {
      auto fn = std::move(events_.begin()->second);
      events_.erase(events_.begin());
      fn();
    }
    ModelTick();
    if (now_ >= fault_end_ && !RestorePending() && Converged(&why) && MaintenanceSettled(&why)) break;
    if (now_ >= end_) break;
    std::vector<Task*> ready;
    TimePoint next = events_.empty() ? end_ : std::min(end_, events_.begin()->first);
    for (auto& t : tasks_) {
      if (t->done) continue;
      if (Ready(*t)) {
        ready.push_back(t.get());
      } else if (t->wait.kind != Wait::kNow) {
        next = std::min(next, t->wait.until);
      }
    }
    if (ready.empty()) {
      now_ = std::max(now_, next);
      continue;
    }
    Task* t = ready[rng_.Below(ready.size())];
    if (t->proc != nullptr && KillsOn() && rng_.Chance(t->after_change || t->in_write ? 0.05 : 0.002)) {
      // A volume is lost only while the faults strike; the restore meets kills alone.
      const bool lose_volume = FaultsOn() && rng_.Chance(0.1);
      if (!t->restore_step.empty()) Mark("a restore killed after: " + t->restore_step);
      CrashProc(t->node, lose_volume,
                !t->restore_step.empty() ? "after the restore's step '" + t->restore_step + "'"
                : t->after_change        ? "after a change"
                : t->in_write            ? "in the middle of a file write"
                                         : "between two calls");
      continue;
    }
    Resume(*t);
    ++result_.steps;
    if (t->node >= 0) CheckDataKept(t->node);
    if (t->done) {
      Proc* proc = t->proc;
      int node = t->node;
      if (proc != nullptr && t == proc->tasks.front()) {
        Event(fmt::format("{}: quorate exits", nodes[node]->name));
        EndProc(node);
        nodes[node]->restart_pending = true;
        At(now_ + seconds(5), [this, node] { StartProc(node); });
      } else if (proc == nullptr) {
        t->thread.join();
        std::erase_if(tasks_, [&](const std::unique_ptr<Task>& owned) { return owned.get() == t; });
      }
    }
  }
  result_.simulated_seconds = Seconds(now_ - start_);
  if (failure_.empty() && !Converged(&why)) {
    if (MajorityLost()) {
      // Said by the node that would replace its member (rule 4), or by one that sees no cluster and
      // names the peer whose data stops a new one (rule 5).
      bool said = std::any_of(nodes.begin(), nodes.end(), [](const std::unique_ptr<Node>& n) {
        return n->last_wait == WaitKind::kMajorityLost || n->last_reason == Reason::kNoQuorumCommits;
      });
      if (said) {
        result_.majority_lost = true;
        Mark("ended waiting on a lost majority");
      } else {
        Fail(Check::kMajorityLostUnsaid, "a majority of the cluster lost its data, and no node says so: " + why);
      }
    } else {
      Fail(Check::kNoConvergence, fmt::format("no convergence {:.0f}s after the faults stopped: {}", Seconds(now_ - fault_end_), why));
    }
  } else if (failure_.empty() && !MaintenanceSettled(&why)) {
    Fail(Check::kNospaceStuck, fmt::format("{:.0f}s after the faults stopped: {}", Seconds(now_ - fault_end_), why));
  } else if (failure_.empty()) {
    // Converged: every member holds every put acknowledged in its log.
    for (auto& n : nodes) {
      if (n->etcd.running && n->etcd.incarnation >= 0) CheckWritesKept(clusters_[n->etcd.incarnation], n->index, "ends the run a member");
    }
  }
  for (const auto& c : clusters_) {
    result_.acknowledged += static_cast<uint64_t>(
        std::count_if(c.committed.begin(), c.committed.end(), [](const LogEntry& e) { return e.write != 0; }));
  }
  if (!failure_.empty()) {
    result_.ok = false;
    result_.failure = failure_ + "\n" + Describe();
  }
  return result_;
}

const char* CheckName(Check check) {
  switch (check) {
    case Check::kNone:
      return "none";
    case Check::kException:
      return "exception";
    case Check::kBadInput:
      return "bad-input";
    case Check::kStartedEmpty:
      return "started-empty";
    case Check::kUpkeepBucket:
      return "upkeep-bucket";
    case Check::kModel:
      return "model";
    case Check::kRestartedRemoved:
      return "restarted-removed";
    case Check::kReAdded:
      return "re-added";
    case Check::kNewOverData:
      return "new-over-data";
    case Check::kTwoClusterIds:
      return "two-cluster-ids";
    case Check::kTorn:
      return "torn-file";
    case Check::kVoterAdded:
      return "voter-added";
    case Check::kBeyondSize:
      return "beyond-size";
    case Check::kRemovalMisread:
      return "removal-misread";
    case Check::kRemovedLive:
      return "removed-live";
    case Check::kRemoveQuorum:
      return "remove-quorum";
    case Check::kPromoteEarly:
      return "promote-early";
    case Check::kPromoteQuorum:
      return "promote-quorum";
    case Check::kDataDeleted:
      return "data-deleted";
    case Check::kMajorityLostUnsaid:
      return "majority-lost-unsaid";
    case Check::kNoConvergence:
      return "no-convergence";
    case Check::kDefragTwo:
      return "defrag-two";
    case Check::kDefragLeaderFirst:
      return "defrag-leader-first";
    case Check::kDefragNoMargin:
      return "defrag-no-margin";
    case Check::kDisarmEarly:
      return "disarm-early";
    case Check::kMaintenanceRemoval:
      return "maintenance-removal";
    case Check::kMaintenanceNotLeader:
      return "maintenance-not-leader";
    case Check::kNospaceStuck:
      return "nospace-stuck";
    case Check::kWriteLost:
      return "write-lost";
    case Check::kBackupData:
      return "backup-data";
    case Check::kRestoreOldCluster:
      return "restore-old-cluster";
    case Check::kRestoreData:
      return "restore-data";
    case Check::kRecoverLost:
      return "recover-write-lost";
  }
  return "unknown";
}

RunResult RunSeed(const RunOptions& options) {
  World world(options);
  return world.Run();
}

}  // namespace quorate::sim

// fsync(2) and rename(2) as the simulated processes make them (linked with --wrap, tests/sim/meson.build):
// the disk model of World::PowerCut learns from them what is durable.
extern "C" {
int __real_fsync(int fd);
int __real_rename(const char* from, const char* to);

int __wrap_fsync(int fd) {
  using quorate::sim::g_world;
  using quorate::sim::tl_task;
  if (tl_task != nullptr && tl_task->killed) {
    errno = EIO;
    return -1;
  }
  int rc = __real_fsync(fd);
  if (rc == 0 && g_world != nullptr && tl_task != nullptr && tl_task->proc != nullptr) g_world->OnFsync(fd);
  return rc;
}

int __wrap_rename(const char* from, const char* to) {
  using quorate::sim::g_world;
  using quorate::sim::tl_task;
  if (tl_task != nullptr && tl_task->killed) {
    errno = EIO;
    return -1;
  }
  struct stat st;
  // Files only: a directory moved aside is etcd's data, whose own durability etcd keeps.
  bool watched = g_world != nullptr && tl_task != nullptr && tl_task->proc != nullptr && ::stat(from, &st) == 0 &&
                 S_ISREG(st.st_mode);
  std::optional<std::string> before;
  if (watched) {
    if (auto content = quorate::ReadFile(to); content.ok()) before = std::move(*content);
  }
  int rc = __real_rename(from, to);
  if (rc == 0 && watched) g_world->OnRename(from, to, std::move(before));
  return rc;
}
}
