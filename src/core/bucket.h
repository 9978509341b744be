// The member bucket: the agreed membership in the JSON shape etcd keeps in its own `members`
// bucket, keyed by member ID in hex, plus a cluster record. It is written crash-safely and, when
// read back, checked end to end (IDs recomputed from URLs and token), so a corrupt or foreign
// bucket is reported and never trusted.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/etcd_version.h"
#include "quorate/member.h"
#include "quorate/status.h"

namespace quorate {

struct ClusterRecord {
  std::string state;       // "new" or "existing": how the cluster was (or will be) started
  std::string created_at;  // RFC 3339, UTC
  // Rule 6's memory: the etcd binary that last started on this member's data, and the highest
  // cluster version it has seen, which binds a restart when no peer answers. None in a shared store.
  std::optional<EtcdVersion> etcd_version = std::nullopt;
  std::optional<EtcdVersion> cluster_version = std::nullopt;
};

struct Bucket {
  MemberSet members;
  ClusterRecord cluster;
};

std::string EncodeBucket(const Bucket& bucket);
// DataLoss (naming `source`) when the text is not a whole, self-consistent bucket.
Result<Bucket> DecodeBucket(std::string_view text, std::string_view source);

// <dir>/bucket.json. NotFound when absent.
inline constexpr const char* kBucketFile = "bucket.json";
Result<Bucket> LoadBucket(const std::string& dir);
Status SaveBucket(const std::string& dir, const Bucket& bucket);

// The current time as RFC 3339 UTC, for created_at.
std::string NowRfc3339();

}  // namespace quorate
