#include "cloud.h"

#include <arpa/inet.h>

#include <set>

#include <fmt/format.h>

#include "net/cloud/opaque.h"
#include "quorate/limits.h"
#include "quorate/text.h"

namespace quorate::cloud {

Status NotThe(std::string_view what, std::string_view answer) {
  return Status::Unavailable(fmt::format("the answer ({} bytes) is not {}", answer.size(), what));
}

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

ProviderKeys WithCommonKeys(ProviderKeys own, std::string name_tag_help) {
  own.push_back({.name = "name_tag", .help = std::move(name_tag_help), .values = "a tag or label key"});
  own.push_back({.name = "scheme", .help = "the scheme of the members' URLs", .fallback = "http",
                 .choices = {"http", "https"}});
  own.push_back({.name = "peer_port", .help = "etcd's peer port on every instance", .fallback = "2380", .lo = 1,
                 .hi = 65535, .values = "a port"});
  own.push_back({.name = "client_port", .help = "etcd's client port on every instance", .fallback = "2379", .lo = 1,
                 .hi = 65535, .values = "a port"});
  return own;
}

Result<CommonKeys> TakeCommonKeys(ProviderParams& params) {
  CommonKeys keys;
  keys.name_tag = params.Take("name_tag").value_or("");
  auto scheme = params.TakeValue("scheme");
  if (!scheme.ok()) return scheme.status();
  auto peer = params.TakeNumber("peer_port");
  if (!peer.ok()) return peer.status();
  auto client = params.TakeNumber("client_port");
  if (!client.ok()) return client.status();
  keys.scheme = *scheme;
  keys.peer_port = *peer;
  keys.client_port = *client;
  return keys;
}

Result<Member> InstanceMember(const std::string& name, const std::string& host, const CommonKeys& keys,
                              std::string_view what) {
  if (Status s = CheckMemberName(name, fmt::format("{}'s name", what)); !s.ok()) return Status::Unavailable(s.message());
  Member m{name,
           {fmt::format("{}://{}:{}", keys.scheme, host, keys.peer_port)},
           {fmt::format("{}://{}:{}", keys.scheme, host, keys.client_port)}};
  for (const auto& url : {m.peer_urls[0], m.client_urls[0]}) {
    if (auto parsed = ParseUrl(url); !parsed.ok()) {
      return Status::Unavailable(fmt::format("{} has an address etcd would refuse: {}", what, parsed.status().message()));
    }
  }
  return m;
}

Status ReadPages(std::string_view what, std::string_view token,
                 const std::function<Result<Page>(const std::string& next)>& read) {
  std::set<std::string> seen;
  std::string next;
  size_t items = 0;
  for (int pages = 1;; ++pages) {
    if (pages > kMaxPages || items > kMaxItemsRead) {
      return Status::Unavailable(
          fmt::format("{} did not end after {} pages and {} items, more than any group holds", what, pages - 1, items));
    }
    auto page = read(next);
    if (!page.ok()) return page.status();
    items += page->items;
    if (page->next.empty()) return Status::Ok();
    if (Status s = CheckOpaque(page->next, 16 * 1024, fmt::format("{}'s {}", what, token)); !s.ok()) return s;
    if (!seen.insert(page->next).second) return Status::Unavailable(fmt::format("{}: a {} came round again", what, token));
    next = std::move(page->next);
  }
}

}  // namespace quorate::cloud
