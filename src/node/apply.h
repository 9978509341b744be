// Carrying out a start-up decision's membership change (docs/DESIGN.md §4 rules 2 and 4: remove the stale
// ID, add this member as a learner) and the checks around it, against an etcd client factory, a
// clock and a stop request, so every step and every wait is tested in fake time.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/planner.h"
#include "etcd/etcd_client.h"
#include "node/peers.h"
#include "quorate/clock.h"
#include "quorate/member.h"
#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

// How a stop reaches the job's waits. `fd` wakes them (the SignalWatcher's pipe); `requested`,
// asked when it does, says whether a stop was asked and must leave `fd` unreadable when not (a
// SIGCHLD on the same pipe). Null `requested`: a readable fd is a stop. fd -1: never stopped.
struct StopSource {
  int fd = -1;
  std::function<bool()> requested;
};

// Backoff::Wait, waiting on when the stop fd woke it for something that is not a stop.
Backoff::Outcome WaitOrStop(Backoff& backoff, const StopSource& stop);

// Said when, by --timeout, no quorum commits a removal (rule 4 or 9), or reads the member list to count
// the voters on before one: the voters that answered may include a member removed without ever
// learning it (no quorum reached it), which still answers as a voter.
extern const char kMajorityMayBeLost[];

// Whether `url`'s host names an address of this machine: Unavailable when it does not resolve.
using IsOwnAddress = std::function<Result<bool>(const PeerUrl& url)>;
// The real one: an address is ours when a socket can be bound to it.
Result<bool> IsAddressOfThisMachine(const PeerUrl& url);

// The seams the membership change goes through.
struct ApplySeams {
  EtcdClientFactory etcd_clients;
  Clock& clock;
  Peers& peers;  // who answers at our own peer URL
  IsOwnAddress is_own_address;
  StopSource stop;
  // Called once before the first MemberRemove of a change (the backup before a change); may be empty.
  std::function<void(EtcdClient& client)> before_remove;
};

// A member added with a peer URL that is not ours can never connect: refused before MemberAdd.
// InvalidArgument when a URL names no address of this machine; FailedPrecondition when something
// already answers there.
Status CheckPeerUrlIsOurs(const ApplySeams& seams, const Member& self);

struct MembershipChange {
  MemberId member_id = 0;
  std::string initial_cluster;  // the cluster's members after the change, for `existing`
};

// Replace and join: remove the stale ID, add ourselves as a learner, and compute the
// --initial-cluster etcd needs to start `existing`. Each step tolerates having been done already, so
// a run killed half-way converges on the next one. Unavailable answers are retried until `deadline`
// (then DeadlineExceeded); a stop meanwhile is Cancelled, saying how far the change got.
Result<MembershipChange> ApplyMembershipChange(const ApplySeams& seams, const TlsFiles& client_tls,
                                               const Member& self, const Decision& decision,
                                               Clock::TimePoint deadline);

// For a `new` start: waits (a few seconds at most) until the member owning the smallest peer URL
// answers, unless that member is us. Cancelled when stopped meanwhile.
Status WaitForFirstPeer(const ApplySeams& seams, const MemberSet& expected, const Member& self);

}  // namespace quorate
