#include "core/etcd_version.h"

#include <charconv>

#include <fmt/format.h>

#include "quorate/text.h"

namespace quorate {
namespace {

// A version part: 1 to 4 digits, so no text from outside overflows an int or reads as a version.
bool TakeNumber(std::string_view& text, int* out) {
  size_t n = 0;
  while (n < text.size() && n < 5 && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == 0 || n > 4) return false;
  std::from_chars(text.data(), text.data() + n, *out);
  text.remove_prefix(n);
  return true;
}

// The first 3.5 that a 3.6 member may join or replace (etcd's upgrade_3_6 guide).
constexpr EtcdVersion kFirst35For36{3, 5, 32};

bool SameMinor(const EtcdVersion& a, const EtcdVersion& b) { return a.major == b.major && a.minor == b.minor; }

// How many minor versions `newer` is ahead of `older`; a different major counts as far apart.
int MinorsAhead(const EtcdVersion& newer, const EtcdVersion& older) {
  if (newer.major != older.major) return newer.major > older.major ? 100 : -100;
  return newer.minor - older.minor;
}

}  // namespace

std::string EtcdVersion::ToString() const { return fmt::format("{}.{}.{}", major, minor, patch); }
std::string EtcdVersion::Minor() const { return fmt::format("{}.{}", major, minor); }

Result<EtcdVersion> ParseEtcdVersion(std::string_view text, std::string_view source) {
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == 'v') rest.remove_prefix(1);
  EtcdVersion v;
  bool ok = TakeNumber(rest, &v.major) && !rest.empty() && rest.front() == '.';
  if (ok) rest.remove_prefix(1);
  ok = ok && TakeNumber(rest, &v.minor) && !rest.empty() && rest.front() == '.';
  if (ok) rest.remove_prefix(1);
  ok = ok && TakeNumber(rest, &v.patch) && (rest.empty() || rest.front() == '-' || rest.front() == '+');
  if (!ok) {
    return Status::InvalidArgument(
        fmt::format("{}: '{}' is not an etcd version (MAJOR.MINOR.PATCH)", source, Printable(text, 64)));
  }
  return v;
}

namespace {
// etcd sets its cluster version to 3.0 when it bootstraps and raises it once the leader has heard from
// every member: a 3.0 from etcd 3.4 or later is that placeholder, not a version members run.
bool Decided(const std::optional<EtcdVersion>& cluster) {
  return cluster && !(cluster->major == 3 && cluster->minor == 0);
}
}  // namespace

std::optional<EtcdVersion> ClusterVersion(const VersionFacts& facts) {
  std::optional<EtcdVersion> highest;
  if (Decided(facts.recorded_cluster)) highest = facts.recorded_cluster;
  for (const auto& p : facts.peers) {
    if (Decided(p.cluster) && (!highest || *p.cluster > *highest)) highest = p.cluster;
  }
  return highest;
}

std::string VersionRefusal(const VersionFacts& facts) {
  if (!facts.binary) return {};
  const EtcdVersion& binary = *facts.binary;
  const std::string ours = fmt::format("etcd {} (--etcd)", binary.ToString());
  if (auto cluster = ClusterVersion(facts)) {
    if (MinorsAhead(binary, *cluster) < 0) {
      return fmt::format("{} is older than the cluster version {}, which etcd never goes back from: run etcd {} "
                         "or later here",
                         ours, cluster->Minor(), cluster->Minor());
    }
    if (MinorsAhead(binary, *cluster) > 1) {
      return fmt::format("{} is more than one minor version ahead of the cluster version {}: etcd upgrades one "
                         "minor version at a time, so upgrade every member to etcd {}.{} first",
                         ours, cluster->Minor(), cluster->major, cluster->minor + 1);
    }
  }
  for (const auto& p : facts.peers) {
    if (MinorsAhead(binary, p.server) > 1) {
      return fmt::format("{} is more than one minor version ahead of {}, which runs etcd {}: etcd upgrades one "
                         "minor version at a time, so upgrade {} to etcd {}.{} first",
                         ours, p.name, p.server.ToString(), p.name, p.server.major, p.server.minor + 1);
    }
    if (MinorsAhead(binary, p.server) < -1) {
      return fmt::format("{} is more than one minor version behind {}, which runs etcd {}: run etcd {}.{} or "
                         "later here",
                         ours, p.name, p.server.ToString(), p.server.major, p.server.minor - 1);
    }
    if (MinorsAhead(binary, p.server) == 1 && SameMinor(p.server, {3, 5, 0}) && p.server < kFirst35For36) {
      return fmt::format("{} cannot join {}, which runs etcd {}: etcd 3.6 needs every 3.5 member at {} or later "
                         "first, so upgrade {} to etcd {} before moving any member to 3.6",
                         ours, p.name, p.server.ToString(), kFirst35For36.ToString(), p.name,
                         kFirst35For36.ToString());
    }
  }
  return {};
}

}  // namespace quorate
