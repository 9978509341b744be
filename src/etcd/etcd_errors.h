// etcd's gRPC errors, read in one place: what a failed call means to its caller (try the next
// endpoint, retry later, give up, or find out whether a change happened), as a Status code and a
// Reason. etcd 3.4's words (api/v3rpc/rpctypes/error.go) are matched here and nowhere else; the
// message keeps them for the operator.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "quorate/status.h"

namespace quorate {

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
