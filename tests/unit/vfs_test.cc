#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <latch>
#include <thread>

#include "quorate/fs.h"
#include "quorate/vfs.h"
#include "testing/fifo_trap.h"

namespace quorate {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "quorate-vfs-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

std::unique_ptr<Vfs> Open(const std::string& url) {
  auto vfs = OpenVfs(url);
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  return std::move(*vfs);
}

// Everything in the directory, dot files included, so a leaked temp file shows.
std::vector<std::string> AllFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("keys are validated") {
  for (const char* good : {"a", "tok/members/n1", "A.b_c-9", "a/b.c/d"}) {
    CAPTURE(good);
    CHECK(ValidateKey(good).ok());
  }
  const std::string control = std::string("a") + '\n' + "b";
  for (const std::string& bad : {std::string(), std::string("../x"), std::string("a/../x"), std::string("/abs"),
                                 std::string("a//b"), std::string("a/"), std::string(".hidden"), std::string("a/."),
                                 control, std::string("a\x01"), std::string("a\x7f"), std::string("a b"),
                                 std::string("a\\b"), std::string("caf\xc3\xa9"), std::string(513, 'a')}) {
    CAPTURE(bad);
    Status s = ValidateKey(bad);
    CHECK(s.IsInvalidArgument());
    CHECK(s.message().find("key '") != std::string::npos);
  }
  CHECK(ValidateKey(std::string(512, 'a')).ok());
  // A control character is named, never echoed raw to a terminal.
  Status s = ValidateKey(control);
  CHECK(s.message().find("a\\x0ab") != std::string::npos);
  CHECK(s.message().find('\n') == std::string::npos);
}

TEST_CASE("OpenVfs takes file URLs and plain paths to an existing directory") {
  TempDir dir;
  CHECK(Open(dir.path)->Describe() == "file://" + dir.path);
  CHECK(Open("file://" + dir.path + "/")->Describe() == "file://" + dir.path);
  CHECK(Open(dir.path)->exclusive_create());

  for (const std::string& bad : {std::string(), dir.path + "/missing", "file://" + dir.path + "/missing",
                                 std::string("file://relative"), std::string("ftp://host/x")}) {
    CAPTURE(bad);
    auto vfs = OpenVfs(bad);
    REQUIRE_FALSE(vfs.ok());
    CHECK(vfs.status().IsInvalidArgument());
  }
  // A missing store is never created: it is most likely an unmounted share.
  CHECK_FALSE(fs::exists(dir.path + "/missing"));
  CHECK(OpenVfs(dir.path + "/missing").status().message().find("mount") != std::string::npos);
}

TEST_CASE("the directory backend reads, creates, writes and lists") {
  TempDir dir;
  auto vfs = Open(dir.path);

  CHECK(vfs->Read("a/b", kMaxLocalFileBytes).status().IsNotFound());
  auto created = vfs->CreateIfAbsent("a/b", "one");
  REQUIRE(created.ok());
  CHECK(*created);
  created = vfs->CreateIfAbsent("a/b", "two");
  REQUIRE(created.ok());
  CHECK_FALSE(*created);
  CHECK(*vfs->Read("a/b", kMaxLocalFileBytes) == "one");

  REQUIRE(vfs->Write("a/b", "three").ok());
  CHECK(*vfs->Read("a/b", kMaxLocalFileBytes) == "three");
  REQUIRE(vfs->Write("a/c/d", "four").ok());
  REQUIRE(vfs->Write("ab", "five").ok());

  CHECK(*vfs->List("") == std::vector<std::string>{"a/b", "a/c/d", "ab"});
  CHECK(*vfs->List("a") == std::vector<std::string>{"a/b", "a/c/d"});
  CHECK(*vfs->List("a/c") == std::vector<std::string>{"a/c/d"});
  CHECK(vfs->List("nothing/here")->empty());

  // Hidden files are a writer's temp files or NFS silly renames, never records.
  std::ofstream(dir.path + "/a/.b.tmp-0123") << "half";
  fs::create_directories(dir.path + "/a/.hidden");
  std::ofstream(dir.path + "/a/.hidden/x") << "x";
  CHECK(*vfs->List("a") == std::vector<std::string>{"a/b", "a/c/d"});
  fs::remove(dir.path + "/a/.b.tmp-0123");
  fs::remove_all(dir.path + "/a/.hidden");
  // No temp file is left behind by any operation.
  CHECK(AllFiles(dir.path) == std::vector<std::string>{"a/b", "a/c/d", "ab"});
}

TEST_CASE("the directory backend refuses bad keys and writes nothing") {
  TempDir dir;
  auto vfs = Open(dir.path);
  for (const std::string& bad : {std::string("../x"), std::string("/etc/passwd"), std::string("a/../../x"),
                                 std::string("a\nb"), std::string(600, 'k')}) {
    CAPTURE(bad);
    CHECK(vfs->Read(bad, kMaxLocalFileBytes).status().IsInvalidArgument());
    CHECK(vfs->CreateIfAbsent(bad, "x").status().IsInvalidArgument());
    CHECK(vfs->Write(bad, "x").IsInvalidArgument());
    CHECK(vfs->List(bad).status().IsInvalidArgument());
  }
  CHECK(fs::is_empty(dir.path));
  CHECK_FALSE(fs::exists(fs::path(dir.path).parent_path() / "x"));
}

TEST_CASE("racing CreateIfAbsent on a directory: exactly one writer wins, and its record is whole") {
  TempDir dir;
  constexpr int kThreads = 8;
  constexpr int kRounds = 50;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    const std::string key = "race/k" + std::to_string(round);
    std::atomic<int> winners{0};
    std::atomic<int> winner{-1};
    std::atomic<int> errors{0};
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto vfs = OpenVfs(dir.path);  // one store handle per writer, as separate nodes have
        if (!vfs.ok()) {
          ++errors;
          return;
        }
        start.arrive_and_wait();
        auto created = (*vfs)->CreateIfAbsent(key, std::string(4096, static_cast<char>('a' + t)));
        if (!created.ok()) {
          ++errors;
        } else if (*created) {
          ++winners;
          winner = t;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    REQUIRE(winners == 1);
    CHECK(*Open(dir.path)->Read(key, kMaxLocalFileBytes) == std::string(4096, static_cast<char>('a' + winner)));
  }
  CHECK(AllFiles(dir.path).size() == kRounds);
}

TEST_CASE("the directory backend refuses a planted FIFO at once, and a huge record before reading it") {
  TempDir dir;
  auto vfs = Open(dir.path);
  fs::create_directories(dir.path + "/tok/members");
  const std::string fifo = dir.path + "/tok/sealed";
  REQUIRE(MakeFifo(fifo));
  Result<std::string> got = Status::Internal("not read");
  CHECK(FinishesWithin(std::chrono::seconds(5), fifo, [&] { got = vfs->Read("tok/sealed", 64 * 1024); }));
  CHECK(got.status().code() == Status::Code::kDataLoss);
  CHECK(got.status().message().find("is a FIFO") != std::string::npos);
  // A FIFO is no record: List leaves it out.
  CHECK(vfs->List("tok")->empty());

  // A sparse 1 GiB registration (no disk used) is refused from its size, with the caller's cap.
  const std::string huge = dir.path + "/tok/members/n1";
  int fd = ::open(huge.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, off_t{1} << 30) == 0);
  ::close(fd);
  auto registration = vfs->Read("tok/members/n1", 64 * 1024);
  CHECK(registration.status().code() == Status::Code::kDataLoss);
  CHECK(registration.status().message().find("is 1073741824 bytes, more than the 65536") != std::string::npos);
  REQUIRE(vfs->Write("tok/members/n2", std::string(64 * 1024, 'x')).ok());
  CHECK(vfs->Read("tok/members/n2", 64 * 1024)->size() == 64 * 1024);
  CHECK(vfs->Read("tok/members/n2", 64 * 1024 - 1).status().code() == Status::Code::kDataLoss);
}

TEST_CASE("the directory backend follows no symbolic link below its root: not to read, list, write or remove") {
  TempDir dir, outside;
  auto vfs = Open(dir.path);
  // A secret outside the store, and a folder outside it shaped as a backup.
  const std::string secret = outside.path + "/shadow";
  std::ofstream(secret) << "root:$6$SeCrEt:19000::::::\n";
  fs::create_directories(outside.path + "/folder");
  std::ofstream(outside.path + "/folder/_etcd_backup.meta") << "{\"etcdVersion\":\"3.4.23\"}";
  fs::create_directories(dir.path + "/backups/etcd/main/2026-11-26T09:00:00Z");
  fs::create_symlink(secret, dir.path + "/backups/etcd/main/2026-11-26T09:00:00Z/_etcd_backup.meta");
  fs::create_symlink(outside.path + "/folder", dir.path + "/backups/etcd/main/2026-11-26T10:00:00Z");
  fs::create_symlink(outside.path, dir.path + "/linked");

  for (const std::string key : {"backups/etcd/main/2026-11-26T09:00:00Z/_etcd_backup.meta",
                                "backups/etcd/main/2026-11-26T10:00:00Z/_etcd_backup.meta", "linked/shadow"}) {
    CAPTURE(key);
    auto read = vfs->Read(key, 64 * 1024);
    CHECK(read.status().code() == Status::Code::kDataLoss);
    CHECK(read.status().message().find("symbolic link") != std::string::npos);
    CHECK(read.status().message().find("SeCrEt") == std::string::npos);
    CHECK(vfs->Download(key).status().code() == Status::Code::kDataLoss);
  }
  // Listed: neither the linked record nor anything in a linked folder; a linked prefix is refused.
  auto listed = vfs->List("");
  REQUIRE(listed.ok());
  CHECK(listed->empty());
  CHECK(vfs->List("linked").status().code() == Status::Code::kDataLoss);

  // Nothing is written or removed through a link.
  CHECK_FALSE(vfs->Write("linked/planted", "x").ok());
  CHECK_FALSE(vfs->Upload("backups/etcd/main/2026-11-26T10:00:00Z/etcd.backup.gz").ok());
  CHECK_FALSE(vfs->CreateIfAbsent("linked/planted", "x").ok());
  CHECK_FALSE(vfs->Remove("linked/shadow").ok());
  CHECK_FALSE(vfs->Remove("backups/etcd/main/2026-11-26T10:00:00Z/_etcd_backup.meta").ok());
  CHECK(fs::exists(secret));
  CHECK(fs::exists(outside.path + "/folder/_etcd_backup.meta"));
  CHECK_FALSE(fs::exists(outside.path + "/planted"));
  // Removing the linked record removes the link, never what it points at.
  REQUIRE(vfs->Remove("backups/etcd/main/2026-11-26T09:00:00Z/_etcd_backup.meta").ok());
  CHECK(fs::exists(secret));
  CHECK_FALSE(fs::exists(dir.path + "/backups/etcd/main/2026-11-26T09:00:00Z"));

  // The root itself may be a link: the operator's own choice.
  TempDir holder;
  fs::create_symlink(dir.path, holder.path + "/store");
  auto through = Open(holder.path + "/store");
  REQUIRE(through->Write("a/b", "c").ok());
  CHECK(*through->Read("a/b", 16) == "c");
}

}  // namespace quorate
