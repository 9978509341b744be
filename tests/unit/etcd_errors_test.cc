#include <doctest/doctest.h>
#include <grpcpp/support/status.h>

#include "etcd/etcd_errors.h"

namespace quorate {
namespace {

using grpc::StatusCode;

// etcd 3.4's own answers (api/v3rpc/rpctypes/error.go), as the client receives them.
grpc::Status Etcd(StatusCode code, const std::string& text) { return grpc::Status(code, text); }

Status Classified(StatusCode code, const std::string& text) {
  return FromGrpc(Etcd(code, text), "http://127.0.0.1:2379", "MemberRemove 103");
}

TEST_CASE("etcd's refusals that clear up by themselves are Unavailable with their reason, whatever their code") {
  struct Case {
    StatusCode code;
    const char* text;
    Reason reason;
  };
  for (const Case& c : {
           Case{StatusCode::UNAVAILABLE, "etcdserver: unhealthy cluster", Reason::kUnhealthyCluster},
           Case{StatusCode::FAILED_PRECONDITION,
                "etcdserver: re-configuration failed due to not enough started members", Reason::kNotEnoughStarted},
           Case{StatusCode::FAILED_PRECONDITION,
                "etcdserver: can only promote a learner member which is in sync with leader",
                Reason::kLearnerNotReady},
           Case{StatusCode::FAILED_PRECONDITION, "etcdserver: too many learner members in cluster",
                Reason::kTooManyLearners},
       }) {
    CAPTURE(c.text);
    Status s = Classified(c.code, c.text);
    CHECK(s.IsUnavailable());
    CHECK(s.reason() == c.reason);
    // The words stay in the message, for the operator; the reason survives added context.
    CHECK(s.message() == std::string("MemberRemove 103 at http://127.0.0.1:2379: ") + c.text);
    CHECK(s.Prefixed("scaling down").reason() == c.reason);
  }
}

TEST_CASE("etcd's other answers keep their code and carry no reason") {
  Status voter = Classified(StatusCode::FAILED_PRECONDITION, "etcdserver: can only promote a learner member");
  CHECK(voter.code() == Status::Code::kFailedPrecondition);
  CHECK(voter.reason() == Reason::kNone);
  Status gone = Classified(StatusCode::NOT_FOUND, "etcdserver: member not found");
  CHECK(gone.IsNotFound());
  CHECK(gone.reason() == Reason::kNone);
  CHECK(Classified(StatusCode::INVALID_ARGUMENT, "etcdserver: bad peer URL").IsInvalidArgument());
  CHECK(Classified(StatusCode::DEADLINE_EXCEEDED, "context deadline exceeded").IsUnavailable());
  CHECK(Classified(StatusCode::PERMISSION_DENIED, "etcdserver: permission denied").code() ==
        Status::Code::kInternal);
  // Only etcd's first line goes into the message.
  CHECK(Classified(StatusCode::UNKNOWN, "first\nsecond").message() ==
        "MemberRemove 103 at http://127.0.0.1:2379: first");
}

TEST_CASE("a change that may have been made is told apart from one that was certainly not") {
  for (const char* text : {"etcdserver: request timed out", "etcdserver: leader changed", "etcdserver: server stopped"}) {
    CAPTURE(text);
    grpc::Status st = Etcd(StatusCode::UNAVAILABLE, text);
    CHECK(MaybeDone(st));
    CHECK_FALSE(RefusedUnread(st));
    CHECK_FALSE(ConnectionBroken(st));
    Status s = OutcomeUnknown(st, "http://127.0.0.1:2379", "MemberRemove 103");
    CHECK(s.IsUnavailable());
    CHECK(s.reason() == Reason::kOutcomeUnknown);
    CHECK(s.message() ==
          std::string("MemberRemove 103 at http://127.0.0.1:2379: no answer, so it may or may not have been done: ") +
              text);
  }
  for (const char* text : {"etcdserver: rpc not supported for learner", "etcdserver: not capable",
                           "etcdserver: no leader"}) {
    CAPTURE(text);
    CHECK(RefusedUnread(Etcd(StatusCode::UNAVAILABLE, text)));
    CHECK_FALSE(MaybeDone(Etcd(StatusCode::UNAVAILABLE, text)));
  }
  CHECK(ConnectionBroken(Etcd(StatusCode::UNAVAILABLE, "failed to connect to all addresses")));
  CHECK_FALSE(ConnectionBroken(Etcd(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded")));
  // The same words under another code are not etcd's.
  CHECK_FALSE(MaybeDone(Etcd(StatusCode::FAILED_PRECONDITION, "etcdserver: request timed out")));
}

TEST_CASE("an OK status carries no reason") {
  CHECK(Status::Ok().With(Reason::kOutcomeUnknown).reason() == Reason::kNone);
  CHECK(Status::Unavailable("x").reason() == Reason::kNone);
}

}  // namespace
}  // namespace quorate
