#include "backup/backup.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <charconv>
#include <ctime>

#include "core/json.h"
#include "quorate/duration.h"
#include "quorate/json.h"
#include "quorate/log.h"
#include "quorate/text.h"

namespace quorate {
namespace {

using nlohmann::json;

constexpr const char* kRoot = "backups/etcd";
// A metadata file is a few hundred bytes; anything this large was not written by a backup tool.
constexpr size_t kMaxMetaBytes = 64 * 1024;
constexpr size_t kReadPiece = 256 * 1024;

std::string ObjectName(Compression c, bool encrypted) {
  std::string name = c == Compression::kGzip ? "etcd.backup.gz" : "etcd.backup.zst";
  return encrypted ? name + ".aes" : name;
}

Result<SystemTime> ParseTimeName(const std::string& name) {
  const char* rest = nullptr;
  auto when = ParseUtcTimePrefix(name, &rest);
  // etcd-manager's names may carry a counter after the time ("...Z-000001").
  if (!when || *rest != 'Z' || (rest[1] != '\0' && rest[1] != '-')) {
    return Status::DataLoss(fmt::format("'{}' is not an RFC 3339 time", Printable(name, 64)));
  }
  return *when;
}

Result<uint64_t> HexId(const json& doc, const char* field) {
  if (!doc.contains(field)) return uint64_t{0};
  if (!doc[field].is_string()) return Status::DataLoss(fmt::format("{} is not a hex string", field));
  const std::string text = doc[field].get<std::string>();
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Status::DataLoss(fmt::format("{} is not a hex ID", field));
  }
  return id;
}

}  // namespace

std::string BackupTimeName(SystemTime t) { return FormatUtcTime(t); }

BackupMetaFiles EncodeBackupMeta(const BackupMeta& m) {
  json etcd_manager = {
      {"etcdVersion", m.etcd_version},
      {"timestamp", std::chrono::duration_cast<std::chrono::seconds>(m.created.time_since_epoch()).count()},
      {"clusterSpec", {{"memberCount", m.member_count}, {"etcdVersion", m.etcd_version}}}};
  json quorate = {{"format", 1},
                  {"object", m.object},
                  {"clusterID", IdToHex(m.cluster_id)},
                  {"memberID", IdToHex(m.member_id)},
                  {"revision", m.revision},
                  {"dbBytes", m.db_bytes},
                  {"storedBytes", m.stored_bytes},
                  {"sha256", m.sha256},
                  {"compression", CompressionName(m.compression)},
                  {"encryption", m.key_id.empty() ? "none" : "aes-256-gcm"},
                  {"keyID", m.key_id},
                  {"source", m.source}};
  return {JsonText(etcd_manager, 2) + "\n", JsonText(quorate, 2) + "\n"};
}

namespace {

// A metadata file's JSON object. The parser's own messages quote the bytes around a fault, and the
// file may be anything planted in a store: only its name and what is wrong are said.
Result<json> ParseMetaFile(const std::string& text, const char* name) {
  auto parsed = ParseForeignJson(text);
  if (!parsed.ok()) {
    return Status::DataLoss(
        fmt::format("{} is not JSON, or is nested deeper than {} levels", name, kMaxForeignJsonDepth));
  }
  if (!parsed->is_object()) return Status::DataLoss(fmt::format("{} is not a JSON object", name));
  return std::move(*parsed);
}

Status StringField(const json& doc, const char* field, std::string& out) {
  if (!doc.contains(field)) return Status::Ok();
  if (!doc[field].is_string()) return Status::DataLoss(fmt::format("{} is not a string", field));
  out = doc[field].get<std::string>();
  if (!IsPrintable(out)) return Status::DataLoss(fmt::format("{} holds control characters", field));
  return Status::Ok();
}

// Seconds since 1970, a JSON number or, as etcd-manager's protobuf JSON writes an int64, a string of digits.
Status TimestampField(const json& doc, SystemTime& out) {
  if (!doc.contains("timestamp")) return Status::Ok();
  const json& t = doc["timestamp"];
  int64_t seconds = 0;
  if (t.is_number_integer()) {
    seconds = t.get<int64_t>();
  } else if (t.is_string()) {
    const std::string text = t.get<std::string>();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return Status::DataLoss("timestamp is not a number of seconds");
    }
  } else {
    return Status::DataLoss("timestamp is not a number of seconds");
  }
  // Past 2199 (or before 1970) it is no backup's, and nanoseconds would overflow.
  if (seconds < 0 || seconds >= int64_t{7258118400}) {
    return Status::DataLoss("timestamp is not a time between 1970 and 2199");
  }
  out = SystemTime(std::chrono::seconds(seconds));
  return Status::Ok();
}

// quorate's fields: _quorate_backup.json's object, or the "quorate" section of an older _etcd_backup.meta.
Status DecodeQuorateFields(const json& q, BackupMeta& m) {
  m.quorate = true;
  std::string compression, encryption;
  for (auto [field, out] : {std::pair{"object", &m.object}, std::pair{"sha256", &m.sha256},
                            std::pair{"compression", &compression}, std::pair{"encryption", &encryption},
                            std::pair{"keyID", &m.key_id}, std::pair{"source", &m.source}}) {
    if (Status s = StringField(q, field, *out); !s.ok()) return s;
  }
  if (compression != "gzip" && compression != "zstd") return Status::DataLoss("compression is not gzip or zstd");
  m.compression = *ParseCompression(compression);
  if ((encryption == "none") != m.key_id.empty() || (encryption != "none" && encryption != "aes-256-gcm")) {
    return Status::DataLoss(
        "encryption and keyID are not a known pair: none without a key ID, or aes-256-gcm with one");
  }
  if (m.object.empty() || m.object.find('/') != std::string::npos || ValidateKey(m.object).IsInvalidArgument()) {
    return Status::DataLoss("object is not a file name");
  }
  auto cluster = HexId(q, "clusterID");
  if (!cluster.ok()) return cluster.status();
  m.cluster_id = *cluster;
  auto member = HexId(q, "memberID");
  if (!member.ok()) return member.status();
  m.member_id = *member;
  for (auto [field, out] : {std::pair{"dbBytes", &m.db_bytes}, std::pair{"storedBytes", &m.stored_bytes}}) {
    if (q.contains(field) && q[field].is_number_unsigned()) *out = q[field].get<uint64_t>();
  }
  if (q.contains("revision") && q["revision"].is_number_integer()) m.revision = q["revision"].get<int64_t>();
  return Status::Ok();
}

}  // namespace

Result<BackupMeta> DecodeBackupMeta(const std::string& etcd_manager_file,
                                    const std::optional<std::string>& quorate_file) {
  auto doc = ParseMetaFile(etcd_manager_file, kBackupMetaName);
  if (!doc.ok()) return doc.status();
  BackupMeta m;
  auto in_meta = [](const Status& s) { return s.Prefixed(kBackupMetaName); };
  if (Status s = StringField(*doc, "etcdVersion", m.etcd_version); !s.ok()) return in_meta(s);
  if (Status s = TimestampField(*doc, m.created); !s.ok()) return in_meta(s);
  if (doc->contains("clusterSpec") && (*doc)["clusterSpec"].is_object() &&
      (*doc)["clusterSpec"].contains("memberCount") && (*doc)["clusterSpec"]["memberCount"].is_number_integer()) {
    m.member_count = (*doc)["clusterSpec"]["memberCount"].get<int>();
  }
  m.object = "etcd.backup.gz";  // etcd-manager's only name
  if (quorate_file) {
    auto q = ParseMetaFile(*quorate_file, kQuorateMetaName);
    if (!q.ok()) return q.status();
    if (Status s = DecodeQuorateFields(*q, m); !s.ok()) return s.Prefixed(kQuorateMetaName);
    return m;
  }
  if (!doc->contains("quorate")) return m;
  if (!(*doc)["quorate"].is_object()) return in_meta(Status::DataLoss("quorate is not an object"));
  if (Status s = DecodeQuorateFields((*doc)["quorate"], m); !s.ok()) return in_meta(s);
  return m;
}

Result<BackupLocation> ParseBackupUrl(const std::string& url) {
  const size_t query = url.find('?');
  const std::string path = url.substr(0, query);
  const std::string marker = std::string("/") + kRoot + "/";
  const size_t at = path.rfind(marker);
  if (at == std::string::npos) {
    return Status::InvalidArgument(fmt::format(
        "backup URL '{}' names no backup: want <store URL>/backups/etcd/<cluster>/<time>, as `quorate backup list` "
        "prints",
        Printable(url, 200)));
  }
  BackupLocation loc;
  loc.store_url = path.substr(0, at) + (query == std::string::npos ? "" : url.substr(query));
  loc.folder = path.substr(at + 1);
  while (!loc.folder.empty() && loc.folder.back() == '/') loc.folder.pop_back();
  if (Status s = ValidateKey(loc.folder); !s.ok()) return s.Prefixed("backup URL " + Printable(url, 200));
  if (std::count(loc.folder.begin(), loc.folder.end(), '/') != 3) {
    return Status::InvalidArgument(fmt::format(
        "backup URL '{}': want .../backups/etcd/<cluster>/<time>, one backup's folder", Printable(url, 200)));
  }
  if (loc.store_url.empty() || loc.store_url == "file://") loc.store_url = "file:///";
  return loc;
}

std::string BackupUrl(const std::string& store_url, const std::string& folder) {
  const size_t query = store_url.find('?');
  std::string base = store_url.substr(0, query);
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/" + folder + (query == std::string::npos ? "" : store_url.substr(query));
}

Result<BackupMeta> SaveBackup(Vfs& store, const std::string& store_url, const SnapshotSource& source,
                              const SaveOptions& options) {
  // Two backups in one second (a save by hand beside the schedule) take etcd-manager's counter.
  const std::string base = fmt::format("{}/{}/{}", kRoot, options.cluster, BackupTimeName(options.now));
  std::string folder = base;
  for (int counter = 1;; ++counter) {
    auto existing = store.List(folder);
    if (!existing.ok()) return existing.status();
    if (existing->empty()) break;
    folder = fmt::format("{}-{:06d}", base, counter);
  }
  BackupMeta meta;
  meta.folder = folder;
  meta.url = BackupUrl(store_url, folder);
  meta.created = options.now;
  meta.member_count = options.member_count;
  meta.quorate = true;
  meta.compression = options.compression;
  meta.key_id = options.key ? options.key->id : "";
  meta.object = ObjectName(options.compression, options.key.has_value());

  auto upload = store.Upload(folder + "/" + meta.object);
  if (!upload.ok()) return upload.status();
  struct UploadSink : Sink {
    explicit UploadSink(VfsUpload& u) : upload(u) {}
    Status Write(std::string_view bytes) override { return upload.Append(bytes); }
    Status Finish() override { return Status::Ok(); }
    VfsUpload& upload;
  } to_store(**upload);
  CountingSink counted(to_store);
  std::unique_ptr<Sink> encryptor = options.key ? MakeEncryptor(*options.key, counted) : nullptr;
  std::unique_ptr<Sink> compressor = MakeCompressor(options.compression, encryptor ? *encryptor : counted);
  SnapshotCheck check(compressor.get());
  auto header = source([&](std::string_view piece) { return check.Write(piece); });
  if (!header.ok()) return header.status();
  if (Status s = check.Finish(); !s.ok()) return s.Prefixed("snapshot of " + header->endpoint);
  if (Status s = (*upload)->Commit(); !s.ok()) return s;
  meta.etcd_version = header->version;
  meta.cluster_id = header->cluster_id;
  meta.member_id = header->member_id;
  meta.revision = header->revision;
  meta.db_bytes = check.db_bytes();
  meta.stored_bytes = counted.bytes();
  meta.sha256 = check.sha256_hex();
  meta.source = "snapshot of " + header->endpoint;
  if (options.before_commit) {
    if (Status s = options.before_commit(); !s.ok()) {
      (void)store.Remove(folder + "/" + meta.object);
      return s;
    }
  }
  // quorate's file first, etcd-manager's last: that one commits the backup for both tools, and a
  // folder holding only quorate's (a save cut short between the two) is swept as never committed.
  const BackupMetaFiles files = EncodeBackupMeta(meta);
  if (Status s = store.Write(folder + "/" + kQuorateMetaName, files.quorate); !s.ok()) return s;
  if (Status s = store.Write(folder + "/" + kBackupMetaName, files.etcd_manager); !s.ok()) return s;
  return meta;
}

namespace {

// The backup in `folder`; `quorate_file_listed` says whether a listing showed _quorate_backup.json
// there (nullopt: no listing, so it is asked for).
Result<BackupMeta> ReadBackupIn(Vfs& store, const std::string& store_url, const std::string& folder,
                                std::optional<bool> quorate_file_listed) {
  const std::string url = BackupUrl(store_url, folder);
  auto text = store.Read(folder + "/" + kBackupMetaName, kMaxMetaBytes);
  if (!text.ok() && text.status().IsNotFound()) {
    return Status::NotFound(fmt::format("{} is not a backup: it has no {} (never committed, or removed)", url,
                                        kBackupMetaName));
  }
  if (!text.ok()) return text.status();
  std::optional<std::string> quorate_text;
  if (quorate_file_listed.value_or(true)) {
    auto q = store.Read(folder + "/" + kQuorateMetaName, kMaxMetaBytes);
    if (q.ok()) {
      quorate_text = std::move(*q);
    } else if (!q.status().IsNotFound() || quorate_file_listed.has_value()) {
      return q.status();
    }
  }
  auto meta = DecodeBackupMeta(*text, quorate_text);
  if (!meta.ok()) return meta.status().Prefixed("backup " + url);
  meta->folder = folder;
  meta->url = url;
  if (meta->created == SystemTime{}) {
    auto t = ParseTimeName(folder.substr(folder.rfind('/') + 1));
    if (t.ok()) meta->created = *t;
  }
  return meta;
}

}  // namespace

Result<BackupMeta> ReadBackup(Vfs& store, const std::string& store_url, const std::string& folder) {
  return ReadBackupIn(store, store_url, folder, std::nullopt);
}

Result<std::vector<BackupMeta>> ListBackups(Vfs& store, const std::string& store_url, const std::string& cluster) {
  const std::string prefix = fmt::format("{}/{}", kRoot, cluster);
  auto keys = store.List(prefix);
  if (!keys.ok()) return keys.status();
  std::vector<BackupMeta> out;
  const std::string suffix = std::string("/") + kBackupMetaName;
  for (const std::string& key : *keys) {
    if (!key.ends_with(suffix)) continue;
    std::string folder = key.substr(0, key.size() - suffix.size());
    if (folder.find('/', prefix.size() + 1) != std::string::npos) continue;
    const bool quorate_file = std::binary_search(keys->begin(), keys->end(), folder + "/" + kQuorateMetaName);
    auto meta = ReadBackupIn(store, store_url, folder, quorate_file);
    if (!meta.ok()) {
      spdlog::warn("backup {} left out: {}", BackupUrl(store_url, folder), meta.status().message());
      continue;
    }
    out.push_back(std::move(*meta));
  }
  std::sort(out.begin(), out.end(), [](const BackupMeta& a, const BackupMeta& b) {
    return a.created != b.created ? a.created < b.created : a.folder < b.folder;
  });
  return out;
}

Result<AbandonedBackups> RemoveAbandonedBackups(Vfs& store, const std::string& cluster, SystemTime before) {
  const std::string prefix = fmt::format("{}/{}", kRoot, cluster);
  auto keys = store.List(prefix);
  if (!keys.ok()) return keys.status();
  // Folder -> its keys, and whether its metadata is there.
  std::map<std::string, std::pair<std::vector<std::string>, bool>> folders;
  for (const std::string& key : *keys) {
    size_t slash = key.find('/', prefix.size() + 1);
    if (slash == std::string::npos) continue;
    auto& [objects, committed] = folders[key.substr(0, slash)];
    objects.push_back(key);
    committed = committed || key.substr(slash + 1) == kBackupMetaName;
  }
  AbandonedBackups out;
  for (const auto& [folder, entry] : folders) {
    if (entry.second) continue;
    // The folder's name is when its save began; one that cannot be read is not ours to remove.
    auto began = ParseTimeName(folder.substr(prefix.size() + 1));
    if (!began.ok() || *began >= before) continue;
    for (const std::string& key : entry.first) {
      if (Status s = store.Remove(key); !s.ok()) return s;
    }
    out.folders.push_back(folder);
  }
  auto uploads = store.RemoveAbandonedUploads(prefix, before);
  if (!uploads.ok()) return uploads.status();
  out.uploads = *uploads;
  return out;
}

Result<BackupKey> KeyFor(const BackupMeta& meta, const std::vector<BackupKey>& keys) {
  for (const BackupKey& key : keys) {
    if (key.id == meta.key_id) return key;
  }
  std::vector<std::string> given;
  for (const BackupKey& key : keys) given.push_back(key.id);
  return Status::InvalidArgument(fmt::format(
      "backup {} is encrypted with key {}; {}: give --backup-key-file with the key of that ID", meta.url, meta.key_id,
      given.empty() ? "no --backup-key-file was given" : "the key files given have IDs " + fmt::format("{}", fmt::join(given, ", "))));
}

uint64_t SnapshotLimit(const BackupMeta& meta) {
  return (meta.quorate ? meta.db_bytes : kMaxUndeclaredDbBytes) + kSnapshotHashBytes;
}

Status ReadBackupThrough(Vfs& store, const BackupMeta& meta, const std::vector<BackupKey>& keys, Sink* out,
                         BackupRead* read) {
  std::optional<BackupKey> key;
  if (!meta.key_id.empty()) {
    auto k = KeyFor(meta, keys);
    if (!k.ok()) return k.status();
    key = *k;
  }
  auto download = store.Download(meta.folder + "/" + meta.object);
  if (!download.ok()) return download.status().Prefixed("backup " + meta.url);
  SnapshotCheck check(out);
  // The hash and `out` on a thread of their own, fed by the read and inflate on this one (`perf` of
  // `backup verify`, 256 MB: the read and ISA-L's inflate 78% of the CPU, the hash 22%; a restore's
  // copy adds its writes to the second side). Declared after `check` and before the stages that
  // feed it, so it is stopped after they are and before `check` goes.
  std::unique_ptr<Sink> handoff = MakeHandoff(check);
  const uint64_t limit = SnapshotLimit(meta);
  // Said behind the backup's URL, as every error of the read below.
  const std::string too_large =
      meta.quorate ? fmt::format("decompresses to more than the {} bytes of database its metadata declares (dbBytes); "
                                 "refused before writing more",
                                 meta.db_bytes)
                   : fmt::format("decompresses to more than {} bytes; a backup without quorate's metadata declares no "
                                 "size, and quorate reads at most {} GiB of database from one (the largest backend "
                                 "quota etcd suggests)",
                                 limit, kMaxUndeclaredDbBytes >> 30);
  // Before the handoff: a bomb stops on this thread as soon as it passes the limit, and what waits
  // in the queue is already within it.
  LimitSink capped(*handoff, limit, Status::DataLoss(too_large));
  std::unique_ptr<Sink> decompressor = MakeDecompressor(meta.compression, capped);
  std::unique_ptr<Sink> decryptor = key ? MakeDecryptor(*key, *decompressor) : nullptr;
  Sink& first = decryptor ? *decryptor : *decompressor;
  std::string buffer(kReadPiece, '\0');
  uint64_t stored = 0;
  while (true) {
    auto n = (*download)->Read(buffer.data(), buffer.size());
    if (!n.ok()) return n.status().Prefixed("backup " + meta.url);
    if (*n == 0) break;
    stored += *n;
    if (meta.stored_bytes != 0 && stored > meta.stored_bytes) {
      return Status::DataLoss(fmt::format(
          "backup {}: its object holds more than the {} bytes its metadata declares (storedBytes)", meta.url,
          meta.stored_bytes));
    }
    if (Status s = first.Write({buffer.data(), *n}); !s.ok()) return s.Prefixed("backup " + meta.url);
  }
  if (Status s = first.Finish(); !s.ok()) return s.Prefixed("backup " + meta.url);
  if (read != nullptr) *read = {check.db_bytes(), check.sha256_hex()};
  if (meta.quorate && (check.sha256_hex() != meta.sha256 || check.db_bytes() != meta.db_bytes ||
                       (meta.stored_bytes != 0 && stored != meta.stored_bytes))) {
    return Status::DataLoss(fmt::format(
        "backup {}: holds a database of {} bytes with sha256 {}, but its metadata says {} bytes with sha256 {}",
        meta.url, check.db_bytes(), check.sha256_hex(), meta.db_bytes, meta.sha256));
  }
  return Status::Ok();
}

Status RemoveBackup(Vfs& store, const BackupMeta& meta) {
  for (const std::string& name : {std::string(kBackupMetaName), std::string(kQuorateMetaName), meta.object}) {
    if (Status s = store.Remove(meta.folder + "/" + name); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace quorate
