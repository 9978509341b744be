// What the init job learns from the other expected members before any quorum exists: each one's
// agent report and what its etcd peer URL answers. A seam, so the job is tested against fake peers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/planner.h"
#include "core/config.h"
#include "quorate/member.h"
#include "quorate/status.h"

namespace quorate {

class Peers {
 public:
  virtual ~Peers() = default;
  // Never fails: an agent that cannot be asked is an unreachable report, a silent peer URL leaves
  // `cluster` empty, and a peer URL answering as etcd never does sets `foreign_answer`; `version`
  // is what the peer URL that answered says on GET /version. Called from
  // several threads at once, one peer each.
  virtual PeerFacts Ask(const Member& peer) = 0;
  // GET /members at one peer URL, as ProbeMembers: Unavailable only when nothing answers there.
  virtual Result<ClusterView> Probe(const std::string& peer_url, std::chrono::milliseconds timeout) = 0;
};

// The agents at the hosts of the peer URLs and --agent-port, and the etcd peer URLs themselves, over
// peer TLS; --name is who asks, for the agents' logs.
std::unique_ptr<Peers> MakePeers(const Config& config);

// Asks every expected member but `self_name`, all at once; in the expected set's order.
std::vector<PeerFacts> GatherFacts(Peers& peers, const MemberSet& expected, const std::string& self_name);

}  // namespace quorate
