// Everything a command prints on stdout, in each -w format (simple, table, json): one file, so the
// shapes stay alike (IDs as hex, "clusterID", etcdctl's layouts where etcdctl has one). Every JSON
// document goes through JsonText (core/json.h), which cannot throw.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "backup/backup.h"
#include "core/config.h"
#include "etcd/etcd_client.h"
#include "node/init.h"
#include "node/maintenance.h"
#include "node/member_remove.h"
#include "quorate/member.h"
#include "tls/cert.h"

namespace quorate {

// The size the cluster is to have, and what says so: --cluster-size, the provider's group (its
// Describe()), or the members found.
struct SizeSource {
  size_t size = 0;
  std::string from;
};

// `discover` and `cluster-init`: the members with the IDs etcd will assign.
// With `size`, -w json adds "clusterSize" and "clusterSizeFrom", the others a line saying both.
// With `versions` (in the members' order, as AskVersions gives them), -w json adds each member's
// etcdVersion (null where nothing answered) and the clusterVersion the highest of them says.
std::string FormatDiscovered(const MemberSet& set, OutputFormat format, const SizeSource* size = nullptr,
                             const std::vector<std::optional<VersionAnswer>>* versions = nullptr);

// `init`: the decision, its reason and the files written.
std::string FormatInitOutcome(const InitOutcome& outcome, OutputFormat format);

// `member list` in etcdctl 3.4's shapes: simple and table as etcdctl prints them; json with IDs as
// hex strings and "clusterID", as quorate's other JSON output. With `peer_cert_not_after` (in the
// members' order; nullopt where no certificate was read), one more column, "PEER CERT NOT AFTER"
// (json: "peerCertNotAfter", null where none), as an RFC 3339 UTC time or "-".
std::string FormatMemberList(const MemberListing& listing, OutputFormat format,
                             const std::vector<std::optional<WallTime>>* peer_cert_not_after = nullptr);

// `version`: quorate's and the commit it was built from, and that of the etcd binary at `etcd_path`
// ("not found" when it gave none). `cluster_version` empty when unknown; `cluster_source` says where
// it came from, or why unknown.
std::string FormatVersions(std::string_view build_commit, const std::string& etcd_version, const std::string& etcd_path,
                           const std::string& cluster_version, const std::string& cluster_source, OutputFormat format);

// `backup save` and `backup verify`: one backup. With simple, the backup's URL alone on the last
// line, so a script passes it on to --restore-from.
std::string FormatBackup(const BackupMeta& meta, OutputFormat format);
// `backup list`: oldest first. What a backup without quorate's metadata (etcd-manager's) does not
// record is "-" in a table and null in JSON, never a made-up 0.
std::string FormatBackupList(const std::vector<BackupMeta>& backups, OutputFormat format);
// `backup verify`: the backup read whole (`read`: what etcd's own hash confirmed), and the checks
// its metadata left out: for one without quorate's, its declared size and sha256 and its cluster.
std::string FormatVerifiedBackup(const BackupMeta& meta, const BackupRead& read, OutputFormat format);

// `maintenance status`: every member's database as the leader's maintenance sees it, and what it
// would do now and why.
std::string FormatMaintenance(const MaintenanceLook& look, OutputFormat format);

// `member remove`: one line per argument, flushed as it is handled (etcdctl's "Member <id> removed
// from cluster <cluster id>", with the name; JSON lines with -w json).
class RemovalPrinter : public RemovalReport {
 public:
  RemovalPrinter(OutputFormat format, std::ostream& out) : format_(format), out_(out) {}
  void Handled(ClusterId cluster, const ClusterMember& member, Outcome outcome) override;
  void NotAMember(ClusterId cluster, const std::string& arg) override;

 private:
  OutputFormat format_;
  std::ostream& out_;
};

}  // namespace quorate
