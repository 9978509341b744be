// quorate's client of a running etcd cluster: the membership calls of DESIGN §4 (join, replace,
// promote, update), the status the supervisor reads, and the KV calls the etcd discovery provider
// and the tests need. An interface, so callers can be tested against a fake.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quorate/config.h"
#include "quorate/member.h"
#include "quorate/planner.h"
#include "quorate/status.h"
#include "quorate/tls.h"

namespace quorate {

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // client URLs; tried in turn while they do not answer
  TlsFiles tls;                        // CA to trust, and a certificate to present (etcdctl's --cacert/--cert/--key)
  std::chrono::milliseconds timeout{5000};  // the deadline of each call to one endpoint
};

struct MemberListing {
  ClusterId cluster_id = 0;
  MemberId answered_by = 0;
  std::vector<ClusterMember> members;
};

struct EndpointStatus {
  std::string endpoint;
  MemberId member_id = 0;
  MemberId leader = 0;
  uint64_t raft_index = 0;
  uint64_t raft_term = 0;
  uint64_t raft_applied_index = 0;
  int64_t db_size = 0;
  bool is_learner = false;
  std::string version;
  std::vector<std::string> errors;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // orders keys by when they were first written
};

// Errors carry etcd's own words. Unavailable: try again later (no endpoint answered, "unhealthy
// cluster", a learner "not in sync" yet, "too many learners"). NotFound: no such member.
// FailedPrecondition: the peer URLs are already a member's.
class EtcdClient {
 public:
  virtual ~EtcdClient() = default;
  virtual Result<MemberListing> MemberList() = 0;
  // The listing is the membership after the add; `added` receives the new member's ID.
  virtual Result<MemberListing> MemberAdd(const std::vector<std::string>& peer_urls, bool is_learner,
                                          MemberId* added) = 0;
  virtual Status MemberRemove(MemberId id) = 0;
  virtual Status MemberPromote(MemberId id) = 0;
  virtual Status MemberUpdate(MemberId id, const std::vector<std::string>& peer_urls) = 0;
  virtual Result<EndpointStatus> EndpointStatusOf(const std::string& endpoint) = 0;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  // Every key with `prefix`, in key order.
  virtual Result<std::vector<KeyValue>> GetPrefix(const std::string& prefix) = 0;
  // One transaction: writes only when the key has never been created; true when this call wrote it.
  virtual Result<bool> PutIfAbsent(const std::string& key, const std::string& value) = 0;
};

std::unique_ptr<EtcdClient> MakeEtcdClient(const EtcdClientOptions& options);

// `member list` output in etcdctl 3.4's shapes, IDs in hex.
std::string FormatMemberList(const MemberListing& listing, OutputFormat format);

}  // namespace quorate
