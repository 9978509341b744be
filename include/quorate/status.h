// Errors as values. A Status says whether an operation worked and, when it did not, why, in words
// meant for the operator. Result<T> carries either a value or the Status that explains its absence.
// The code decides the process exit code (docs/DESIGN.md §1): bad input is 2, everything else that fails is 1.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace quorate {

enum class ExitCode : int { kOk = 0, kFailure = 1, kBadInput = 2 };

// What a caller may decide on beyond the code: set once, where a server's answer is classified
// (etcd's errors in src/etcd/etcd_errors.cc), and switched on by the callers, so that no one reads
// the message, which is for people and may change.
enum class Reason {
  kNone,
  kOutcomeUnknown,    // a change was sent and not answered: it may or may not have been made
  kUnhealthyCluster,  // etcd: the member asked has not been connected to enough voters for 5 s
  kNotEnoughStarted,  // etcd: the change would leave too few started voters (strict reconfig)
  kLearnerNotReady,   // etcd: the learner is not in sync with the leader yet
  kTooManyLearners,   // etcd: the cluster has as many learners as it allows
  kStaleDecision,     // the membership met while applying a decision is not the one it was made on
  kCompacted,         // etcd: the revision asked for is compacted already
  kNoQuorumCommits,   // by --timeout, no quorum committed a removal, or counted the voters for one: a majority may be lost
  kPeerUrlsMoved,     // the cluster moved its peer URLs to https (§14) past this node's flags: look again there
};

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // what the operator typed (flag, env, YAML, a static list) is wrong: exit 2
    kNotFound,
    kUnavailable,       // a peer, server or file is not there yet: retry
    kDeadlineExceeded,  // waited for --timeout: exit 1
    kDataLoss,          // a stored record is corrupt or half written: never trusted
    kFailedPrecondition,
    kInternal,
    kCancelled,  // a wait ended by a stop request (SIGTERM): not a failure of what was waited for
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
  static Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {Code::kFailedPrecondition, std::move(m)};
  }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Cancelled(std::string m) { return {Code::kCancelled, std::move(m)}; }
  // From errno, naming what was being done ("write /x/y").
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsUnavailable() const { return code_ == Code::kUnavailable; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  Reason reason() const { return reason_; }

  // The same status, carrying `reason` (an OK status carries none).
  Status With(Reason reason) const {
    Status s = *this;
    if (!ok()) s.reason_ = reason;
    return s;
  }

  bool IsCancelled() const { return code_ == Code::kCancelled; }

  ExitCode exit_code() const {
    if (ok()) return ExitCode::kOk;
    return code_ == Code::kInvalidArgument ? ExitCode::kBadInput : ExitCode::kFailure;
  }

  // The same status with context in front: "reading bucket: <message>".
  Status Prefixed(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_).With(reason_);
  }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
  Reason reason_ = Reason::kNone;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "a Result holding a Status must hold an error");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace quorate
