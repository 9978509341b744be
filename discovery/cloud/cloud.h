// What the cloud providers (aws, gce, azure) share above their APIs' shapes: reading a paged list,
// the checks every instance passes before it becomes a member, and the state of a scaling group
// (rule 9's facts). A provider includes this folder, src/net/cloud/ (the credentials) and
// include/quorate/; nothing else includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::cloud {

enum class Family { kV4, kV6 };

// Unavailable: an answer that is not `what` ("EC2's DescribeInstancesResponse XML"), named by its
// size alone. A garbled answer may hold a token or a key, so none of it is quoted (DESIGN §2).
Status NotThe(std::string_view what, std::string_view answer);

// The host of a member's URLs for an address a cloud answered: a unicast address of `family` as
// inet_pton reads it (IPv6 in brackets). Unavailable naming `what` for anything else: a host name,
// 300.1.1.1, the unspecified address (0.0.0.0, ::), broadcast (255.255.255.255) or multicast.
Result<std::string> UnicastHost(std::string_view address, Family family, std::string_view what);

// A DNS host name as an instance's private DNS name is one (letters, digits, '-', dots between
// labels of 1-63 bytes, 253 bytes at most); Unavailable naming `what` otherwise.
Result<std::string> DnsHost(std::string_view name, std::string_view what);

// The members of one answer, each name and peer URL once: two instances that share either are the
// cloud's answer (a renamed or re-addressed instance, caught mid-change), so Unavailable, retried.
Status CheckDistinct(const std::vector<Member>& members, std::string_view what);
// CheckDistinct, and an empty list is Unavailable too ("no instances yet"), retried within --timeout
// like any other answer: `what` describes the group.
Status CheckMembers(const std::vector<Member>& members, std::string_view what);

// A group's size as its cloud gives it; Unavailable beyond kMaxClusterSize (etcd's own limit is
// lower still in practice) or below 0.
Status CheckGroupSize(int64_t size, std::string_view what);

// The keys every cloud shares: the tag or label naming the member (empty: the instance's own name),
// and its URLs' scheme and ports. A provider's Options derive from it.
struct CommonKeys {
  std::string name_tag;
  std::string scheme = "http";
  int peer_port = 2380;
  int client_port = 2379;
};
// A cloud provider's table: `own` rows, then the rows of CommonKeys, whose name_tag says what names
// a member on that cloud (`name_tag_help`).
ProviderKeys WithCommonKeys(ProviderKeys own, std::string name_tag_help);
// Takes name_tag, scheme, peer_port and client_port by those rows; InvalidArgument naming the key for
// a port out of range or a scheme that is not http or https.
Result<CommonKeys> TakeCommonKeys(ProviderParams& params);

// The member an instance stands for: `name` as etcd takes it, URLs on `host` (UnicastHost's or
// DnsHost's) of the scheme and ports `keys` give. Unavailable naming `what` (the instance) otherwise.
Result<Member> InstanceMember(const std::string& name, const std::string& host, const CommonKeys& keys,
                              std::string_view what);

// One page of a paged list as a provider read it: how many items it held, and what names the next
// page (a token, or a nextLink's target), empty on the last.
struct Page {
  size_t items = 0;
  std::string next;
};
// The most items and pages a list is read to: far past any group's size (a list filtered on the
// instances, not the API, holds the others too), so a list that never ends stops.
inline constexpr size_t kMaxItemsRead = 100000;
inline constexpr int kMaxPages = 10000;
// Every page of a list: `read(next)` reads the page `next` names ("" for the first). Unavailable
// naming `what` past kMaxItemsRead items or kMaxPages pages, for a `next` that is not a token
// (CheckOpaque) or one given before, calling it by `token` ("NextToken"); the first error of `read`
// as it is.
Status ReadPages(std::string_view what, std::string_view token,
                 const std::function<Result<Page>(const std::string& next)>& read);

// A provider that reads a group its cloud keeps (an Auto Scaling group, a managed instance group, a
// scale set): the size the group names, and whether the last Discover read it whole (rule 9).
class ScalingGroupProvider : public DiscoveryProvider {
 public:
  std::optional<size_t> ImpliedSize() const override { return implied_size_; }
  bool ListsWholeGroup() const override { return whole_group_; }

 protected:
  // At the start of every Discover: nothing is known whole until the group is read to its end.
  void StartReading() { whole_group_ = false; }
  // The group was read whole, its size `size`.
  void ReadWhole(size_t size) {
    implied_size_ = size;
    whole_group_ = true;
  }

 private:
  std::optional<size_t> implied_size_;
  bool whole_group_ = false;
};

}  // namespace quorate::cloud
