// Members and member sets as etcd sees them, and the IDs etcd will give them. IDs are computed
// exactly as etcd's membership package does, so quorate can predict them before etcd exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/status.h"

namespace quorate {

using MemberId = uint64_t;
using ClusterId = uint64_t;

// An etcd URL as quorate accepts it: scheme http or https, a host, an explicit port, nothing else.
struct PeerUrl {
  std::string scheme;
  std::string host;  // without brackets for IPv6
  uint16_t port = 0;
  std::string text;  // as given, which is what etcd hashes
};
Result<PeerUrl> ParseUrl(std::string_view text);
// A comma-separated URL list; `what` names the input for the error message.
Result<std::vector<std::string>> ParseUrlList(std::string_view text, std::string_view what);

struct Member {
  std::string name;
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;

  bool operator==(const Member&) const = default;
};

// member ID = first 8 bytes (big endian) of SHA-1(sorted peer URLs concatenated + token).
MemberId ComputeMemberId(const std::vector<std::string>& peer_urls, std::string_view token);
// cluster ID = first 8 bytes of SHA-1 over the sorted member IDs as 8-byte big-endian words.
ClusterId ComputeClusterId(std::vector<MemberId> member_ids);

// IDs as etcdctl prints them: lower-case hex without padding.
std::string IdToHex(uint64_t id);
Result<uint64_t> IdFromHex(std::string_view hex);

// Peer-URL lists compared as etcd does: as sets, in any order.
bool SameUrlSet(std::vector<std::string> a, std::vector<std::string> b);
bool SharesUrl(const std::vector<std::string>& a, const std::vector<std::string>& b);

// etcd's --initial-cluster value: name=url,name=url, one entry per peer URL, in the order given.
std::string InitialClusterOf(const std::vector<Member>& members);

// The agreed initial membership: every member, sorted by name, and the token that seeds the IDs.
class MemberSet {
 public:
  // Validates: names non-empty and unique, URLs well formed, no peer URL claimed twice.
  static Result<MemberSet> Create(std::vector<Member> members, std::string token);

  const std::vector<Member>& members() const { return members_; }
  const std::string& token() const { return token_; }
  size_t size() const { return members_.size(); }

  MemberId IdOf(const Member& m) const { return ComputeMemberId(m.peer_urls, token_); }
  ClusterId cluster_id() const;
  const Member* FindByName(std::string_view name) const;
  const Member* FindById(MemberId id) const;
  // etcd's --initial-cluster value for these members (InitialClusterOf).
  std::string InitialCluster() const { return InitialClusterOf(members_); }

 private:
  std::vector<Member> members_;
  std::string token_;
};

// Parses "n1=http://a:2380,n2=http://b:2380" (a name may repeat for several URLs, as in etcd).
Result<std::vector<Member>> ParseInitialCluster(std::string_view text, std::string_view what);

}  // namespace quorate
