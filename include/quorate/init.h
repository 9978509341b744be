// The init job (DESIGN §1, §4): discover the members, learn what every peer knows, let the planner
// decide, carry the decision out (membership changes included), and write the member bucket and
// etcd's config. Shared by `quorate init` and `quorate run`.
#pragma once

#include <memory>
#include <string>

#include "quorate/config.h"
#include "quorate/member.h"
#include "quorate/planner.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate {

class AgentServer;

// The provider the flags name: --discovery, --initial-cluster or --discovery-srv (exactly one).
Result<std::unique_ptr<DiscoveryProvider>> ProviderFromConfig(const Config& config);

// Asks the provider until it returns the expected number of members or the deadline passes.
// InvalidArgument at once when an answer is malformed; DeadlineExceeded saying what is missing.
Result<std::vector<Member>> DiscoverExpected(DiscoveryProvider& provider, const Config& config,
                                             std::chrono::steady_clock::time_point deadline);

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
  explicit InitJob(Config config);
  ~InitJob();
  Result<InitOutcome> Run();
  // The agent keeps serving after Run() for as long as the job lives (`run` keeps it).
  void SetRunning(bool running);

 private:
  struct State;
  Config config_;
  std::unique_ptr<State> state_;
};

std::string FormatInitOutcome(const InitOutcome& outcome, OutputFormat format);

}  // namespace quorate
