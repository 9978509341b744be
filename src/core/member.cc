#include "quorate/member.h"

#include <arpa/inet.h>
#include <openssl/sha.h>

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "quorate/text.h"

namespace quorate {
namespace {

uint64_t FirstEightBytesBigEndian(const unsigned char* digest) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return v;
}

bool IsHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

Result<PeerUrl> ParseUrl(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("bad URL '{}': {} (want scheme://host:port)", Printable(text), why));
  };
  PeerUrl url;
  url.text = std::string(text);
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) return bad("no scheme");
  url.scheme = std::string(text.substr(0, sep));
  if (url.scheme != "http" && url.scheme != "https") return bad("scheme must be http or https");
  std::string_view rest = text.substr(sep + 3);
  if (rest.empty()) return bad("no host");
  std::string_view port_text;
  if (rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in IPv6 host");
    url.host = std::string(rest.substr(1, close - 1));
    // Brackets hold an IPv6 literal and nothing else; etcd's URL parser takes nothing else either.
    unsigned char v6[16];
    if (inet_pton(AF_INET6, url.host.c_str(), v6) != 1) return bad("the host in brackets is not an IPv6 address");
    rest = rest.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("no port");
    port_text = rest.substr(1);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    url.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
    if (url.host.empty()) return bad("no host");
    if (!std::all_of(url.host.begin(), url.host.end(), IsHostChar)) return bad("bad character in host");
  }
  if (port_text.empty()) return bad("no port");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size()) {
    return bad("port must be a number, with no path, query or trailing slash");
  }
  if (port == 0 || port > 65535) return bad("port out of range 1-65535");
  url.port = static_cast<uint16_t>(port);
  return url;
}

Result<std::vector<std::string>> ParseUrlList(std::string_view text, std::string_view what) {
  std::vector<std::string> urls;
  if (text.empty()) return Status::InvalidArgument(fmt::format("{}: empty URL list", what));
  for (std::string_view part : Split(text, ',')) {
    auto url = ParseUrl(part);
    if (!url.ok()) return url.status().Prefixed(std::string(what));
    urls.push_back(url->text);
  }
  return urls;
}

MemberId ComputeMemberId(const std::vector<std::string>& peer_urls, std::string_view token) {
  std::vector<std::string> sorted = peer_urls;
  std::sort(sorted.begin(), sorted.end());
  std::string input;
  for (const auto& u : sorted) input += u;
  input += token;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return FirstEightBytesBigEndian(digest);
}

ClusterId ComputeClusterId(std::vector<MemberId> member_ids) {
  std::sort(member_ids.begin(), member_ids.end());
  std::string input;
  for (MemberId id : member_ids) {
    for (int shift = 56; shift >= 0; shift -= 8) input.push_back(static_cast<char>((id >> shift) & 0xff));
  }
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return FirstEightBytesBigEndian(digest);
}

std::string IdToHex(uint64_t id) { return fmt::format("{:x}", id); }

Result<uint64_t> IdFromHex(std::string_view hex) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
  if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size()) {
    return Status::InvalidArgument(fmt::format("'{}' is not a hex member or cluster ID", hex));
  }
  return v;
}

Result<MemberSet> MemberSet::Create(std::vector<Member> members, std::string token) {
  if (token.empty()) return Status::InvalidArgument("initial cluster token is empty");
  if (members.empty()) return Status::InvalidArgument("no members");
  std::set<std::string> names;
  std::set<std::string> urls;
  std::set<MemberId> ids;
  for (auto& m : members) {
    if (m.name.empty()) return Status::InvalidArgument("a member has an empty name");
    if (Status s = CheckMemberName(m.name, "member name"); !s.ok()) return s;
    if (!names.insert(m.name).second) {
      return Status::InvalidArgument(fmt::format("member name '{}' appears twice", m.name));
    }
    if (m.peer_urls.empty()) {
      return Status::InvalidArgument(fmt::format("member '{}' has no peer URL", m.name));
    }
    for (const auto& u : m.peer_urls) {
      auto parsed = ParseUrl(u);
      if (!parsed.ok()) return parsed.status().Prefixed(fmt::format("member '{}'", m.name));
      if (!urls.insert(u).second) {
        return Status::InvalidArgument(fmt::format("peer URL {} is claimed by two members", u));
      }
    }
    for (const auto& u : m.client_urls) {
      auto parsed = ParseUrl(u);
      if (!parsed.ok()) return parsed.status().Prefixed(fmt::format("member '{}' client URL", m.name));
    }
    std::sort(m.peer_urls.begin(), m.peer_urls.end());
    if (!ids.insert(ComputeMemberId(m.peer_urls, token)).second) {
      return Status::InvalidArgument(fmt::format("member '{}' has the same ID as another member", m.name));
    }
  }
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.name < b.name; });
  MemberSet set;
  set.members_ = std::move(members);
  set.token_ = std::move(token);
  return set;
}

ClusterId MemberSet::cluster_id() const {
  std::vector<MemberId> ids;
  for (const auto& m : members_) ids.push_back(IdOf(m));
  return ComputeClusterId(std::move(ids));
}

const Member* MemberSet::FindByName(std::string_view name) const {
  for (const auto& m : members_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const Member* MemberSet::FindById(MemberId id) const {
  for (const auto& m : members_) {
    if (IdOf(m) == id) return &m;
  }
  return nullptr;
}

bool SameUrlSet(std::vector<std::string> a, std::vector<std::string> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

bool SharesUrl(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return std::any_of(a.begin(), a.end(),
                     [&](const std::string& u) { return std::find(b.begin(), b.end(), u) != b.end(); });
}

std::string InitialClusterOf(const std::vector<Member>& members) {
  std::string out;
  for (const auto& m : members) {
    for (const auto& u : m.peer_urls) {
      if (!out.empty()) out += ',';
      out += m.name + "=" + u;
    }
  }
  return out;
}

Result<std::vector<Member>> ParseInitialCluster(std::string_view text, std::string_view what) {
  std::vector<Member> members;
  if (text.empty()) return Status::InvalidArgument(fmt::format("{}: empty", what));
  for (std::string_view entry : Split(text, ',')) {
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Status::InvalidArgument(
          fmt::format("{}: entry '{}' is not name=URL", what, Printable(entry)));
    }
    std::string name(entry.substr(0, eq));
    if (Status s = CheckMemberName(name, fmt::format("{}: member name", what)); !s.ok()) return s;
    auto url = ParseUrl(entry.substr(eq + 1));
    if (!url.ok()) return url.status().Prefixed(fmt::format("{}: member '{}'", what, name));
    auto it = std::find_if(members.begin(), members.end(),
                           [&](const Member& m) { return m.name == name; });
    if (it == members.end()) {
      members.push_back(Member{name, {url->text}, {}});
    } else {
      it->peer_urls.push_back(url->text);
    }
  }
  return members;
}

}  // namespace quorate
