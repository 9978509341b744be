// What every object store must do, checked the same way against each real server or emulator
// (doctest checks, so call them from a TEST_CASE): records, listings page by page, streams larger
// than one part, backups saved, listed, verified and read back for a restore, and racing writers,
// one key and a whole rendezvous. `open(prefix)` opens a fresh store under `prefix`.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backup/backup.h"
#include "quorate/fs.h"
#include "quorate/rendezvous.h"
#include "quorate/vfs.h"
#include "testing/fake_snapshot.h"

namespace quorate::store_checks {

using Keys = std::vector<std::string>;
using Opener = std::function<std::unique_ptr<Vfs>(const std::string& prefix)>;

inline bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

inline void Records(Vfs& vfs) {
  CHECK(vfs.exclusive_create());
  auto created = vfs.CreateIfAbsent("tok/members/n1", "one");
  REQUIRE_MESSAGE(created.ok(), created.status().message());
  CHECK(*created);
  auto again = vfs.CreateIfAbsent("tok/members/n1", "two");
  REQUIRE_MESSAGE(again.ok(), again.status().message());
  CHECK_FALSE(*again);
  CHECK(*vfs.Read("tok/members/n1", kMaxLocalFileBytes) == "one");
  REQUIRE(vfs.Write("tok/members/n1", "three").ok());
  CHECK(*vfs.Read("tok/members/n1", kMaxLocalFileBytes) == "three");
  // Bytes a text-minded layer would mangle come back as they went.
  const std::string binary("{\"a\":\"\x01\xff\"}\0tail", 14);
  REQUIRE(vfs.Write("tok/raw", binary).ok());
  CHECK(*vfs.Read("tok/raw", kMaxLocalFileBytes) == binary);
  // A record larger than the caller takes is refused, not read.
  CHECK(vfs.Read("tok/raw", 4).status().code() == Status::Code::kDataLoss);

  auto missing = vfs.Read("tok/members/nobody", kMaxLocalFileBytes);
  CHECK(missing.status().IsNotFound());
  CHECK_MESSAGE(Mentions(missing.status(), vfs.Describe() + "/tok/members/nobody"), missing.status().message());
  REQUIRE(vfs.Remove("tok/raw").ok());
  CHECK(vfs.Read("tok/raw", kMaxLocalFileBytes).status().IsNotFound());
  CHECK(vfs.Remove("tok/raw").ok());
  CHECK(vfs.Write("../x", "x").IsInvalidArgument());
}

// `open` gives stores that read two names a page.
inline void Listings(const Opener& open) {
  auto vfs = open("pages");
  const Keys inside = {"list/a", "list/b", "list/c", "list/sub/d", "list/sub/deeper/e"};
  for (const auto& key : inside) REQUIRE(vfs->Write(key, key).ok());
  for (const char* outside : {"listx", "lis/t", "other/k"}) REQUIRE(vfs->Write(outside, "x").ok());
  // The same bucket under a sibling root: never part of this store.
  REQUIRE(open("pages-other")->Write("list/z", "x").ok());
  auto listed = vfs->List("list");
  REQUIRE_MESSAGE(listed.ok(), listed.status().message());
  CHECK(*listed == inside);
  CHECK(*vfs->List("list/sub") == Keys{"list/sub/d", "list/sub/deeper/e"});
  CHECK(*vfs->List("") ==
        Keys{"lis/t", "list/a", "list/b", "list/c", "list/sub/d", "list/sub/deeper/e", "listx", "other/k"});
  CHECK(vfs->List("nothing-here")->empty());
}

// An object of two parts and a bit goes up in parts and comes down in ranged reads; one dropped
// before its commit is never seen; an empty one reads as empty.
inline void Streams(Vfs& vfs) {
  std::string big(2 * (8 << 20) + 12345, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) ^ (i >> 13));
  {
    auto upload = vfs.Upload("streams/big");
    REQUIRE_MESSAGE(upload.ok(), upload.status().message());
    for (size_t at = 0; at < big.size(); at += 1000003) {
      Status s = (*upload)->Append(std::string_view(big).substr(at, 1000003));
      REQUIRE_MESSAGE(s.ok(), s.message());
    }
    CHECK(vfs.List("streams")->empty());
    Status committed = (*upload)->Commit();
    REQUIRE_MESSAGE(committed.ok(), committed.message());
  }
  auto download = vfs.Download("streams/big");
  REQUIRE_MESSAGE(download.ok(), download.status().message());
  std::string back;
  std::vector<char> buffer(3 << 20);
  while (true) {
    auto n = (*download)->Read(buffer.data(), buffer.size());
    REQUIRE_MESSAGE(n.ok(), n.status().message());
    if (*n == 0) break;
    back.append(buffer.data(), *n);
  }
  CHECK(back.size() == big.size());
  CHECK(back == big);

  {
    auto dropped = vfs.Upload("streams/dropped");
    REQUIRE(dropped.ok());
    REQUIRE((*dropped)->Append(std::string((8 << 20) + 1, 'x')).ok());
  }
  CHECK(*vfs.List("streams") == Keys{"streams/big"});
  CHECK(*vfs.RemoveAbandonedUploads("streams", std::chrono::system_clock::now()) == 0);

  auto empty = vfs.Upload("streams/empty");
  REQUIRE(empty.ok());
  REQUIRE((*empty)->Commit().ok());
  auto read_empty = vfs.Download("streams/empty");
  REQUIRE_MESSAGE(read_empty.ok(), read_empty.status().message());
  CHECK(*(*read_empty)->Read(buffer.data(), buffer.size()) == 0);
  CHECK(vfs.Download("streams/missing").status().IsNotFound());
}

struct StringSink : Sink {
  Status Write(std::string_view bytes) override {
    data.append(bytes);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  std::string data;
};

// `quorate backup save`, `list`, `verify` and what `run --restore-from` reads, through the store:
// an encrypted backup of a database larger than one part.
inline void Backups(Vfs& vfs, const std::string& store_url) {
  FakeSnapshot fake;
  fake.db_bytes = (8 << 20) + 4096;
  std::array<unsigned char, 32> bytes;
  bytes.fill(7);
  SaveOptions options;
  options.key = BackupKeyFromBytes(bytes);
  options.member_count = 3;
  options.now = std::chrono::system_clock::from_time_t(1795000000);
  auto saved = SaveBackup(vfs, store_url, fake.Source(), options);
  REQUIRE_MESSAGE(saved.ok(), saved.status().message());
  // The folder goes into the URL's path, its ?parameters stay last.
  CHECK(saved->url.rfind(store_url.substr(0, store_url.find('?')) + "/backups/etcd/main/", 0) == 0);

  auto listed = ListBackups(vfs, store_url, "main");
  REQUIRE_MESSAGE(listed.ok(), listed.status().message());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().sha256 == saved->sha256);
  CHECK(listed->front().db_bytes == fake.db_bytes);

  StringSink restored;
  Status read = ReadBackupThrough(vfs, listed->front(), {*options.key}, &restored);
  REQUIRE_MESSAGE(read.ok(), read.message());
  CHECK(restored.data == fake.Stream());
  auto location = ParseBackupUrl(saved->url);
  REQUIRE(location.ok());
  CHECK(location->store_url == store_url);
  CHECK(ReadBackup(vfs, store_url, location->folder).ok());
  REQUIRE(RemoveBackup(vfs, listed->front()).ok());
  CHECK(ListBackups(vfs, store_url, "main")->empty());
}

// `writers` stores write one key at once: exactly one is told it created it.
inline void ExclusiveCreate(const Opener& open, int writers) {
  std::vector<int> won(writers, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < writers; ++i) {
    threads.emplace_back([&, i] {
      auto created = open("race")->CreateIfAbsent("contended", fmt::format("writer {}", i));
      if (created.ok()) won[i] = *created ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  int winners = 0;
  for (int w : won) {
    CHECK(w != -1);
    winners += w == 1;
  }
  CHECK(winners == 1);
}

// `nodes` nodes, each with its own store, meet for `seats` seats: all agree on one sealed set; those
// left out are told they are extra.
inline void RendezvousRace(const Opener& open, int nodes, size_t seats) {
  std::vector<Result<std::vector<Member>>> results(nodes, Status::Unavailable("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < nodes; ++i) {
    threads.emplace_back([&, i] {
      auto vfs = open("rendezvous");
      Member self{fmt::format("n{}", i + 1), {fmt::format("http://127.0.0.{}:2380", i + 1)},
                  {fmt::format("http://127.0.0.{}:2379", i + 1)}};
      auto rendezvous = Rendezvous::Create(*vfs, "race", seats);
      REQUIRE(rendezvous.ok());
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      do {
        results[i] = rendezvous->Discover(self);
        if (results[i].status().code() == Status::Code::kFailedPrecondition) return;
        if (results[i].ok() && results[i]->size() == seats) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } while (std::chrono::steady_clock::now() < deadline);
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> sealed;
  int seated = 0, extra = 0;
  for (int i = 0; i < nodes; ++i) {
    if (results[i].status().code() == Status::Code::kFailedPrecondition) {
      ++extra;
      continue;
    }
    REQUIRE_MESSAGE(results[i].ok(), "n" << i + 1 << ": " << results[i].status().message());
    REQUIRE(results[i]->size() == seats);
    std::set<std::string> names;
    for (const auto& m : *results[i]) names.insert(m.name);
    if (sealed.empty()) sealed = names;
    CHECK(names == sealed);
    CHECK(names.count(fmt::format("n{}", i + 1)) == 1);
    ++seated;
  }
  CHECK(seated == static_cast<int>(seats));
  CHECK(extra == nodes - static_cast<int>(seats));
}

}  // namespace quorate::store_checks
