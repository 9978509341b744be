// FakePeers: the other expected members as the init job sees them, without a network. Agents answer
// what the test set (unreachable by default); a peer URL marked running answers GET /members with
// the FakeEtcdClient's current membership, so a second run sees what the first one changed.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "node/peers.h"
#include "testing/fake_etcd.h"

namespace quorate {

class FakePeers : public Peers {
 public:
  // `cluster` (may be null: no etcd runs anywhere) must outlive this.
  explicit FakePeers(const FakeEtcdClient* cluster = nullptr) : cluster_(cluster) {}

  void SetAgent(const std::string& name, const AgentReport& report);
  // Whether an etcd of `cluster` answers at this peer URL.
  void SetRunning(const std::string& peer_url, bool running);
  // Something that is not etcd answers at this peer URL, with this text.
  void SetForeign(const std::string& peer_url, const std::string& answer);
  // This peer URL answers with `view` instead of the cluster's membership (as an etcd replaying its
  // WAL answers, with only the members replayed so far); nullopt: the cluster's again.
  void SetStaleView(const std::string& peer_url, std::optional<ClusterView> view);
  // What the etcd at this member's peer URL says on GET /version, once it answers GET /members.
  void SetVersion(const std::string& name, const VersionAnswer& version);
  int Asks() const;
  std::vector<std::string> Probed() const;

  PeerFacts Ask(const Member& peer) override;
  Result<ClusterView> Probe(const std::string& peer_url, std::chrono::milliseconds timeout) override;

 private:
  const FakeEtcdClient* cluster_;
  mutable std::mutex mu_;
  std::map<std::string, AgentReport> agents_;
  std::set<std::string> running_;
  std::map<std::string, std::string> foreign_;
  std::map<std::string, ClusterView> stale_;
  std::map<std::string, VersionAnswer> versions_;
  int asks_ = 0;
  std::vector<std::string> probed_;
};

}  // namespace quorate
