// The init job (docs/DESIGN.md §1, §4): discover the members, learn what every peer knows, let the planner
// decide, carry the decision out (membership changes included), and write the member bucket and
// etcd's config. Shared by `quorate init` and `quorate run`. Gather (discovery, local state, peers)
// → Plan (core/planner.h, pure) → apply (node/apply.h); every side effect goes through a seam in
// InitOptions, so the whole job runs in tests against fakes and in fake time.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

// The commands that run the job also discover on their own (`discover`, `cluster-init`).
#include "agent/agent.h"
#include "discovery/discovery.h"
#include "etcd/etcd_client.h"
#include "node/apply.h"
#include "node/backup_job.h"
#include "node/peers.h"
#include "quorate/clock.h"
#include "core/config.h"
#include "quorate/member.h"
#include "core/planner.h"
#include "quorate/status.h"

namespace quorate {

struct InitOutcome {
  Decision decision;
  Member self;
  MemberId member_id = 0;
  ClusterId cluster_id = 0;
  std::string initial_cluster;
  std::string bucket_path;
  std::string etcd_config_path;
  std::string etcd_env_path;
  std::vector<std::string> etcd_flags;  // spelt for etcd_version when it is known
  // Rule 6's facts as this run found them: the binary's version (nullopt when --etcd cannot be run
  // here, as in an init container without etcd) and the cluster's.
  std::optional<EtcdVersion> etcd_version;
  std::optional<EtcdVersion> cluster_version;
  // A restart on this volume's data with another etcd binary than the last start (a rolling
  // upgrade, or a downgrade within what rule 6 allows): "3.4.23 to 3.5.30", empty otherwise. The
  // health of the other voters before it is logged as the start is decided.
  std::string version_change;
};

// True when <data-dir>/member/wal holds a WAL file.
bool HasEtcdData(const std::string& data_dir);

struct InitOptions {
  // `init` serves the agent only while it waits for its peers; `run` serves it for as long as the
  // job lives, so peers can tell a running member from a missing one.
  enum class AgentMode { kWhileWaiting, kAlways };
  AgentMode agent_mode = AgentMode::kWhileWaiting;

  // The seams; null means the real ones.
  Clock* clock = nullptr;
  Peers* peers = nullptr;
  EtcdClientFactory etcd_clients;
  IsOwnAddress is_own_address;
  // What `etcd --version` of --etcd says (node/etcd_binary.h): asked on every run, so an etcd
  // binary replaced under `quorate run` is seen at the next restart.
  std::function<Result<EtcdVersion>(const std::string& etcd_path)> etcd_version;
  // Where the backup before a membership change (with --backup-to) streams etcd's snapshot from.
  SnapshotSourceFactory snapshot_sources;
  // Serves the agent on --agent-listen with `answer` (called on every Describe, from any thread)
  // until the handle it returns is dropped; null is the real gRPC AgentServer.
  std::function<std::shared_ptr<void>(std::function<AgentState()> answer)> serve_agent;
  // Every wait of the job (peers, discovery, the bucket, membership retries) ends at once on a stop;
  // Run() then returns Cancelled, saying whether a membership change was left half done.
  StopSource stop;
  // `init` hands etcd.conf.yml and etcd.env to etcd: failing to write them fails the job. `run`
  // passes etcd flags and writes them only for the operator: a failed write is a warning, so a full
  // disk cannot keep etcd down.
  bool etcd_files_required = true;
  // Sees every decision the planner makes, waits included, as it is made: the simulator checks its
  // liveness on their rules (Decision::wait), not on their words. Null in quorate itself.
  std::function<void(const Decision&)> on_decision;
};

class InitJob {
 public:
  using AgentMode = InitOptions::AgentMode;
  explicit InitJob(Config config, InitOptions options = {});
  ~InitJob();
  // Idempotent: `run` calls it again before every etcd restart. Unavailable, at once, when etcd ran
  // under this job and the cluster has since removed this member (rule 1b): the caller keeps etcd
  // stopped and may ask again later. Cancelled when stopped while waiting.
  Result<InitOutcome> Run();
  // Whether etcd runs now; once it has run, a removal of this member is no longer rejoined from,
  // unless rule M6 made it (rule 1b).
  void SetRunning(bool running);

 private:
  struct State;
  struct Local;
  Result<Local> GatherLocal(Clock::TimePoint deadline);
  Status ServeAgent(const Local& local, const PlanInput& input);
  // `twins`: this member's peer URLs' http and https twins during the move to TLS (§14), under which
  // the views may list it; none otherwise.
  Result<Decision> Decide(PlanInput& input, const MemberSet& expected, const std::vector<std::string>& twins,
                          Clock::TimePoint deadline);
  std::vector<MemberId> StillOutsideGroup(std::vector<MemberId> silent, const PlanInput& input);
  // Run's body, started again when the cluster's peer URLs moved past this node's flags (§14).
  Result<InitOutcome> RunUntil(Clock::TimePoint deadline, std::shared_future<Result<EtcdVersion>> binary);
  Status FollowMoveToHttps(const PlanInput& input, const MemberSet& expected, const std::vector<std::string>& twins);
  Result<InitOutcome> Carry(const Local& local, const PlanInput& input, Decision decision,
                            Clock::TimePoint deadline);

  Config config_;
  InitOptions options_;
  Clock& clock_;
  std::unique_ptr<Peers> own_peers_;
  Peers& peers_;
  std::unique_ptr<State> state_;
  // The provider whose answer listed the whole scaling group (rule 9), kept to list it again.
  std::unique_ptr<DiscoveryProvider> group_;
};

}  // namespace quorate
