#include "cli/output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/planner.h"
#include "core/table.h"
#include "quorate/duration.h"

namespace quorate {
namespace {

std::string Joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ",")); }

// A line of JSON, flushed: a script reading the output sees each as it happens.
void PrintJsonLine(std::ostream& out, const nlohmann::ordered_json& line) {
  out << JsonText(line) << "\n" << std::flush;
}

std::string MembersJson(const MemberSet& set, const SizeSource* size,
                        const std::vector<std::optional<VersionAnswer>>* versions) {
  nlohmann::json members = nlohmann::json::array();
  std::optional<EtcdVersion> cluster;
  for (size_t i = 0; i < set.members().size(); ++i) {
    const Member& m = set.members()[i];
    members.push_back(
        {{"id", IdToHex(set.IdOf(m))}, {"name", m.name}, {"peerURLs", m.peer_urls}, {"clientURLs", m.client_urls}});
    if (versions == nullptr) continue;
    const auto& answer = versions->at(i);
    members.back()["etcdVersion"] = answer ? nlohmann::json(answer->server.ToString()) : nlohmann::json();
    if (answer && answer->cluster && (!cluster || *answer->cluster > *cluster)) cluster = answer->cluster;
  }
  nlohmann::json doc = {{"clusterID", IdToHex(set.cluster_id())}, {"token", set.token()}, {"members", members}};
  if (size != nullptr) {
    doc["clusterSize"] = size->size;
    doc["clusterSizeFrom"] = size->from;
  }
  if (versions != nullptr) doc["clusterVersion"] = cluster ? nlohmann::json(cluster->ToString()) : nlohmann::json();
  return JsonText(doc, 2) + "\n";
}

}  // namespace

std::string FormatDiscovered(const MemberSet& set, OutputFormat format, const SizeSource* size,
                             const std::vector<std::optional<VersionAnswer>>* versions) {
  if (format == OutputFormat::kJson) return MembersJson(set, size, versions);
  const std::string size_line =
      size == nullptr ? "" : fmt::format("cluster size {}, from {}\n", size->size, size->from);
  if (format == OutputFormat::kTable) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : set.members()) {
      rows.push_back({IdToHex(set.IdOf(m)), m.name, Joined(m.peer_urls), Joined(m.client_urls)});
    }
    return fmt::format("cluster {} (token {}, {} members)\n", IdToHex(set.cluster_id()), set.token(), set.size()) +
           size_line + RenderTable({"ID", "NAME", "PEER ADDRS", "CLIENT ADDRS"}, rows);
  }
  std::string out =
      fmt::format("cluster {}, token {}, {} members\n", IdToHex(set.cluster_id()), set.token(), set.size()) +
      size_line;
  for (const auto& m : set.members()) {
    out += fmt::format("{}, {}, {}, {}\n", IdToHex(set.IdOf(m)), m.name, Joined(m.peer_urls), Joined(m.client_urls));
  }
  return out;
}

std::string FormatInitOutcome(const InitOutcome& o, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::json j = {{"decision", ActionName(o.decision.action)},
                        {"reason", o.decision.reason},
                        {"name", o.self.name},
                        {"memberID", IdToHex(o.member_id)},
                        {"clusterID", IdToHex(o.cluster_id)},
                        {"initialCluster", o.initial_cluster},
                        {"initialClusterState", o.decision.initial_cluster_state},
                        {"bucket", o.bucket_path},
                        {"etcdConfig", o.etcd_config_path},
                        {"etcdEnv", o.etcd_env_path}};
    return JsonText(j) + "\n";
  }
  return fmt::format(
      "decision: {}\nreason: {}\nmember: {} ({}) in cluster {}\ninitial cluster ({}): {}\nwrote: {} {} {}\n"
      "start etcd with: etcd --config-file {}\n",
      ActionName(o.decision.action), o.decision.reason, o.self.name, IdToHex(o.member_id), IdToHex(o.cluster_id),
      o.decision.initial_cluster_state, o.initial_cluster, o.bucket_path, o.etcd_config_path, o.etcd_env_path,
      o.etcd_config_path);
}

std::string FormatMemberList(const MemberListing& listing, OutputFormat format,
                             const std::vector<std::optional<WallTime>>* peer_cert_not_after) {
  auto expiry = [&](size_t i) -> std::optional<WallTime> {
    if (peer_cert_not_after == nullptr || i >= peer_cert_not_after->size()) return std::nullopt;
    return (*peer_cert_not_after)[i];
  };
  if (format == OutputFormat::kJson) {
    // Keys in etcdctl's order, for a reader comparing the two.
    nlohmann::ordered_json members = nlohmann::ordered_json::array();
    for (size_t i = 0; i < listing.members.size(); ++i) {
      const auto& m = listing.members[i];
      members.push_back({{"id", IdToHex(m.id)},
                         {"name", m.name},
                         {"peerURLs", m.peer_urls},
                         {"clientURLs", m.client_urls},
                         {"isLearner", m.is_learner}});
      if (peer_cert_not_after != nullptr) {
        auto t = expiry(i);
        members.back()["peerCertNotAfter"] = t ? nlohmann::ordered_json(FormatUtcTime(*t)) : nullptr;
      }
    }
    return JsonText(nlohmann::ordered_json{{"clusterID", IdToHex(listing.cluster_id)}, {"members", members}}, 2) + "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < listing.members.size(); ++i) {
    const auto& m = listing.members[i];
    rows.push_back({IdToHex(m.id), m.started() ? "started" : "unstarted", m.name, Joined(m.peer_urls),
                    Joined(m.client_urls), m.is_learner ? "true" : "false"});
    if (peer_cert_not_after != nullptr) rows.back().push_back(expiry(i) ? FormatUtcTime(*expiry(i)) : "-");
  }
  if (format == OutputFormat::kTable) {
    std::vector<std::string> header = {"ID", "STATUS", "NAME", "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER"};
    if (peer_cert_not_after != nullptr) header.push_back("PEER CERT NOT AFTER");
    return RenderTable(header, rows);
  }
  std::string out;
  for (const auto& r : rows) out += fmt::format("{}\n", fmt::join(r, ", "));
  return out;
}

std::string FormatMaintenance(const MaintenanceLook& look, OutputFormat format) {
  const MaintenanceDecision& d = look.decision;
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json members = nlohmann::ordered_json::array();
    for (const auto& m : look.facts.members) {
      members.push_back({{"id", IdToHex(m.id)},
                         {"name", m.name},
                         {"answered", m.answered},
                         {"isLearner", m.is_learner},
                         {"isLeader", m.id == look.facts.leader},
                         {"dbSize", m.db_size},
                         {"dbSizeInUse", m.db_size_in_use},
                         {"alarms", nlohmann::ordered_json::array()}});
      if (m.nospace) members.back()["alarms"].push_back("NOSPACE");
      if (m.corrupt) members.back()["alarms"].push_back("CORRUPT");
    }
    nlohmann::ordered_json decision{
        {"action", MaintenanceActionName(d.action)}, {"rule", d.rule}, {"reason", d.reason}};
    if (d.action == MaintenanceAction::kDefragment || d.action == MaintenanceAction::kRemoveLearner ||
        d.action == MaintenanceAction::kRemoveMember) {
      decision["member"] = IdToHex(d.member);
    }
    if (d.action == MaintenanceAction::kCompact) decision["revision"] = d.revision;
    return JsonText(
               nlohmann::ordered_json{{"revision", look.facts.revision}, {"members", members}, {"decision", decision}},
               2) +
           "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : look.facts.members) {
    std::vector<std::string> alarms;
    if (m.nospace) alarms.push_back("NOSPACE");
    if (m.corrupt) alarms.push_back("CORRUPT");
    int64_t free = m.db_size > m.db_size_in_use ? m.db_size - m.db_size_in_use : 0;
    rows.push_back({IdToHex(m.id), m.name, m.answered ? "yes" : "no",
                    m.id == look.facts.leader ? "leader" : (m.is_learner ? "learner" : "follower"),
                    std::to_string(m.db_size), std::to_string(m.db_size_in_use),
                    m.db_size > 0 ? std::to_string(free * 100 / m.db_size) + "%" : "-", Joined(alarms)});
  }
  std::string out;
  if (format == OutputFormat::kTable) {
    out = RenderTable({"ID", "NAME", "ANSWERS", "ROLE", "DB SIZE", "IN USE", "FREE", "ALARMS"}, rows);
  } else {
    for (const auto& r : rows) out += fmt::format("{}\n", fmt::join(r, ", "));
  }
  return out + fmt::format("now: {} (rule {}): {}\n", MaintenanceActionName(d.action), d.rule, d.reason);
}

std::string FormatVersions(std::string_view build_commit, const std::string& etcd_version, const std::string& etcd_path,
                           const std::string& cluster_version, const std::string& cluster_source, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::json doc{{"quorate", QUORATE_VERSION},
                       {"commit", build_commit},
                       {"etcd", etcd_version},
                       {"etcdPath", etcd_path},
                       {"cluster", cluster_version.empty() ? nlohmann::json() : nlohmann::json(cluster_version)},
                       {"clusterSource", cluster_source}};
    return JsonText(doc) + "\n";
  }
  return fmt::format("quorate version: {}\nquorate commit: {}\netcd version: {} ({})\ncluster version: {} ({})\n",
                     QUORATE_VERSION, build_commit, etcd_version, etcd_path,
                     cluster_version.empty() ? "unknown" : cluster_version, cluster_source);
}

namespace {

// What only quorate's metadata records, null (JSON) or "-" (text) for a backup without it.
nlohmann::ordered_json Recorded(const BackupMeta& m, nlohmann::ordered_json value) {
  return m.quorate ? value : nlohmann::ordered_json();
}
std::string RecordedText(const BackupMeta& m, const std::string& text) { return m.quorate ? text : "-"; }

nlohmann::ordered_json BackupJson(const BackupMeta& m) {
  return {{"url", m.url},
          {"created", BackupTimeName(m.created)},
          {"metadata", m.quorate ? "quorate" : "etcd-manager"},
          {"clusterID", Recorded(m, IdToHex(m.cluster_id))},
          {"memberID", Recorded(m, IdToHex(m.member_id))},
          {"revision", Recorded(m, m.revision)},
          {"etcdVersion", m.etcd_version},
          {"memberCount", m.member_count},
          {"dbBytes", Recorded(m, m.db_bytes)},
          {"storedBytes", Recorded(m, m.stored_bytes)},
          {"sha256", Recorded(m, m.sha256)},
          {"compression", CompressionName(m.compression)},
          {"keyID", m.key_id},
          {"source", Recorded(m, m.source)}};
}

std::vector<std::string> BackupRow(const BackupMeta& m) {
  return {BackupTimeName(m.created),
          RecordedText(m, IdToHex(m.cluster_id)),
          RecordedText(m, std::to_string(m.revision)),
          RecordedText(m, std::to_string(m.db_bytes)),
          RecordedText(m, std::to_string(m.stored_bytes)),
          m.key_id.empty() ? "-" : m.key_id,
          m.url};
}

const std::vector<std::string> kBackupHeaders = {"CREATED", "CLUSTER ID", "REVISION", "DB BYTES",
                                                 "STORED BYTES", "KEY ID", "URL"};

// The checks `backup verify` cannot make on a backup without quorate's metadata.
const std::vector<std::string> kUncheckedWithoutQuorateMeta = {
    "the database's size and sha256 against its metadata (etcd-manager's records neither)",
    "its cluster ID, member ID and revision (not recorded)"};

}  // namespace

std::string FormatBackup(const BackupMeta& m, OutputFormat format) {
  if (format == OutputFormat::kJson) return JsonText(BackupJson(m), 2) + "\n";
  if (format == OutputFormat::kTable) return RenderTable(kBackupHeaders, {BackupRow(m)});
  if (!m.quorate) {
    return fmt::format("backup without quorate's metadata (etcd-manager's) of etcd {}, {} members ({})\n{}\n",
                       m.etcd_version.empty() ? "of unknown version" : m.etcd_version, m.member_count,
                       CompressionName(m.compression), m.url);
  }
  return fmt::format("backup of cluster {} at revision {}: {} bytes of database (sha256 {}), {} stored ({}{})\n{}\n",
                     IdToHex(m.cluster_id), m.revision, m.db_bytes, m.sha256, m.stored_bytes,
                     CompressionName(m.compression), m.key_id.empty() ? "" : ", encrypted with key " + m.key_id, m.url);
}

std::string FormatVerifiedBackup(const BackupMeta& m, const BackupRead& read, OutputFormat format) {
  if (m.quorate) return FormatBackup(m, format);
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json doc = BackupJson(m);
    doc["dbBytes"] = read.db_bytes;
    doc["sha256"] = read.sha256;
    doc["notChecked"] = kUncheckedWithoutQuorateMeta;
    return JsonText(doc, 2) + "\n";
  }
  std::vector<std::string> row = BackupRow(m);
  row[3] = std::to_string(read.db_bytes);
  const std::string unchecked = fmt::format("not checked: {}", fmt::join(kUncheckedWithoutQuorateMeta, "; "));
  if (format == OutputFormat::kTable) return RenderTable(kBackupHeaders, {row}) + unchecked + "\n";
  return fmt::format("backup without quorate's metadata (etcd-manager's): {} bytes of database (sha256 {}) as etcd's "
                     "own hash confirms; {}\n{}\n",
                     read.db_bytes, read.sha256, unchecked, m.url);
}

std::string FormatBackupList(const std::vector<BackupMeta>& backups, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& b : backups) list.push_back(BackupJson(b));
    return JsonText(nlohmann::ordered_json{{"backups", list}}, 2) + "\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : backups) rows.push_back(BackupRow(b));
  if (format == OutputFormat::kTable) return RenderTable(kBackupHeaders, rows);
  std::string out;
  for (const auto& r : rows) out += fmt::format("{}\n", fmt::join(r, ", "));
  return out;
}

void RemovalPrinter::Handled(ClusterId cluster, const ClusterMember& m, Outcome outcome) {
  bool removed = outcome == Outcome::kRemoved;
  if (format_ == OutputFormat::kJson) {
    PrintJsonLine(out_, {{"id", IdToHex(m.id)},
                         {"name", m.name},
                         {"clusterID", IdToHex(cluster)},
                         {"result", removed ? "removed" : "already removed"}});
    return;
  }
  std::string name = m.name.empty() ? "" : fmt::format(" ({})", m.name);
  out_ << fmt::format("Member {}{} {} cluster {}\n", IdToHex(m.id), name,
                      removed ? "removed from" : "was already removed from", IdToHex(cluster))
       << std::flush;
}

void RemovalPrinter::NotAMember(ClusterId cluster, const std::string& arg) {
  if (format_ == OutputFormat::kJson) {
    PrintJsonLine(out_, {{"member", arg}, {"clusterID", IdToHex(cluster)}, {"result", "not a member"}});
    return;
  }
  out_ << fmt::format("{}: not a member of cluster {}; nothing to remove\n", arg, IdToHex(cluster)) << std::flush;
}

}  // namespace quorate
