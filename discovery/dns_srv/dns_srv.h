// The dns-srv provider's logic without the network: which records it asks for and how their answers
// become members, checked. The provider ("dns-srv" in the registry) runs this on a c-ares Resolver;
// unit tests run it on a fake.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "quorate/member.h"
#include "quorate/status.h"
#include "resolver.h"

namespace quorate::dns_srv {

// What etcd's --discovery-srv D --discovery-srv-name N looks up.
struct SrvQuery {
  std::string domain;                   // without the trailing dot
  std::string service = "etcd-server";  // without the leading '_'
  std::string suffix;                   // etcd's --discovery-srv-name; empty for none

  // _<service>-ssl[-<suffix>]._tcp.<domain> (https) or _<service>[-<suffix>]._tcp.<domain> (http).
  std::string RecordName(bool secure) const;
};

// Both record sets, merged: one member per SRV target host, named by the host's first label, with a
// peer URL per distinct (scheme, port) and the conventional client URL for each, sorted by name.
// NotFound when neither record name holds records; Unavailable when the DNS server did not answer
// or its answer is wrong (a target that is not a host name or does not resolve, port 0, a name
// shared by two hosts): DNS is fetched at run time, and records are often fixed after the first
// node starts, so the caller retries within --timeout.
Result<std::vector<Member>> DiscoverSrvMembers(const SrvQuery& query, Resolver& resolver);

// A DNS name as Go's resolver (and so etcd) accepts one: dot-separated labels of letters, digits,
// '-' and '_', 1-63 bytes each, no '-' at either end, at most 253 bytes, not all digits (that is an
// IPv4 address); no trailing dot.
bool IsDnsName(std::string_view name);

}  // namespace quorate::dns_srv
