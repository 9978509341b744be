// quorate's client of a running etcd cluster: the membership calls of docs/DESIGN.md §4 (join, replace,
// promote, update), the status the supervisor reads, and the KV calls the etcd discovery provider
// and the tests need. An interface, so callers can be tested against a fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cancel.h"
#include "core/cluster.h"
#include "quorate/clock.h"
#include "quorate/member.h"
#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

struct EtcdClientOptions {
  // Client URLs, tried in turn. http:// is plain, https:// is TLS; a bare host:port is TLS when
  // `tls` names a certificate or a CA, as etcdctl does.
  std::vector<std::string> endpoints;
  TlsFiles tls;  // CA to trust, and a certificate to present (etcdctl's --cacert/--cert/--key)
  // Bounds each call as a whole, every endpoint and retry included. One endpoint gets at most an
  // even share of what is left, so a silent endpoint cannot use up the others' time.
  std::chrono::milliseconds timeout{5000};
  // No call lasts past this, whatever `timeout` says: the caller's own --timeout as a point in time.
  Clock::TimePoint deadline = Clock::kNever;
  // An etcd with auth enabled (etcdctl's --user): every call carries the token Authenticate gives
  // for them. Empty user: no auth. The password is never put in a message.
  std::string user{};
  std::string password{};
  // Cancelled, it ends every call of the client at once (within 50 ms), a call in flight included:
  // Cancelled for a read, Unavailable (outcome unknown) for a change that was sent. The one who
  // stops the thread that calls cancels it. Null: only the timeouts bound the calls.
  std::shared_ptr<Cancellation> cancel{};
};

struct MemberListing {
  ClusterId cluster_id = 0;
  MemberId answered_by = 0;
  std::vector<ClusterMember> members;
};

struct EndpointStatus {
  std::string endpoint;
  MemberId member_id = 0;
  MemberId leader = 0;  // 0 while the member knows no leader
  uint64_t raft_index = 0;
  uint64_t raft_term = 0;
  uint64_t raft_applied_index = 0;
  int64_t db_size = 0;         // the database file's size; etcd's type: int64
  int64_t db_size_in_use = 0;  // what of it holds data: the rest is free pages a defragmentation returns
  int64_t revision = 0;        // the member's key-value store revision
  bool is_learner = false;
  std::string version;
  std::vector<std::string> errors;  // alarms, e.g. "NOSPACE"
};

// An alarm raised in the cluster (Maintenance.Alarm): etcd refuses writes while a NOSPACE one stands.
enum class AlarmKind { kNoSpace, kCorrupt };
struct EtcdAlarm {
  MemberId member_id = 0;
  AlarmKind kind = AlarmKind::kNoSpace;
};
std::string AlarmName(AlarmKind kind);  // etcd's: "NOSPACE", "CORRUPT"

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // orders keys by when they were first written
};

// Errors carry the endpoint and etcd's own words.
//   Unavailable: try again later. No endpoint answered, or etcd said "unhealthy cluster", "too many
//     learner members", a learner is not "in sync with leader" yet; or a change was sent and not
//     answered, so it may or may not have been made (the message says so).
//   NotFound: no such member. FailedPrecondition: the peer URLs are already a member's ("Peer URLs
//     already exists", or "member ID already exist" when added twice within a second), or the
//     member is not a learner. InvalidArgument: etcd or quorate found the request or the options bad.
// Reads (MemberList, EndpointStatusOf, Get, GetPrefix) are retried with backoff within the timeout;
// changes go to the next endpoint only when the previous one certainly did not receive them.
class EtcdClient {
 public:
  virtual ~EtcdClient() = default;
  virtual Result<MemberListing> MemberList() = 0;
  // MemberList from a member that first did a linearizable read, so its listing holds every change
  // committed before the call (what etcd 3.5's linearizable MemberList does, done so on 3.4 too).
  // Needs quorum: Unavailable without a leader.
  virtual Result<MemberListing> MemberListLinearizable() = 0;
  // The listing is the membership after the add; `added` (may be null) receives the new member's ID.
  virtual Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                          MemberId* added) = 0;
  virtual Status MemberRemove(MemberId id) = 0;
  virtual Status MemberPromote(MemberId id) = 0;
  virtual Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) = 0;
  // Maintenance.Status of one endpoint, which need not be one of the options' endpoints. (Not
  // named Status: inside the class that would hide the Status type.)
  virtual Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) = 0;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  // Every key with `prefix`, in key order.
  virtual Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) = 0;
  // One transaction: writes only when the key has never been created; true when this call wrote it.
  virtual Result<bool> PutIfAbsent(const std::string& key, const std::string& value) = 0;

  // Maintenance (docs/DESIGN.md §12). Every alarm raised in the cluster.
  virtual Result<std::vector<EtcdAlarm>> AlarmList() = 0;
  // Lowers one raised alarm; etcd accepts writes again once no NOSPACE alarm stands.
  virtual Status AlarmDisarm(const EtcdAlarm& alarm) = 0;
  // Compacts the history up to `revision`, answering once the backend has done it (physical), so a
  // defragmentation after it returns the space. FailedPrecondition with Reason::kCompacted when
  // that revision is compacted already.
  virtual Status Compact(int64_t revision) = 0;
  // Defragments the one member at `endpoint`, which serves nothing meanwhile; `timeout` bounds it
  // instead of the client's (a large database takes long). Never retried: it may be under way.
  virtual Status Defragment(const std::string& endpoint, std::chrono::milliseconds timeout) = 0;
};

// What a snapshot is of, from the member's Maintenance.Status asked just before the stream.
struct SnapshotHeader {
  std::string endpoint;
  ClusterId cluster_id = 0;
  MemberId member_id = 0;
  int64_t revision = 0;  // the member's revision as the snapshot began: every write up to it is in it
  std::string version;   // etcd's
};

// Takes the stream as it comes, a piece at a time: etcd's database, then 32 bytes, the sha256 of
// it (what `etcdctl snapshot save` writes to its file). An error it returns ends the stream.
using SnapshotSink = std::function<Status(std::string_view piece)>;

// Maintenance.Snapshot of `endpoint`, streamed to `sink`; options.timeout bounds it all (the
// Status call, connecting and every piece). Unavailable when the endpoint does not answer, the
// stream breaks or ends short, or the time runs out; the sink's own error as it gave it.
Result<SnapshotHeader> StreamSnapshot(const EtcdClientOptions& options, const std::string& endpoint,
                                      const SnapshotSink& sink);

// Never fails here: a bad endpoint or an unreadable TLS file is the InvalidArgument of every call.
std::unique_ptr<EtcdClient> MakeEtcdClient(const EtcdClientOptions& options);

// Makes the clients of a job, so tests hand it a fake cluster; MakeEtcdClient is the real one.
using EtcdClientFactory = std::function<std::unique_ptr<EtcdClient>(const EtcdClientOptions& options)>;

}  // namespace quorate
