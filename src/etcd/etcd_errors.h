// etcd's gRPC errors, read in one place: what a failed call means to its caller (try the next
// endpoint, retry later, give up, or find out whether a change happened), as a Status code and a
// Reason. etcd 3.4's words (api/v3rpc/rpctypes/error.go) are matched here and nowhere else; the
// message keeps them for the operator.
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <string>

#include "quorate/status.h"

namespace quorate {

// How often a change etcd refused as "unhealthy cluster" is asked again. etcd 3.4 and 3.5 refuse a
// change so while the member that serves it has not been connected (its rafthttp stream to the peer
// active) for 5 s (HealthInterval) to: every other voter, for MemberAdd (3.4, 3.5 before 3.5.30); a
// majority of the voters with the new member counted as absent (3.5.30 on); enough voters that the
// rest keep a majority, for MemberRemove of a voter that is connected. MemberPromote is never
// refused so. The refusal ends at a moment set by a peer connection that quorate cannot see,
// within those 5 s of the last one made (a member restarted just before the change) unless a voter
// stays away, so a fixed interval finds it, not a doubling backoff (which, from 0.5 s, asked at
// 3.5 and 7.5 s an add etcd allowed from 3.9 s: plain-to-tls on etcd 3.5). 500 ms: at most half a
// second late, a tenth of HealthInterval; a refused try costs etcd a check in memory and one
// warning line (and quorate's read of the membership before it one ReadIndex round), so halving it
// would save at most 0.25 s a change while doubling the refusals of one that lasts (a voter down).
inline constexpr std::chrono::milliseconds kUnhealthyClusterRetry{500};

// etcd's words as they go into a message: the first line of its answer.
std::string FirstLine(const grpc::Status& st);

// gRPC's own UNAVAILABLE (no connection, or it broke), not an answer from etcd.
bool ConnectionBroken(const grpc::Status& st);

// Refused by etcd's interceptors before the request was looked at: a learner serves only Status
// and serializable reads, and with "hasleader" set a member without a leader refuses at once.
bool RefusedUnread(const grpc::Status& st);

// A change etcd had already proposed when it gave up waiting: it may still be applied.
bool MaybeDone(const grpc::Status& st);

// "<what> at <endpoint>: <etcd's first line>", with the code the caller acts on and, for the
// refusals that clear up by themselves, their Reason: "unhealthy cluster", a learner not "in sync
// with leader", "too many learner members" and "not enough started members" are Unavailable,
// whatever code etcd sent them with.
Status FromGrpc(const grpc::Status& st, const std::string& endpoint, const std::string& what);

// A change that was sent and not answered, or answered with MaybeDone: Unavailable with
// Reason::kOutcomeUnknown, and the message says so.
Status OutcomeUnknown(const grpc::Status& st, const std::string& endpoint, const std::string& what);

}  // namespace quorate
