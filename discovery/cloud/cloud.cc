#include "cloud.h"

#include <arpa/inet.h>

#include <set>

#include <fmt/format.h>

#include "quorate/limits.h"
#include "quorate/text.h"

namespace quorate::cloud {

Result<std::string> UnicastHost(std::string_view address, Family family, std::string_view what) {
  const std::string text(address.substr(0, 64));
  const char* kind = family == Family::kV4 ? "an IPv4" : "an IPv6";
  auto refused = [&](const char* why) {
    return Status::Unavailable(
        fmt::format("{} has the address '{}': {}", what, Printable(address, 64), why));
  };
  if (family == Family::kV4) {
    in_addr a{};
    if (address.size() > 15 || inet_pton(AF_INET, text.c_str(), &a) != 1) {
      return refused(fmt::format("not {} address", kind).c_str());
    }
    const uint32_t host = ntohl(a.s_addr);
    if (host == 0) return refused("the unspecified address, no member's");
    if (host == 0xffffffffu) return refused("the broadcast address, no member's");
    if ((host >> 28) == 0xe) return refused("a multicast address, no member's");
    return text;
  }
  in6_addr a{};
  if (address.size() > 45 || inet_pton(AF_INET6, text.c_str(), &a) != 1) {
    return refused(fmt::format("not {} address", kind).c_str());
  }
  if (IN6_IS_ADDR_UNSPECIFIED(&a)) return refused("the unspecified address, no member's");
  if (IN6_IS_ADDR_MULTICAST(&a)) return refused("a multicast address, no member's");
  return "[" + text + "]";
}

Result<std::string> DnsHost(std::string_view name, std::string_view what) {
  bool ok = !name.empty() && name.size() <= 253;
  size_t label = 0;
  for (size_t i = 0; ok && i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      ok = label >= 1 && label <= 63 && name[i - 1] != '-';
      label = 0;
      continue;
    }
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    ok = alnum || (c == '-' && label > 0);
    ++label;
  }
  if (!ok) {
    return Status::Unavailable(fmt::format("{} has the DNS name '{}', not a host name", what, Printable(name, 64)));
  }
  return std::string(name);
}

Status CheckMembers(const std::vector<Member>& members, std::string_view what) {
  if (members.empty()) return Status::Unavailable(fmt::format("{} has no instances with an address yet", what));
  return CheckDistinct(members, what);
}

Status CheckDistinct(const std::vector<Member>& members, std::string_view what) {
  std::set<std::string> names, urls;
  for (const Member& m : members) {
    if (!names.insert(m.name).second) {
      return Status::Unavailable(fmt::format("{}: two instances are both named '{}'", what, Printable(m.name, 64)));
    }
    for (const std::string& url : m.peer_urls) {
      if (!urls.insert(url).second) {
        return Status::Unavailable(fmt::format("{}: two instances both have the peer URL {}", what, Printable(url, 100)));
      }
    }
  }
  return Status::Ok();
}

Status CheckGroupSize(int64_t size, std::string_view what) {
  if (size < 0 || size > kMaxClusterSize) {
    return Status::Unavailable(
        fmt::format("{} has a size of {}, not a cluster size (0-{})", what, size, kMaxClusterSize));
  }
  return Status::Ok();
}

}  // namespace quorate::cloud
