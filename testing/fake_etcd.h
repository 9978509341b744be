// FakeEtcdClient: an etcd cluster's membership in memory, with etcd's rules, for the init job and
// the upkeep loop. Every client Factory() makes talks to this one membership, so a second run of a
// job (after a simulated kill) meets what the first one left. Thread-safe; records every call.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "etcd/etcd_client.h"
#include "quorate/clock.h"

namespace quorate {

class FakeEtcdClient : public EtcdClient {
 public:
  explicit FakeEtcdClient(ClusterId cluster_id = 0xc1c1c1);

  // A member that runs: started (named, client URLs published), a voter unless `is_learner`.
  void AddStarted(MemberId id, const std::string& name, const std::vector<std::string>& peer_urls,
                  const std::vector<std::string>& client_urls, bool is_learner = false);
  // A member listed but never started (no name, no client URLs), as MemberAdd leaves it.
  void AddUnstarted(MemberId id, const std::vector<std::string>& peer_urls, bool is_learner);
  // The member's etcd started and published itself.
  void Start(MemberId id, const std::string& name, const std::vector<std::string>& client_urls);
  // Whether a learner is in sync with the leader, which etcd requires before it promotes it.
  void SetCaughtUp(MemberId id, bool caught_up);

  // The next `n` MemberAdd calls fail as etcd does while a voter is not connected to the leader.
  void FailAddsUnhealthy(int n);
  // MemberAdd, and MemberRemove of a voter, fail as "unhealthy cluster" while `clock` is before
  // `until`: etcd's member that serves them connected to its last peer 5 s before `until`.
  void RefuseChangesUnhealthyUntil(Clock& clock, Clock::TimePoint until);
  // The next MemberRemove times out without removing anything; `meanwhile` (what other nodes do
  // while it waits) runs before it answers.
  void TimeOutNextRemove(std::function<void()> meanwhile);
  // Without quorum there is no leader: a linearizable read fails, a plain MemberList still answers.
  void SetQuorum(bool has_quorum);
  // Runs after every change is applied, outside the lock, with the call's name ("MemberRemove",
  // "MemberAdd", "MemberPromote", "MemberUpdate"): a test throws from it to kill the caller there.
  void AfterChange(std::function<void(const std::string& call)> hook);

  // Maintenance state (docs/DESIGN.md §12): a member's database file and what of it is in use (a
  // Defragment brings the first down to the second), the store's revision, the alarms raised.
  void SetDatabase(MemberId id, int64_t size, int64_t in_use);
  void SetRevision(int64_t revision);
  void RaiseAlarm(const EtcdAlarm& alarm);
  std::vector<EtcdAlarm> Alarms() const;
  int64_t CompactedRevision() const;

  ClusterView View() const;
  std::vector<ClusterMember> Members() const;
  // Every call as "Method args" in order, reads included.
  std::vector<std::string> Calls() const;
  int CountCalls(const std::string& method) const;

  // Clients sharing this membership; each call of the factory is recorded.
  EtcdClientFactory Factory();
  int ClientsMade() const;
  std::vector<EtcdClientOptions> ClientOptions() const;

  Result<MemberListing> MemberList() override;
  Result<MemberListing> MemberListLinearizable() override;
  Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner, MemberId* added) override;
  Status MemberRemove(MemberId id) override;
  Status MemberPromote(MemberId id) override;
  Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) override;
  Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) override;
  Status Put(const std::string& key, const std::string& value) override;
  Result<std::optional<std::string>> Get(const std::string& key) override;
  Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override;
  Result<bool> PutIfAbsent(const std::string& key, const std::string& value) override;
  Result<std::vector<EtcdAlarm>> AlarmList() override;
  Status AlarmDisarm(const EtcdAlarm& alarm) override;
  Status Compact(int64_t revision) override;
  Status Defragment(const std::string& endpoint, std::chrono::milliseconds timeout) override;


  // The keys the calls above keep; a test may set or read them between calls.
  std::map<std::string, std::string> keys;

 private:
  void Record(std::string call);
  void After(const std::string& call);
  MemberListing ListingLocked() const;
  std::vector<ClusterMember>::iterator FindLocked(MemberId id);
  bool UnhealthyLocked() const;

  mutable std::mutex mu_;
  ClusterId cluster_id_;
  std::vector<ClusterMember> members_;
  std::set<MemberId> caught_up_;
  std::function<void()> remove_timeout_;
  int unhealthy_adds_ = 0;
  Clock* unhealthy_clock_ = nullptr;
  Clock::TimePoint unhealthy_until_{};
  bool has_quorum_ = true;
  int adds_ = 0;
  std::function<void(const std::string&)> after_;
  std::vector<std::string> calls_;
  std::vector<EtcdClientOptions> clients_;
  struct Database {
    int64_t size = 0;
    int64_t in_use = 0;
  };
  std::map<MemberId, Database> databases_;
  int64_t revision_ = 1;
  int64_t compacted_ = 0;
  std::vector<EtcdAlarm> alarms_;
};

}  // namespace quorate
