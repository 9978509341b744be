// RestoreNode's refusals and clean-up, without etcd (tests/integration has the restores themselves):
// a backup whose key is not given, or whose declared database does not fit the disk, is refused
// before anything is written; one that fails its checks part way leaves no copy of the snapshot; and
// a restore runs whole on its seams (RestoreSeams), as the simulator runs it.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "backup/backup.h"
#include "core/bucket.h"
#include "etcd/etcd_wal.h"
#include "node/restore.h"
#include "quorate/fs.h"
#include "testing/fake_peers.h"
#include "testing/fake_snapshot.h"
#include "testing/fake_wal.h"
#include "../support/ports.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

BackupKey KeyFilled(unsigned char fill) {
  std::array<unsigned char, 32> bytes;
  bytes.fill(fill);
  return BackupKeyFromBytes(bytes);
}

constexpr fs::perms kPrivateFile = fs::perms::owner_read | fs::perms::owner_write;

void WriteText(const std::string& path, const std::string& text, fs::perms perms = kPrivateFile) {
  std::ofstream(path) << text;
  fs::permissions(path, perms);
}

// A node n1 of three (peers on ports nothing listens on: no live quorum) with old data in its data
// dir, an encrypted backup in a directory store, and etcd's tools as stubs that are never run.
struct RestoreSetup {
  RestoreSetup() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-restore-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    REQUIRE(MakeDirs(dir + "/store").ok());
    REQUIRE(MakeDirs(dir + "/bin").ok());
    REQUIRE(MakeDirs(dir + "/data/member/wal").ok());
    WriteText(dir + "/data/member/wal/0000000000000000-0000000000000000.wal", "old data");
    for (const char* tool : {"etcd", "etcdctl"}) WriteText(dir + "/bin/" + tool, "#!/bin/sh\nexit 1\n", fs::perms::owner_all);
    // 64 hex digits: the bytes 0x11 (the backup's key), 0x22 (another).
    WriteText(dir + "/key1", std::string(64, '1'));
    WriteText(dir + "/key2", std::string(64, '2'));
    auto opened = OpenVfs("file://" + dir + "/store");
    REQUIRE(opened.ok());
    store = std::move(*opened);
    SaveOptions options;
    options.key = KeyFilled(0x11);
    options.member_count = 3;
    options.now = std::chrono::system_clock::now();
    auto saved = SaveBackup(*store, "file://" + dir + "/store", FakeSnapshot().Source(), options);
    REQUIRE(saved.ok());
    meta = *saved;

    config.name = "n1";
    config.data_dir = dir + "/data";
    config.state_dir = dir + "/data/quorate";
    config.initial_cluster = fmt::format("n1=http://127.0.0.1:{},n2=http://127.0.0.1:{},n3=http://127.0.0.1:{}",
                                         FreePort(), FreePort(), FreePort());
    config.initial_cluster_token = "restored";
    config.timeout = std::chrono::seconds(10);
    config.etcd_path = dir + "/bin/etcd";
    config.restore_from = meta.url;
    config.backup_key_files = {dir + "/key1"};
  }
  ~RestoreSetup() { fs::remove_all(dir); }

  std::string object() const { return dir + "/store/" + meta.folder + "/" + meta.object; }
  // What a refused restore must not have written or moved.
  void CheckNothingWritten() const {
    CHECK(fs::exists(dir + "/data/member/wal"));
    CHECK_FALSE(fs::exists(config.state_dir + "/restore.json"));
    CheckNoCopies();
  }
  void CheckNoCopies() const {
    CHECK_FALSE(fs::exists(config.state_dir + "/restore/snapshot.db.part"));
    CHECK_FALSE(fs::exists(config.state_dir + "/restore/snapshot.db"));
    CHECK_FALSE(fs::exists(config.data_dir + "/restore.tmp"));
  }

  std::string dir;
  std::unique_ptr<Vfs> store;
  BackupMeta meta;
  Config config;
};

TEST_CASE("a restore with a key of another ID is refused before it writes anything") {
  RestoreSetup s;
  s.config.backup_key_files = {s.dir + "/key2"};
  Status st = RestoreNode(s.config);
  CHECK(st.IsInvalidArgument());
  CHECK(st.message().find(s.meta.key_id) != std::string::npos);
  s.CheckNothingWritten();
}

TEST_CASE("a restore of a backup whose declared database does not fit the disk is refused before it writes") {
  RestoreSetup s;
  // Metadata that says the database is an exbibyte.
  BackupMeta huge = s.meta;
  huge.db_bytes = uint64_t{1} << 60;
  const std::string folder = s.dir + "/store/" + s.meta.folder + "/";
  BackupMetaFiles files = EncodeBackupMeta(huge);
  WriteText(folder + kQuorateMetaName, files.quorate);
  WriteText(folder + kBackupMetaName, files.etcd_manager);
  Status st = RestoreNode(s.config);
  CHECK(st.code() == Status::Code::kFailedPrecondition);
  CHECK(st.message().find("free") != std::string::npos);
  s.CheckNothingWritten();
}

TEST_CASE("a restore whose backup fails its checks part way leaves no copy of it") {
  RestoreSetup s;
  // One flipped byte in the middle of the object: the GCM tag fails once it has all been copied.
  {
    std::fstream f(s.object(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(s.meta.stored_bytes / 2));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(s.meta.stored_bytes / 2));
    f.put(static_cast<char>(c ^ 0x10));
  }
  Status st = RestoreNode(s.config);
  CHECK(st.code() == Status::Code::kDataLoss);
  CHECK(fs::exists(s.dir + "/data/member/wal"));
  s.CheckNoCopies();
}

TEST_CASE("a restore runs on its seams: the store, the peers and etcd's tool given, none of the real ones") {
  RestoreSetup s;
  // No etcd binary and no tool beside it: a real restore would be refused before it writes.
  s.config.etcd_path = s.dir + "/bin/none";
  FakePeers peers;
  std::vector<std::string> tool_args;
  RestoreSeams seams;
  seams.peers = &peers;
  seams.etcd_clients = [](const EtcdClientOptions&) -> std::unique_ptr<EtcdClient> { return nullptr; };
  seams.open_store = [&](const std::string& store_url) -> Result<std::unique_ptr<Vfs>> {
    CHECK(store_url == "file://" + s.dir + "/store");
    return OpenVfs(store_url);
  };
  // etcd's tool, as far as quorate sees it: the member the initial cluster and token make, in --data-dir.
  auto members = ParseInitialCluster(s.config.initial_cluster, "--initial-cluster");
  REQUIRE(members.ok());
  auto set = MemberSet::Create(*members, "restored");
  REQUIRE(set.ok());
  const MemberId self = set->IdOf(*set->FindByName("n1"));
  seams.restore_tool = [&](const std::vector<std::string>& args, const std::string&) {
    tool_args = args;
    auto out = std::find(args.begin(), args.end(), "--data-dir");
    REQUIRE(out != args.end());
    return WriteWal(*(out + 1), self, set->cluster_id());
  };
  Status st = RestoreNode(s.config, std::move(seams));
  REQUIRE(st.ok());
  CHECK(std::find(tool_args.begin(), tool_args.end(), "restored") != tool_args.end());
  auto wal = ReadWalIdentity(s.config.data_dir);
  REQUIRE(wal.ok());
  CHECK(wal->member_id == self);
  CHECK(wal->cluster_id == set->cluster_id());
  auto bucket = LoadBucket(s.config.state_dir);
  REQUIRE(bucket.ok());
  CHECK(bucket->members.token() == "restored");
  CHECK(ReadFile(s.config.state_dir + "/restore.json")->find("\"restored\"") != std::string::npos);
  s.CheckNoCopies();
}

}  // namespace
}  // namespace quorate
