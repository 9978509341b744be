#include "etcd/etcd_errors.h"

#include <fmt/format.h>

namespace quorate {
namespace {

bool Contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

struct Refusal {
  const char* words;
  Reason reason;
};

// etcd's words decide what the caller should do where the gRPC code alone is too coarse: "unhealthy
// cluster" is UNAVAILABLE on the wire, the others FAILED_PRECONDITION, yet each clears up by itself.
constexpr Refusal kTransient[] = {
    {"etcdserver: unhealthy cluster", Reason::kUnhealthyCluster},
    {"in sync with leader", Reason::kLearnerNotReady},
    {"too many learner members", Reason::kTooManyLearners},
    {"not enough started members", Reason::kNotEnoughStarted},
};

}  // namespace

std::string FirstLine(const grpc::Status& st) {
  const std::string& text = st.error_message();
  return text.substr(0, text.find('\n'));
}

bool ConnectionBroken(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE && !Contains(st.error_message(), "etcdserver:");
}

bool RefusedUnread(const grpc::Status& st) {
  const std::string& text = st.error_message();
  return st.error_code() == grpc::StatusCode::UNAVAILABLE &&
         (Contains(text, "etcdserver: rpc not supported for learner") || Contains(text, "etcdserver: not capable") ||
          Contains(text, "etcdserver: no leader"));
}

bool MaybeDone(const grpc::Status& st) {
  const std::string& text = st.error_message();
  return st.error_code() == grpc::StatusCode::UNAVAILABLE &&
         (Contains(text, "etcdserver: request timed out") || Contains(text, "etcdserver: leader changed") ||
          Contains(text, "etcdserver: server stopped"));
}

Status FromGrpc(const grpc::Status& st, const std::string& endpoint, const std::string& what) {
  std::string msg = fmt::format("{} at {}: {}", what, endpoint, FirstLine(st));
  for (const Refusal& r : kTransient) {
    if (Contains(st.error_message(), r.words)) return Status::Unavailable(msg).With(r.reason);
  }
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Status::Unavailable(msg);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(msg);
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(msg);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(msg);
    case grpc::StatusCode::OUT_OF_RANGE:
      // "mvcc: required revision has been compacted": what a compaction asked for is done already.
      if (Contains(st.error_message(), "has been compacted"))
        return Status::FailedPrecondition(msg).With(Reason::kCompacted);
      return Status::Internal(msg);
    default:
      return Status::Internal(msg);
  }
}

Status OutcomeUnknown(const grpc::Status& st, const std::string& endpoint, const std::string& what) {
  return Status::Unavailable(fmt::format("{} at {}: no answer, so it may or may not have been done: {}", what,
                                         endpoint, FirstLine(st)))
      .With(Reason::kOutcomeUnknown);
}

}  // namespace quorate
