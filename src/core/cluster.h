// The facts vocabulary: what quorate learns about a cluster and its peers before any quorum exists
// (an agent's report, etcd's member list, a data dir's WAL identity). The planner decides on these;
// the agent, the peer probe, the etcd client and the WAL reader produce them.
#pragma once

#include <string>
#include <vector>

#include "quorate/member.h"

namespace quorate {

enum class DataState { kUnknown, kEmpty, kHasData, kRunning };

// What a peer's quorate agent said, or why it could not be asked.
struct AgentReport {
  bool reachable = false;
  std::string error;  // when unreachable: what the call said
  DataState data_state = DataState::kUnknown;
  std::string token;
  ClusterId expected_cluster_id = 0;  // computed from the member set that peer discovered
  // Its data's raft log went past the bootstrap: it heard from a leader (docs/DESIGN.md §4 rule 3).
  bool log_past_bootstrap = false;
};

// One member as etcd's peer endpoint GET /members lists it.
struct ClusterMember {
  MemberId id = 0;
  std::string name;  // empty until the member has started
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;  // empty until the member has started (published)
  bool is_learner = false;
  bool started() const { return !client_urls.empty(); }
};

// A running or bootstrapping cluster as one peer's etcd reports it, before any quorum exists.
struct ClusterView {
  ClusterId cluster_id = 0;
  std::vector<ClusterMember> members;
};

// Whose data an etcd data dir holds, from its write-ahead log (etcd/etcd_wal.h reads it).
struct WalIdentity {
  MemberId member_id = 0;
  ClusterId cluster_id = 0;
};

}  // namespace quorate
