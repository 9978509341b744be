// Everything a command is told, as the jobs read it. The CLI fills it from flags, ETCD_*/QUORATE_*
// environment variables and a YAML --config file and validates every value (cli/options.h), so the
// rest of quorate never sees malformed input.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quorate/tls.h"

namespace quorate {

enum class OutputFormat { kTable, kJson, kSimple };

struct Config {
  // etcd's own flags, with etcd's names and defaults.
  std::string name;
  std::string data_dir;
  std::vector<std::string> initial_advertise_peer_urls;
  std::vector<std::string> advertise_client_urls;
  std::vector<std::string> listen_peer_urls;
  std::vector<std::string> listen_client_urls;
  std::string initial_cluster;
  std::string initial_cluster_token;
  std::string discovery_srv;
  std::string discovery_srv_name;
  TlsFiles client_tls;  // --cert-file, --key-file, --trusted-ca-file, --client-cert-auth
  TlsFiles peer_tls;    // --peer-cert-file, ...

  // quorate's own.
  std::string discovery;  // provider spec
  std::string bucket;     // store URL of a sealed member bucket (cluster-init writes, init reads)
  std::optional<size_t> cluster_size;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string state_dir;  // default <data-dir>/quorate
  std::string agent_listen;
  int agent_port = 2382;
  std::string status_listen;
  std::string etcd_path;
  std::string log_format;  // text | json
  std::string log_level;
  OutputFormat output = OutputFormat::kSimple;

  // etcdctl-like client flags for commands that talk to a running cluster.
  std::vector<std::string> endpoints;
  TlsFiles etcdctl_tls;  // --cacert, --cert, --key
  bool ignore_not_found = false;  // member remove: skip a MEMBER the cluster does not list
  int peer_https_port = 0;        // tls to-https: the port every member's peer https URL gets

  // Backups and restore (docs/DESIGN.md §11).
  std::string backup_to;                      // store URL: file:///dir, s3://, gs:// or azblob://
  std::vector<std::string> backup_key_files;  // the first encrypts; any reads a backup of its key ID
  std::string backup_compression = "gzip";
  std::string backup_cluster = "main";        // backups/etcd/<cluster>/ in the store
  std::chrono::milliseconds backup_schedule{std::chrono::minutes(30)};  // run: 0 takes none
  std::chrono::milliseconds backup_timeout{std::chrono::minutes(10)};
  int backup_keep_hourly_days = 7;
  int backup_keep_daily_days = 90;
  std::string restore_from;        // run: a backup URL to restore a new cluster from
  std::string from_member;         // recover: the surviving member whose data seeds the new cluster
  bool force = false;              // restore/recover even while the old cluster has a live quorum

  // Maintenance by the leader's quorate (docs/DESIGN.md §12).
  bool maintenance = true;
  int64_t defrag_min_bytes = int64_t{100} << 20;
  int defrag_min_percent = 45;
  std::chrono::milliseconds maintenance_pause{std::chrono::seconds(10)};
  std::chrono::milliseconds learner_deadline{std::chrono::minutes(10)};  // rule M6; 0: never
  bool scale_in = true;                                                 // rule M7
  int64_t quota_backend_bytes = 0;  // etcd's --quota-backend-bytes; 0: etcd's default
  int64_t compaction_keep_revisions = 0;

  // Certificates (docs/DESIGN.md §13): with a CA's certificate and key quorate issues and renews the
  // leaves named in tls_leaves ("peer": --peer-cert-file/--peer-key-file, "client": --cert-file/
  // --key-file); without, it writes no certificate and only watches what is there (cert-manager's).
  TlsFiles tls_ca;                      // --tls-ca-cert-file, --tls-ca-key-file
  std::vector<std::string> tls_leaves;  // empty: every leaf whose files are given
  // Names every issued leaf carries besides its URLs' hosts (a client Service, a VIP, the address
  // peers connect from): IPs and DNS names.
  std::vector<std::string> tls_extra_names;
  std::chrono::seconds tls_leaf_lifetime{std::chrono::hours(24 * 90)};
  std::chrono::seconds tls_expiry_warning{std::chrono::hours(24 * 7)};
};

}  // namespace quorate
