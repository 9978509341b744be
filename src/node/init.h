// The init job (DESIGN §1, §4): discover the members, learn what every peer knows, let the planner
// decide, carry the decision out (membership changes included), and write the member bucket and
// etcd's config. Shared by `quorate init` and `quorate run`.
#pragma once

#include <memory>
#include <string>

// The commands that run the job also discover on their own (`discover`, `cluster-init`).
#include "discovery/discovery.h"
#include "quorate/config.h"
#include "quorate/member.h"
#include "core/planner.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate {

class AgentServer;

struct InitOutcome {
  Decision decision;
  Member self;
  MemberId member_id = 0;
  ClusterId cluster_id = 0;
  std::string initial_cluster;
  std::string bucket_path;
  std::string etcd_config_path;
  std::string etcd_env_path;
  std::vector<std::string> etcd_flags;
};

// True when <data-dir>/member/wal holds a WAL file.
bool HasEtcdData(const std::string& data_dir);

class InitJob {
 public:
  // `init` serves the agent only while it waits for its peers; `run` serves it for as long as the
  // job lives, so peers can tell a running member from a missing one.
  enum class AgentMode { kWhileWaiting, kAlways };
  explicit InitJob(Config config, AgentMode agent_mode = AgentMode::kWhileWaiting);
  ~InitJob();
  // Idempotent: `run` calls it again before every etcd restart. Unavailable, at once, when etcd ran
  // under this job and the cluster has since removed this member (rule 1b): the caller keeps etcd
  // stopped and may ask again later.
  Result<InitOutcome> Run();
  // Whether etcd runs now; once it has run, a removal of this member is no longer rejoined from.
  void SetRunning(bool running);

 private:
  struct State;
  Config config_;
  AgentMode agent_mode_;
  std::unique_ptr<State> state_;
};

std::string FormatInitOutcome(const InitOutcome& outcome, OutputFormat format);

}  // namespace quorate
