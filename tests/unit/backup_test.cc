#include <doctest/doctest.h>

#include <stdlib.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "backup/backup.h"
#include "backup/codec.h"
#include "backup/retention.h"
#include "node/backup_job.h"
#include "store/s3.h"
#include "testing/fake_clock.h"
#include "testing/fake_snapshot.h"
#include "testing/forwarding_vfs.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

struct TempStore {
  TempStore() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-backup-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
    url = "file://" + path;
    auto opened = OpenVfs(url);
    REQUIRE(opened.ok());
    store = std::move(*opened);
  }
  ~TempStore() { fs::remove_all(path); }
  std::string path, url;
  std::unique_ptr<Vfs> store;
};

struct StringSink : Sink {
  Status Write(std::string_view bytes) override {
    data.append(bytes);
    return Status::Ok();
  }
  Status Finish() override {
    finished = true;
    return Status::Ok();
  }
  std::string data;
  bool finished = false;
};

// Counts what reaches the end of a restore's chain: what a restore would have written to disk.
struct CountingEnd : Sink {
  Status Write(std::string_view bytes) override {
    bytes_seen += bytes.size();
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  uint64_t bytes_seen = 0;
};

BackupKey TestKey(unsigned char fill) {
  std::array<unsigned char, 32> bytes;
  bytes.fill(fill);
  return BackupKeyFromBytes(bytes);
}

SaveOptions Options(std::optional<BackupKey> key = std::nullopt, Compression c = Compression::kGzip) {
  SaveOptions o;
  o.compression = c;
  o.key = key;
  o.member_count = 3;
  o.now = std::chrono::system_clock::from_time_t(1795000000);
  return o;
}

TEST_CASE("a streamed upload is invisible until its commit, and gone when dropped") {
  TempStore t;
  {
    auto upload = t.store->Upload("a/b/big");
    REQUIRE(upload.ok());
    REQUIRE((*upload)->Append(std::string(100000, 'x')).ok());
    auto listed = t.store->List("");
    REQUIRE(listed.ok());
    CHECK(listed->empty());
  }
  auto listed = t.store->List("");
  REQUIRE(listed.ok());
  CHECK(listed->empty());
  auto upload = t.store->Upload("a/b/big");
  REQUIRE(upload.ok());
  REQUIRE((*upload)->Append("hello ").ok());
  REQUIRE((*upload)->Append("world").ok());
  REQUIRE((*upload)->Commit().ok());
  CHECK(fs::status(t.path + "/a/b/big").permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  auto download = t.store->Download("a/b/big");
  REQUIRE(download.ok());
  char buffer[4];
  std::string back;
  for (auto n = (*download)->Read(buffer, sizeof buffer); n.ok() && *n > 0; n = (*download)->Read(buffer, sizeof buffer)) {
    back.append(buffer, *n);
  }
  CHECK(back == "hello world");
  CHECK(t.store->Download("a/none").status().IsNotFound());
  REQUIRE(t.store->Remove("a/b/big").ok());
  CHECK(t.store->Remove("a/b/big").ok());
  CHECK_FALSE(fs::exists(t.path + "/a"));
}

TEST_CASE("S3 multipart documents") {
  CHECK(s3::ParseUploadId(R"(<?xml version="1.0" encoding="UTF-8"?>
<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key>
<UploadId>VXBsb2FkIElE&amp;1</UploadId></InitiateMultipartUploadResult>)") == "VXBsb2FkIElE&1");
  CHECK(s3::ParseUploadId("<Error><Code>x</Code></Error>").empty());
  CHECK(s3::CompleteMultipartBody({"\"e1\"", "\"e2\""}) ==
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag></Part>"
        "<Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag></Part></CompleteMultipartUpload>");
}

TEST_CASE("every compression and encryption pair gives back etcd's stream byte for byte") {
  FakeSnapshot fake;
  fake.db_bytes = 3 << 20;
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    for (bool encrypted : {false, true}) {
      CAPTURE(CompressionName(c));
      CAPTURE(encrypted);
      TempStore t;
      std::optional<BackupKey> key;
      if (encrypted) key = TestKey(7);
      auto meta = SaveBackup(*t.store, t.url, fake.Source(), Options(key, c));
      REQUIRE(meta.ok());
      CHECK(meta->db_bytes == fake.db_bytes);
      CHECK(meta->stored_bytes < fake.db_bytes);
      CHECK(meta->revision == 42);
      StringSink out;
      std::vector<BackupKey> keys;
      if (key) keys.push_back(*key);
      REQUIRE(ReadBackupThrough(*t.store, *meta, keys, &out).ok());
      CHECK(out.data == fake.Stream());
      CHECK(out.finished);
    }
  }
}

TEST_CASE("gzip compressed on several cores is one ordinary gzip member, whatever the size") {
  // Text that deflate finds matches in, and bytes it does not: chunks meet at every size near the
  // edges of the pieces compressed apart (128 KiB) and past several of them.
  std::string data;
  uint64_t x = 88172645463325252ull;
  while (data.size() < (3u << 20) + 777) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    data += (x & 1) ? fmt::format("/registry/pods/default/web-{}\n", x % 1000) : std::string(1, char(x >> 8));
  }
  for (size_t size : {size_t{0}, size_t{1}, size_t{(128u << 10) - 1}, size_t{128u << 10}, size_t{(128u << 10) + 1},
                      size_t{(256u << 10) + 1}, size_t{(1u << 20) + 123}, data.size()}) {
    CAPTURE(size);
    const std::string in = data.substr(0, size);
    StringSink packed;
    auto gzip = MakeCompressor(Compression::kGzip, packed);
    for (size_t at = 0; at < in.size(); at += 100000) REQUIRE(gzip->Write(std::string_view(in).substr(at, 100000)).ok());
    REQUIRE(gzip->Finish().ok());

    // zlib's own reader, in one call: a single member whose trailer (CRC-32, length) checks out.
    std::string out(in.size() + 1, '\0');
    z_stream z{};
    REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(packed.data.data());
    z.avail_in = static_cast<uInt>(packed.data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const uInt left_over = z.avail_in;
    out.resize(out.size() - z.avail_out);
    inflateEnd(&z);
    CHECK(rc == Z_STREAM_END);
    CHECK(left_over == 0);
    CHECK(out == in);

    // A changed CRC in the trailer is seen.
    packed.data[packed.data.size() - 8] ^= 1;
    StringSink unpacked;
    auto gunzip = MakeDecompressor(Compression::kGzip, unpacked);
    Status read = gunzip->Write(packed.data);
    if (read.ok()) read = gunzip->Finish();
    CHECK(read.code() == Status::Code::kDataLoss);
  }
}

TEST_CASE("a gzip stream dropped half way (the snapshot failed) stops its workers") {
  std::string data(5u << 20, 'x');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>(i);
  StringSink packed;
  {
    auto gzip = MakeCompressor(Compression::kGzip, packed);
    REQUIRE(gzip->Write(data).ok());
  }  // no Finish: the chunks still queued are dropped, the ones being deflated finish first (the
     // sanitizer build sees a worker left touching a gone compressor)
  CHECK(!packed.finished);
  CHECK(packed.data.size() < data.size() / 2);  // the header and the pieces emitted, no trailer
}

// Refuses every write past `fail_at` bytes, as a full disk would; counts what it was given after that.
struct FailingSink : Sink {
  explicit FailingSink(uint64_t at) : fail_at(at) {}
  Status Write(std::string_view bytes) override {
    if (failed) ++writes_after_failure;
    if (failed || data.size() + bytes.size() > fail_at) {
      failed = true;
      return Status::FromErrno(ENOSPC, "write /state/restore/snapshot.db.part");
    }
    data.append(bytes);
    return Status::Ok();
  }
  Status Finish() override {
    finished = true;
    return Status::Ok();
  }
  uint64_t fail_at;
  std::string data;
  bool failed = false;
  int writes_after_failure = 0;
  bool finished = false;
};

TEST_CASE("zstd, compressed on its own thread: the store's error reaches the stream, and a dropped stream stops it") {
  // Bytes zstd finds little in: the compressed stream is about as long, and passes the failure.
  std::string data(5u << 20, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : data) x ^= x << 13, x ^= x >> 7, x ^= x << 17, c = static_cast<char>(x);
  SUBCASE("the store fails part way: its error, from a Write or from Finish, nothing written after it") {
    FailingSink out(64 << 10);
    auto zstd = MakeCompressor(Compression::kZstd, out);
    Status status = Status::Ok();
    for (size_t at = 0; at < data.size() && status.ok(); at += 32 << 10) {
      status = zstd->Write(std::string_view(data).substr(at, 32 << 10));
    }
    if (status.ok()) status = zstd->Finish();
    CHECK(status.message().find("snapshot.db.part") != std::string::npos);
    CHECK(out.writes_after_failure == 0);
    CHECK_FALSE(out.finished);
  }
  SUBCASE("dropped without Finish (the snapshot failed): its thread stops, and the frame is never ended") {
    StringSink packed;
    {
      auto zstd = MakeCompressor(Compression::kZstd, packed);
      REQUIRE(zstd->Write(data).ok());
    }
    CHECK_FALSE(packed.finished);
    StringSink unpacked;
    auto unzstd = MakeDecompressor(Compression::kZstd, unpacked);
    Status read = unzstd->Write(packed.data);
    if (read.ok()) read = unzstd->Finish();
    CHECK(read.code() == Status::Code::kDataLoss);
  }
}

TEST_CASE("a handoff passes every byte on in order, whatever the writes' sizes, and finishes after them") {
  std::string data;
  uint64_t x = 2463534242;
  while (data.size() < 3 * kHandoffPiece * kHandoffBuffers + 999) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    data += static_cast<char>(x);
  }
  for (size_t piece : {size_t{1}, size_t{31}, kHandoffPiece - 1, kHandoffPiece, kHandoffPiece + 1, data.size()}) {
    CAPTURE(piece);
    StringSink out;
    auto handoff = MakeHandoff(out);
    bool written = true;
    for (size_t at = 0; at < data.size() && written; at += piece) {
      written = handoff->Write(std::string_view(data).substr(at, piece)).ok();
    }
    REQUIRE(written);
    REQUIRE(handoff->Finish().ok());
    CHECK(out.finished);
    CHECK(out.data == data);
  }
  StringSink empty;
  REQUIRE(MakeHandoff(empty)->Finish().ok());
  CHECK(empty.finished);
  CHECK(empty.data.empty());
}

// Sees whether two Writes ever overlap, and which threads wrote.
struct OverlapSink : Sink {
  Status Write(std::string_view bytes) override {
    if (inside.fetch_add(1) != 0) overlapped = true;
    std::this_thread::yield();  // widens the window another thread's Write would have to come in
    data.append(bytes);
    {
      std::lock_guard lock(mu);
      writers.insert(std::this_thread::get_id());
    }
    inside.fetch_sub(1);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::string data;
  std::mutex mu;
  std::set<std::thread::id> writers;
};

TEST_CASE("a handoff's pieces reach next one at a time and in order, whichever thread passes them") {
  // Fast writes fill the queue, so the caller passes pieces on itself beside the handoff's thread.
  std::string data(40 * kHandoffPiece + 3, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / kHandoffPiece);
  OverlapSink out;
  auto handoff = MakeHandoff(out);
  for (size_t at = 0; at < data.size(); at += kHandoffPiece / 2) {
    REQUIRE(handoff->Write(std::string_view(data).substr(at, kHandoffPiece / 2)).ok());
  }
  REQUIRE(handoff->Finish().ok());
  CHECK_FALSE(out.overlapped.load());
  CHECK(out.data == data);
  CHECK(out.writers.size() <= 2);
}

TEST_CASE("a handoff's error on its thread stops the stream, and the caller gets it") {
  // Failing at once, part way, and with the last piece (seen only by Finish).
  const std::string data(8 * kHandoffPiece + 5, 'e');
  for (uint64_t fail_at : {uint64_t{0}, uint64_t{3 * kHandoffPiece + 7}, uint64_t{data.size() - 1}}) {
    CAPTURE(fail_at);
    FailingSink out(fail_at);
    auto handoff = MakeHandoff(out);
    Status status = Status::Ok();
    for (size_t at = 0; at < data.size() && status.ok(); at += 1000) {
      status = handoff->Write(std::string_view(data).substr(at, 1000));
    }
    if (status.ok()) status = handoff->Finish();
    CHECK(status.code() == Status::Code::kInternal);
    CHECK(status.message().find("snapshot.db.part") != std::string::npos);
    CHECK(out.writes_after_failure == 0);  // nothing queued was passed on after the error
    CHECK_FALSE(out.finished);
    // Asked again, the error stays.
    CHECK(handoff->Finish().code() == Status::Code::kInternal);
  }
}

// Gives each Write back only when let go: the handoff's thread held in next's Write.
struct GatedSink : Sink {
  Status Write(std::string_view bytes) override {
    std::unique_lock lock(mu);
    let_go.wait(lock, [this] { return open; });
    received += bytes.size();
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  void Open() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    let_go.notify_all();
  }
  std::mutex mu;
  std::condition_variable let_go;
  bool open = false;
  uint64_t received = 0;
};

TEST_CASE("a handoff holds at most its few buffers while the other side is slow, and stops when dropped") {
  GatedSink slow;
  std::atomic<uint64_t> accepted{0};
  {
    auto handoff = MakeHandoff(slow);
    std::thread caller([&] {
      const std::string piece(kHandoffPiece, 'p');
      for (int i = 0; i < 64; ++i) {
        if (!handoff->Write(piece).ok()) return;
        accepted += piece.size();
      }
    });
    // However long the other side takes, the caller is held once the queue is full: the buffer
    // being filled, the queue, and the one next is given.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(accepted.load() <= (kHandoffBuffers + 2) * kHandoffPiece);
    slow.Open();
    caller.join();
    CHECK(accepted.load() == 64 * kHandoffPiece);
  }  // dropped without Finish: its thread is stopped and joined (the sanitizer build sees one left)
  CHECK(slow.received <= 64 * kHandoffPiece);
}

TEST_CASE("a backup read back through the handoff: errors on either side name the backup, caps hold") {
  FakeSnapshot fake;
  fake.db_bytes = 5 << 20;
  TempStore t;
  auto meta = SaveBackup(*t.store, t.url, fake.Source(), Options());
  REQUIRE(meta.ok());
  const std::string object = t.path + "/" + meta->folder + "/" + meta->object;

  SUBCASE("the copy's side fails (a full disk): that error, and no more is written") {
    FailingSink out(2 << 20);
    Status s = ReadBackupThrough(*t.store, *meta, {}, &out);
    CHECK(s.code() == Status::Code::kInternal);
    CHECK(s.message().find(meta->url) != std::string::npos);
    CHECK(s.message().find("snapshot.db.part") != std::string::npos);
    CHECK(out.data.size() <= out.fail_at);
    CHECK(out.writes_after_failure == 0);
    CHECK_FALSE(out.finished);
  }
  SUBCASE("the inflate's side fails (garbage in the middle): DataLoss naming the backup, never finished") {
    std::string bytes;
    {
      std::ifstream in(object, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 4096; ++i) bytes[i] = static_cast<char>(i * 131);
    std::ofstream(object, std::ios::binary | std::ios::trunc) << bytes;
    StringSink out;
    Status s = ReadBackupThrough(*t.store, *meta, {}, &out);
    CHECK(s.code() == Status::Code::kDataLoss);
    CHECK(s.message().find(meta->url) != std::string::npos);
    CHECK_FALSE(out.finished);
  }
  SUBCASE("an object of garbage from its first byte") {
    std::string garbage(300000, '\0');
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 2654435761u) >> 13);
    std::ofstream(object, std::ios::binary | std::ios::trunc) << garbage;
    meta->stored_bytes = garbage.size();
    StringSink out;
    Status s = ReadBackupThrough(*t.store, *meta, {}, &out);
    CHECK(s.code() == Status::Code::kDataLoss);
    CHECK(s.message().find(meta->url) != std::string::npos);
    CHECK(out.data.empty());
    CHECK_FALSE(out.finished);
  }
  SUBCASE("cut short at any point: DataLoss, never finished") {
    for (uint64_t keep : {meta->stored_bytes - 1, meta->stored_bytes / 2, uint64_t{9}, uint64_t{0}}) {  // shorter each time
      CAPTURE(keep);
      fs::resize_file(object, keep);
      StringSink out;
      Status s = ReadBackupThrough(*t.store, *meta, {}, &out);
      CHECK(s.code() == Status::Code::kDataLoss);
      CHECK(s.message().find(meta->url) != std::string::npos);
      CHECK_FALSE(out.finished);
    }
  }
  SUBCASE("a database larger than declared stops at the cap, before the copy gets more") {
    meta->db_bytes = 1 << 20;
    CountingEnd out;
    Status s = ReadBackupThrough(*t.store, *meta, {}, &out);
    CHECK(s.code() == Status::Code::kDataLoss);
    CHECK(s.message().find("dbBytes") != std::string::npos);
    CHECK(out.bytes_seen <= meta->db_bytes + kSnapshotHashBytes);
  }
  SUBCASE("whole, it arrives byte for byte and finished") {
    StringSink out;
    BackupRead read;
    REQUIRE(ReadBackupThrough(*t.store, *meta, {}, &out, &read).ok());
    CHECK(out.data == fake.Stream());
    CHECK(out.finished);
    CHECK(read.sha256 == meta->sha256);
    CHECK(read.db_bytes == fake.db_bytes);
  }
}

TEST_CASE("backups follow etcd-manager's layout, and their URL leads back to them") {
  TempStore t;
  FakeSnapshot fake;
  auto meta = SaveBackup(*t.store, t.url, fake.Source(), Options());
  REQUIRE(meta.ok());
  CHECK(meta->folder == "backups/etcd/main/2026-11-18T11:06:40Z");
  CHECK(fs::exists(t.path + "/backups/etcd/main/2026-11-18T11:06:40Z/etcd.backup.gz"));
  CHECK(fs::exists(t.path + "/backups/etcd/main/2026-11-18T11:06:40Z/_etcd_backup.meta"));
  auto loc = ParseBackupUrl(meta->url);
  REQUIRE(loc.ok());
  CHECK(loc->store_url == t.url);
  CHECK(loc->folder == meta->folder);
  auto s3 = ParseBackupUrl("s3://b/p/backups/etcd/main/2026-11-18T11:06:40Z?endpoint=http://127.0.0.1:9000");
  REQUIRE(s3.ok());
  CHECK(s3->store_url == "s3://b/p?endpoint=http://127.0.0.1:9000");
  CHECK(BackupUrl(s3->store_url, s3->folder) == "s3://b/p/backups/etcd/main/2026-11-18T11:06:40Z?endpoint=http://127.0.0.1:9000");
  CHECK(ParseBackupUrl("file:///x/y").status().IsInvalidArgument());

  // A second backup in the same second takes etcd-manager's counter.
  auto second = SaveBackup(*t.store, t.url, fake.Source(), Options());
  REQUIRE(second.ok());
  CHECK(second->folder == "backups/etcd/main/2026-11-18T11:06:40Z-000001");
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].sha256 == meta->sha256);
}

TEST_CASE("an etcd-manager backup (no quorate metadata) reads as gzip, unencrypted") {
  auto meta = DecodeBackupMeta(R"({"etcdVersion":"3.4.13","clusterSpec":{"memberCount":3,"etcdVersion":"3.4.13"}})");
  REQUIRE(meta.ok());
  CHECK_FALSE(meta->quorate);
  CHECK(meta->member_count == 3);
  CHECK(meta->object == "etcd.backup.gz");
  CHECK(meta->key_id.empty());
  // etcd-manager's protobuf JSON writes an int64 as a string.
  auto stamped = DecodeBackupMeta(R"({"etcdVersion":"3.4.13","timestamp":"1795000000"})");
  REQUIRE(stamped.ok());
  CHECK(stamped->created == std::chrono::system_clock::from_time_t(1795000000));
  CHECK(DecodeBackupMeta("[]").status().code() == Status::Code::kDataLoss);
  CHECK(DecodeBackupMeta(R"({"quorate":{"compression":"lz4"}})").status().code() == Status::Code::kDataLoss);
  CHECK(DecodeBackupMeta(R"({"quorate":{"compression":"gzip","encryption":"none","keyID":"ab"}})").status().code() ==
        Status::Code::kDataLoss);
}

TEST_CASE("no metadata error quotes the file's content, only its name and what is wrong") {
  const std::string secret = "root:$6$SeCrEt";
  const std::string fine = R"({"etcdVersion":"3.4.23"})";
  for (const auto& files : std::vector<std::pair<std::string, std::optional<std::string>>>{
           {secret, std::nullopt},
           {"{\"etcdVersion\": \"" + secret + "\", x}", std::nullopt},
           {R"({"timestamp":")" + secret + R"("})", std::nullopt},
           {fine, secret},
           {fine, R"({"compression":")" + secret + R"("})"},
           {fine, R"({"compression":"gzip","encryption":")" + secret + R"(","keyID":"k"})"},
           {fine, R"({"compression":"gzip","encryption":"none","object":")" + secret + R"("})"},
           {fine, R"({"compression":"gzip","encryption":"none","clusterID":")" + secret + R"("})"},
           {R"({"quorate":{"compression":")" + secret + R"("}})", std::nullopt},
       }) {
    // Not a structured binding: clang 14 (the sanitizer build) lets no lambda, CAPTURE's, name one.
    const auto& [manager, quorate] = files;
    CAPTURE(files.first);
    auto meta = DecodeBackupMeta(manager, quorate);
    REQUIRE_FALSE(meta.ok());
    CHECK(meta.status().code() == Status::Code::kDataLoss);
    CHECK(meta.status().message().find("SeCrEt") == std::string::npos);
    CHECK(meta.status().message().find(quorate ? kQuorateMetaName : kBackupMetaName) != std::string::npos);
  }
}

// Every Write a store is asked for, in order, passed on to a directory store.
struct RecordingVfs : ForwardingVfs {
  using ForwardingVfs::ForwardingVfs;
  Status Write(const std::string& key, const std::string& content) override {
    writes.push_back(key.substr(key.rfind('/') + 1));
    return ForwardingVfs::Write(key, content);
  }
  std::vector<std::string> writes;
};

TEST_CASE("_etcd_backup.meta holds exactly etcd-manager's fields, quorate's are beside it, and it is written last") {
  TempStore t;
  RecordingVfs recording(*t.store);
  FakeSnapshot fake;
  auto meta = SaveBackup(recording, t.url, fake.Source(), Options());
  REQUIRE(meta.ok());
  CHECK(recording.writes == std::vector<std::string>{kQuorateMetaName, kBackupMetaName});
  auto manager = t.store->Read(meta->folder + "/" + kBackupMetaName, 4096);
  REQUIRE(manager.ok());
  auto doc = nlohmann::json::parse(*manager);
  std::vector<std::string> fields, spec_fields;
  for (const auto& [k, v] : doc.items()) fields.push_back(k);
  for (const auto& [k, v] : doc["clusterSpec"].items()) spec_fields.push_back(k);
  CHECK(fields == std::vector<std::string>{"clusterSpec", "etcdVersion", "timestamp"});
  CHECK(spec_fields == std::vector<std::string>{"etcdVersion", "memberCount"});
  auto again = ReadBackup(*t.store, t.url, meta->folder);
  REQUIRE(again.ok());
  CHECK(again->quorate);
  CHECK(again->sha256 == meta->sha256);
  CHECK(again->db_bytes == meta->db_bytes);
  CHECK(again->created == meta->created);
}

TEST_CASE("a backup of quorate before its own file (fields under \"quorate\" in _etcd_backup.meta) still reads") {
  TempStore t;
  FakeSnapshot fake;
  auto saved = SaveBackup(*t.store, t.url, fake.Source(), Options(TestKey(3), Compression::kZstd));
  REQUIRE(saved.ok());
  // What quorate wrote before: one file, its fields under "quorate".
  auto manager = nlohmann::json::parse(*t.store->Read(saved->folder + "/" + kBackupMetaName, 4096));
  manager["quorate"] = nlohmann::json::parse(*t.store->Read(saved->folder + "/" + kQuorateMetaName, 4096));
  REQUIRE(t.store->Remove(saved->folder + "/" + kQuorateMetaName).ok());
  REQUIRE(t.store->Write(saved->folder + "/" + kBackupMetaName, manager.dump()).ok());
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].quorate);
  CHECK((*listed)[0].key_id == saved->key_id);
  CHECK((*listed)[0].compression == Compression::kZstd);
  CHECK(ReadBackupThrough(*t.store, (*listed)[0], {TestKey(3)}, nullptr).ok());
}

// etcd-manager's backup of `fake`: gzip of etcd's stream, and its metadata alone.
std::string PlantEtcdManagerBackup(TempStore& t, const FakeSnapshot& fake, const std::string& name) {
  StringSink packed;
  auto gzip = MakeCompressor(Compression::kGzip, packed);
  REQUIRE(gzip->Write(fake.Stream()).ok());
  REQUIRE(gzip->Finish().ok());
  const std::string folder = "backups/etcd/main/" + name;
  REQUIRE(t.store->Write(folder + "/etcd.backup.gz", packed.data).ok());
  REQUIRE(t.store->Write(folder + "/" + kBackupMetaName,
                         R"({"etcdVersion":"3.4.23","timestamp":"1600000000","clusterSpec":{"memberCount":3,)"
                         R"("etcdVersion":"3.4.23"}})")
              .ok());
  return folder;
}

TEST_CASE("an etcd-manager backup is listed and read through etcd's own hash, which is all it can be checked by") {
  TempStore t;
  FakeSnapshot fake;
  const std::string folder = PlantEtcdManagerBackup(t, fake, "2020-09-13T12:26:40Z-000001");
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  const BackupMeta& meta = (*listed)[0];
  CHECK_FALSE(meta.quorate);
  CHECK(meta.folder == folder);
  CHECK(meta.etcd_version == "3.4.23");
  StringSink out;
  BackupRead read;
  REQUIRE(ReadBackupThrough(*t.store, meta, {}, &out, &read).ok());
  CHECK(out.data == fake.Stream());
  CHECK(read.db_bytes == fake.db_bytes);
  CHECK(read.sha256.size() == 64);
}

TEST_CASE("a restore's read follows no link out of the store: not its metadata, not its object") {
  TempStore t, outside;
  FakeSnapshot fake;
  std::ofstream(outside.path + "/shadow") << "root:$6$SeCrEt:19000::::::\n";
  auto saved = SaveBackup(*t.store, t.url, fake.Source(), Options());
  REQUIRE(saved.ok());
  const std::string folder = t.path + "/" + saved->folder;
  // The object swapped for a link to a copy outside: the metadata still matches it.
  fs::rename(folder + "/" + saved->object, outside.path + "/object");
  fs::create_symlink(outside.path + "/object", folder + "/" + saved->object);
  auto meta = ReadBackup(*t.store, t.url, saved->folder);
  REQUIRE(meta.ok());
  CountingEnd written;
  Status s = ReadBackupThrough(*t.store, *meta, {}, &written);
  CHECK(s.code() == Status::Code::kDataLoss);
  CHECK(s.message().find("symbolic link") != std::string::npos);
  CHECK(written.bytes_seen == 0);
  // The metadata a link to a secret: refused, its content never quoted, the backup never listed.
  fs::remove(folder + "/" + kBackupMetaName);
  fs::create_symlink(outside.path + "/shadow", folder + "/" + kBackupMetaName);
  auto linked = ReadBackup(*t.store, t.url, saved->folder);
  CHECK(linked.status().code() == Status::Code::kDataLoss);
  CHECK(linked.status().message().find("symbolic link") != std::string::npos);
  CHECK(linked.status().message().find("SeCrEt") == std::string::npos);
  CHECK(ListBackups(*t.store, t.url, "main")->empty());
}

TEST_CASE("retention in a store shared with etcd-manager removes only quorate's backups") {
  TempStore t;
  FakeSnapshot fake;
  const SystemTime now = std::chrono::system_clock::from_time_t(1795000000);
  // etcd-manager's backups of 200 and 100 days ago, older than any policy keeps.
  const auto days_ago = [&](int days) { return BackupTimeName(now - std::chrono::hours(24 * days)); };
  const std::string old1 = PlantEtcdManagerBackup(t, fake, days_ago(200) + "-000001");
  const std::string old2 = PlantEtcdManagerBackup(t, fake, days_ago(100) + "-000002");
  for (int days : {150, 120, 1}) {
    SaveOptions o = Options();
    o.now = now - std::chrono::hours(24 * days);
    REQUIRE(SaveBackup(*t.store, t.url, fake.Source(), o).ok());
  }
  BackupSettings settings;
  settings.store_url = t.url;
  settings.cluster = "main";
  auto removed = PruneBackups(settings, *t.store, now);
  REQUIRE(removed.ok());
  CHECK(removed->size() == 2);
  for (const BackupMeta& b : *removed) CHECK(b.quorate);
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 3);
  CHECK((*listed)[0].folder == old1);
  CHECK((*listed)[1].folder == old2);
  CHECK((*listed)[2].quorate);
}

TEST_CASE("a save cut short, a bad hash or a refused commit leaves no backup listed") {
  TempStore t;
  FakeSnapshot broken;
  broken.fail_after = 256 * 1024;
  CHECK(SaveBackup(*t.store, t.url, broken.Source(), Options()).status().IsUnavailable());
  FakeSnapshot bad_hash;
  bad_hash.wrong_hash = true;
  CHECK(SaveBackup(*t.store, t.url, bad_hash.Source(), Options()).status().code() == Status::Code::kDataLoss);
  FakeSnapshot fine;
  SaveOptions demoted = Options();
  demoted.before_commit = [] { return Status::FailedPrecondition("no longer the leader"); };
  CHECK(SaveBackup(*t.store, t.url, fine.Source(), demoted).status().code() == Status::Code::kFailedPrecondition);
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  CHECK(listed->empty());
  auto keys = t.store->List("");
  REQUIRE(keys.ok());
  CHECK(keys->empty());
}

TEST_CASE("what saves cut short left behind is removed once old enough; backups and saves under way stay") {
  TempStore t;
  // The real time: the directory store ages its temp files by their mtime.
  const SystemTime now = std::chrono::system_clock::now();
  FakeSnapshot fine;
  SaveOptions committed = Options();
  committed.now = now - std::chrono::hours(5);
  REQUIRE(SaveBackup(*t.store, t.url, fine.Source(), committed).ok());
  // A save killed after its object, before its metadata: 3 hours ago, and one of a minute ago.
  REQUIRE(t.store->Write("backups/etcd/main/" + BackupTimeName(now - std::chrono::hours(3)) + "/etcd.backup.gz", "x").ok());
  REQUIRE(t.store->Write("backups/etcd/main/" + BackupTimeName(now - std::chrono::minutes(1)) + "/etcd.backup.gz", "x").ok());
  // A save killed mid-object: the directory store's hidden temp file, 2 hours old, and a fresh one.
  const std::string killed = t.path + "/backups/etcd/main/" + BackupTimeName(now - std::chrono::hours(2));
  fs::create_directories(killed);
  std::ofstream(killed + "/.upload-123-0") << "part of a snapshot";
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(killed + "/.upload-123-0", two_hours_ago);
  const std::string running = t.path + "/backups/etcd/main/" + BackupTimeName(now);
  fs::create_directories(running);
  std::ofstream(running + "/.upload-124-0") << "a save under way";

  auto swept = RemoveAbandonedBackups(*t.store, "main", now - std::chrono::hours(1));
  REQUIRE_MESSAGE(swept.ok(), swept.status().message());
  CHECK(swept->folders == std::vector<std::string>{"backups/etcd/main/" + BackupTimeName(now - std::chrono::hours(3))});
  CHECK(swept->uploads == 1);
  CHECK_FALSE(fs::exists(killed));
  CHECK(fs::exists(running + "/.upload-124-0"));
  auto listed = ListBackups(*t.store, t.url, "main");
  REQUIRE(listed.ok());
  CHECK(listed->size() == 1);
  auto keys = t.store->List("backups");
  REQUIRE(keys.ok());
  CHECK(keys->size() == 4);  // the committed backup's object and two metadata files, the recent save's object
}

TEST_CASE("a changed byte, a missing key and a wrong key are refused") {
  TempStore t;
  FakeSnapshot fake;
  BackupKey key = TestKey(1);
  auto meta = SaveBackup(*t.store, t.url, fake.Source(), Options(key));
  REQUIRE(meta.ok());
  CHECK(meta->key_id == key.id);
  Status none = ReadBackupThrough(*t.store, *meta, {}, nullptr);
  CHECK(none.IsInvalidArgument());
  CHECK(none.message().find(key.id) != std::string::npos);
  CHECK(ReadBackupThrough(*t.store, *meta, {TestKey(2)}, nullptr).IsInvalidArgument());
  // Rotation: the new key encrypts, the old one still reads the old backup.
  CHECK(ReadBackupThrough(*t.store, *meta, {TestKey(2), key}, nullptr).ok());

  const std::string object = t.path + "/" + meta->folder + "/" + meta->object;
  for (uint64_t at : {uint64_t{5}, meta->stored_bytes / 2, meta->stored_bytes - 3}) {
    CAPTURE(at);
    std::fstream f(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x10));
    f.close();
    CHECK(ReadBackupThrough(*t.store, *meta, {key}, nullptr).code() == Status::Code::kDataLoss);
    f.open(object, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(c);
  }
  CHECK(ReadBackupThrough(*t.store, *meta, {key}, nullptr).ok());

  TempStore plain;
  auto unencrypted = SaveBackup(*plain.store, plain.url, fake.Source(), Options());
  REQUIRE(unencrypted.ok());
  const std::string path = plain.path + "/" + unencrypted->folder + "/" + unencrypted->object;
  fs::resize_file(path, fs::file_size(path) - 10);
  CHECK(ReadBackupThrough(*plain.store, *unencrypted, {}, nullptr).code() == Status::Code::kDataLoss);
}

// A backup whose object decompresses to `expanded` zero bytes while its metadata declares `declared`.
BackupMeta PlantBomb(TempStore& t, Compression c, uint64_t expanded, uint64_t declared) {
  StringSink packed;
  auto compressor = MakeCompressor(c, packed);
  const std::string zeros(1 << 20, '\0');
  for (uint64_t done = 0; done < expanded; done += zeros.size()) REQUIRE(compressor->Write(zeros).ok());
  REQUIRE(compressor->Finish().ok());
  BackupMeta meta;
  meta.folder = "backups/etcd/main/2026-11-26T09:00:00Z";
  meta.url = t.url + "/" + meta.folder;
  meta.quorate = true;
  meta.compression = c;
  meta.object = c == Compression::kGzip ? "etcd.backup.gz" : "etcd.backup.zst";
  meta.db_bytes = declared;
  meta.stored_bytes = packed.data.size();
  REQUIRE(t.store->Write(meta.folder + "/" + meta.object, packed.data).ok());
  return meta;
}

TEST_CASE("a decompression bomb is refused as soon as it passes the size its metadata declares") {
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    CAPTURE(CompressionName(c));
    TempStore t;
    // The issue's shape: a small object whose metadata says 135 KiB, expanding to 32 MiB here.
    BackupMeta bomb = PlantBomb(t, c, uint64_t{32} << 20, 135 * 1024);
    CHECK(bomb.stored_bytes < 64 * 1024);
    CountingEnd written;
    Status s = ReadBackupThrough(*t.store, bomb, {}, &written);
    CHECK(s.code() == Status::Code::kDataLoss);
    CHECK(s.message().find(bomb.url) != std::string::npos);
    CHECK(s.message().find("dbBytes") != std::string::npos);
    CHECK(written.bytes_seen <= bomb.db_bytes + kSnapshotHashBytes);
    // An object longer than its metadata says is refused as soon as the excess is read.
    bomb.stored_bytes = 100;
    bomb.db_bytes = uint64_t{1} << 30;
    CHECK(ReadBackupThrough(*t.store, bomb, {}, nullptr).message().find("storedBytes") != std::string::npos);
  }
  // Without quorate's metadata no size is declared: the fixed bound holds instead.
  BackupMeta foreign;
  CHECK(SnapshotLimit(foreign) == kMaxUndeclaredDbBytes + kSnapshotHashBytes);
}

TEST_CASE("key files hold 32 bytes, raw or hex") {
  TempStore t;
  const std::string hex = t.path + "/hex", raw = t.path + "/raw", bad = t.path + "/bad";
  std::ofstream(hex) << std::string(64, 'a') << "\n";
  std::ofstream(raw) << std::string(32, '\xaa');
  std::ofstream(bad) << "secret\n";
  auto a = LoadBackupKey(hex), b = LoadBackupKey(raw);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->id == b->id);
  CHECK(a->id.size() == 16);
  CHECK(LoadBackupKey(bad).status().IsInvalidArgument());
  CHECK(LoadBackupKey(t.path + "/none").status().IsInvalidArgument());
}

TEST_CASE("retention keeps the last hour, hourly for 7 days, daily for 90, and the latest") {
  // Backups every 30 minutes for 120 days in fake time, pruned after each, as `run` does.
  FakeClock clock;
  const auto start = clock.Now();
  const auto epoch = std::chrono::system_clock::from_time_t(1790000000);
  auto wall = [&] { return epoch + std::chrono::duration_cast<std::chrono::system_clock::duration>(clock.Now() - start); };
  std::vector<std::chrono::system_clock::time_point> kept;
  RetentionPolicy policy;
  for (int i = 0; i < 120 * 48; ++i) {
    kept.push_back(wall());
    auto remove = BackupsToRemove(kept, wall(), policy);
    for (auto it = remove.rbegin(); it != remove.rend(); ++it) kept.erase(kept.begin() + static_cast<long>(*it));
    clock.Advance(std::chrono::minutes(30));
  }
  const auto now = kept.back();
  using std::chrono::hours;
  int last_hour = 0, hourly = 0, daily = 0;
  for (auto t : kept) {
    auto age = now - t;
    CHECK(age < policy.daily);
    if (age < hours(1)) {
      ++last_hour;
    } else if (age < policy.hourly) {
      ++hourly;
    } else {
      ++daily;
    }
  }
  CHECK(last_hour == 2);                 // now and 30 minutes ago
  CHECK(hourly == 7 * 24 - 1);           // one an hour for the rest of 7 days
  CHECK(daily == 90 - 7);                // one a day for the rest of 90 days
  // The latest is kept however old.
  auto lone = std::vector{epoch};
  CHECK(BackupsToRemove(lone, epoch + hours(24 * 365), policy).empty());
  auto two = std::vector{epoch, epoch + hours(1)};
  CHECK(BackupsToRemove(two, epoch + hours(24 * 365), policy) == std::vector<size_t>{0});
}

}  // namespace
}  // namespace quorate
