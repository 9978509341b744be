// What the cloud providers (aws, gce, azure) share above their APIs' shapes: the checks every
// instance passes before it becomes a member. A provider includes this folder, src/net/cloud/ (the
// credentials) and include/quorate/; nothing else includes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/member.h"
#include "quorate/status.h"

namespace quorate::cloud {

enum class Family { kV4, kV6 };

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

}  // namespace quorate::cloud
