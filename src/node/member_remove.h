// `quorate member remove` (scaling down, the etcdctl way): every argument is resolved against one
// MemberList before anything changes, then the members go one at a time, each only while the voters
// it leaves behind that are started and healthy are a majority of them. Resolution and the quorum
// check are pure; RemoveMembers makes the calls through an EtcdClient the caller owns.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quorate/clock.h"
#include "etcd/etcd_client.h"
#include "core/cluster.h"
#include "quorate/status.h"

namespace quorate {

struct RemovalTarget {
  std::string arg;                      // as given on the command line
  std::optional<ClusterMember> member;  // nullopt: the cluster does not list it (ignore_not_found only)
};

// MEMBER is a name as etcd lists it or a hex member ID; a name wins over an ID that reads the same.
// InvalidArgument naming the argument, with nothing to remove: no argument, a name or ID the cluster
// does not list (unless ignore_not_found), a name two members share, a member given twice.
Result<std::vector<RemovalTarget>> ResolveRemoval(const MemberListing& listing, const std::vector<std::string>& args,
                                                  bool ignore_not_found);

// Per voter: Ok when it answered Maintenance.Status on its client URL as itself and knows a leader;
// otherwise why it does not count (not started, not answering, no leader).
using VoterHealth = std::map<MemberId, Status>;

// Ok when removing `target` keeps quorum: a learner always; a voter when the remaining voters that
// are healthy are a majority of the remaining voters, and at least one remains. FailedPrecondition
// otherwise, naming the members that do not count and what to do. A voter missing from `health`
// does not count.
Status CheckRemovalKeepsQuorum(const MemberListing& listing, MemberId target, const VoterHealth& health);

struct RemoveOptions {
  bool ignore_not_found = false;
  // How long etcd's transient "unhealthy cluster" refusal is retried, every kUnhealthyClusterRetry:
  // the member asked must have been connected to the voters for 5 s (etcd's HealthInterval) before
  // it allows a removal.
  std::chrono::milliseconds retry_for{20000};
  // Before each removal that passed its checks (the backup before a change, with --backup-to); an
  // error refuses that removal and the ones after it. May be empty.
  std::function<Status(const ClusterMember& member)> before_remove;
};

// What RemoveMembers did with each argument, told as it happens, so a script reading the printed
// lines sees what happened so far. The CLI prints it (cli/output.h).
class RemovalReport {
 public:
  enum class Outcome { kRemoved, kAlreadyRemoved };
  virtual ~RemovalReport() = default;
  virtual void Handled(ClusterId cluster, const ClusterMember& member, Outcome outcome) = 0;
  // An argument the cluster does not list, skipped with ignore_not_found.
  virtual void NotAMember(ClusterId cluster, const std::string& arg) = 0;
};

// Resolves `args`, then removes the members in the order given, telling `report` about each as it
// goes. `client` reaches the cluster; `probe` asks each voter for its health, so its timeout bounds
// what one voter that is down costs (it may be `client`); `clock` paces the retries of etcd's
// "unhealthy cluster" refusal. Errors: InvalidArgument from ResolveRemoval (nothing removed);
// FailedPrecondition when quorum would be at risk, by our check or etcd's; what the client said
// otherwise. Members removed before an error stay removed, and their lines are printed.
Status RemoveMembers(Clock& clock, EtcdClient& client, EtcdClient& probe, const std::vector<std::string>& args,
                     const RemoveOptions& options, RemovalReport& report);

}  // namespace quorate
