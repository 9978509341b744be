// Backups of a cluster in a store (a directory or S3), laid out as etcd-manager documents it so that
// kOps users' old backups read here: backups/etcd/<cluster>/<RFC 3339 time>/ holding etcd.backup.gz
// (etcd.backup.zst with zstd, ".aes" appended when encrypted), _quorate_backup.json with what a
// restore checks (cluster ID, revision, sha256 of the database, compression, key ID) and
// _etcd_backup.meta with etcd-manager's fields only (etcdVersion, timestamp, clusterSpec), so that
// etcd-manager restores a gzip backup without a key. The object is streamed first and
// _etcd_backup.meta written last: a folder without it is no backup for either tool and is never
// listed, so a save cut short (a crash, a leader change, a store error) leaves nothing visible.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backup/codec.h"
#include "quorate/member.h"
#include "etcd/etcd_client.h"
#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

using SystemTime = std::chrono::system_clock::time_point;

// etcd-manager's metadata: exactly its fields, since etcd-manager reads it strictly (an unknown
// field fails its restore). Written last, it commits a backup for both tools.
inline constexpr const char* kBackupMetaName = "_etcd_backup.meta";
// quorate's own metadata (what a restore checks), beside it and written before it. quorate before
// this file kept these fields under "quorate" in _etcd_backup.meta; such backups still read.
inline constexpr const char* kQuorateMetaName = "_quorate_backup.json";

struct BackupMeta {
  std::string folder;  // store key: backups/etcd/<cluster>/<time>
  std::string url;     // the backup's URL, as --restore-from takes it
  SystemTime created{};
  std::string etcd_version;
  int member_count = 0;
  // What quorate adds; `quorate` is false for a backup without quorate's metadata (etcd-manager's).
  bool quorate = false;
  std::string object;  // the snapshot's name in the folder
  ClusterId cluster_id = 0;
  MemberId member_id = 0;  // the member the snapshot came from
  int64_t revision = 0;
  uint64_t db_bytes = 0;
  uint64_t stored_bytes = 0;
  std::string sha256;  // of the database, hex
  Compression compression = Compression::kGzip;
  std::string key_id;  // empty: not encrypted
  std::string source;  // "snapshot of <endpoint>" or "data dir of member <name>"
};

// The two metadata files' JSON, and back. `quorate_file` is nullopt where the folder has none. DataLoss
// naming the file and what is wrong with it, never quoting its content.
struct BackupMetaFiles {
  std::string etcd_manager;  // _etcd_backup.meta
  std::string quorate;       // _quorate_backup.json
};
BackupMetaFiles EncodeBackupMeta(const BackupMeta& meta);
Result<BackupMeta> DecodeBackupMeta(const std::string& etcd_manager_file,
                                    const std::optional<std::string>& quorate_file = std::nullopt);

// "<store URL>/backups/etcd/<cluster>/<time>" (an S3 URL keeps its ?parameters at the end).
struct BackupLocation {
  std::string store_url;
  std::string folder;
};
Result<BackupLocation> ParseBackupUrl(const std::string& url);
std::string BackupUrl(const std::string& store_url, const std::string& folder);
// The folder name of a backup taken at `t`: RFC 3339 UTC to the second.
std::string BackupTimeName(SystemTime t);

struct SaveOptions {
  std::string cluster = "main";
  Compression compression = Compression::kGzip;
  std::optional<BackupKey> key;  // encrypt with it
  int member_count = 0;
  SystemTime now{};
  // Asked after the snapshot is stored and checked, before the metadata commits it: an error (say,
  // this node is no longer the leader) drops the backup.
  std::function<Status()> before_commit;
};

// Produces etcd's snapshot stream into a sink: StreamSnapshot for a real member.
using SnapshotSource = std::function<Result<SnapshotHeader>(const SnapshotSink& sink)>;

// Streams one snapshot through the check, compression and encryption into `store`, then commits it.
Result<BackupMeta> SaveBackup(Vfs& store, const std::string& store_url, const SnapshotSource& source,
                              const SaveOptions& options);

// The committed backups of `cluster` (folders holding _etcd_backup.meta: quorate's and etcd-manager's),
// oldest first. A metadata file that cannot be read is left out with a warning in the log.
Result<std::vector<BackupMeta>> ListBackups(Vfs& store, const std::string& store_url, const std::string& cluster);
Result<BackupMeta> ReadBackup(Vfs& store, const std::string& store_url, const std::string& folder);

// A backup without quorate's metadata (etcd-manager's) declares no size: its database is read up to
// the largest backend quota etcd suggests (8 GiB, its MaxQuotaBytes) and refused beyond.
inline constexpr uint64_t kMaxUndeclaredDbBytes = uint64_t{8} << 30;
// The most bytes of etcd's stream (database, then its hash) reading `meta` may give: what its
// metadata declares, else kMaxUndeclaredDbBytes. A restore checks its free space against it.
uint64_t SnapshotLimit(const BackupMeta& meta);

// Reads the whole backup back through decryption, decompression and etcd's hash, and checks the
// metadata's sha256 and size; `out` (may be null) receives the snapshot as etcd streamed it. The
// key is chosen by the backup's key ID among `keys`: none fitting is InvalidArgument naming the ID.
// DataLoss for changed or cut bytes, and as soon as the stream passes SnapshotLimit (a
// decompression bomb): `out` never receives more than that. Nothing `out` received may be used
// unless this returns OK.
struct BackupRead {
  uint64_t db_bytes = 0;
  std::string sha256;  // of the database, as etcd's appended hash confirmed it
};
Status ReadBackupThrough(Vfs& store, const BackupMeta& meta, const std::vector<BackupKey>& keys, Sink* out,
                         BackupRead* read = nullptr);

// The key for `meta` among `keys`, or InvalidArgument saying which key ID it needs.
Result<BackupKey> KeyFor(const BackupMeta& meta, const std::vector<BackupKey>& keys);

// What saves cut short left of `cluster`'s backups, begun before `before`: folders without metadata
// (never listed, never a backup) and uploads never committed. Removed; returns the folders and
// the count of uploads. `before` must lie further back than the longest save takes.
struct AbandonedBackups {
  std::vector<std::string> folders;
  int uploads = 0;
};
Result<AbandonedBackups> RemoveAbandonedBackups(Vfs& store, const std::string& cluster, SystemTime before);

// Removes a committed backup: etcd-manager's metadata first, so it is never listed half removed.
Status RemoveBackup(Vfs& store, const BackupMeta& meta);

}  // namespace quorate
