#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "etcd/wal_commit.h"
#include "quorate/fs.h"
#include "testing/fake_wal.h"

namespace quorate {
namespace {

struct TempDataDir {
  std::string dir;
  TempDataDir() {
    char tmpl[] = "/tmp/quorate-walcommit-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    REQUIRE(MakeDirs(dir + "/member/wal").ok());
  }
  ~TempDataDir() { std::filesystem::remove_all(dir); }
  std::string File(int seq) const {
    char name[64];
    snprintf(name, sizeof name, "/member/wal/%016x-%016x.wal", seq, seq * 10);
    return dir + name;
  }
  void Write(int seq, const std::string& bytes) const { std::ofstream(File(seq), std::ios::binary) << bytes; }
  std::string Read(int seq) const {
    auto got = ReadFile(File(seq), 1 << 20);
    REQUIRE(got.ok());
    return *got;
  }
};

TEST_CASE("CRC-32C is Castagnoli's, chained as etcd chains it") {
  CHECK(Crc32cExtend(0, "123456789") == 0xe3069283u);
  CHECK(Crc32cExtend(Crc32cExtend(0, "1234"), "56789") == 0xe3069283u);
}

TEST_CASE("a HardState whose commit trails the last entries gets one appended with the last entry's index") {
  TempDataDir d;
  WalBuilder w;
  w.Crc();
  w.Metadata();
  w.Snapshot(0, 0);
  w.Entry(1, 1);
  w.State(1, 0, 1);
  w.Entry(2, 2);
  w.Entry(2, 3);
  w.State(2, 5, 2);
  w.Entry(2, 4);
  w.Entry(2, 5);  // synced; the HardState committing them was not
  const std::string before = w.bytes;
  d.Write(0, w.bytes + std::string(4096, '\0'));  // the preallocated rest

  uint64_t committed = 99;
  REQUIRE(CommitWalTail(d.dir, &committed).ok());
  CHECK(committed == 3);
  auto tail = ReadWalTail(d.dir);
  REQUIRE(tail.ok());
  CHECK(tail->commit == 5);
  CHECK(tail->term == 2);
  CHECK(tail->vote == 5);
  CHECK(tail->last_index == 5);
  // Exactly what etcd's encoder would have written next, with the chained crc, and nothing after.
  w.State(2, 5, 5);
  CHECK(d.Read(0) == w.bytes);
  CHECK(d.Read(0).compare(0, before.size(), before) == 0);

  // Committed already: nothing more is written.
  REQUIRE(CommitWalTail(d.dir, &committed).ok());
  CHECK(committed == 0);
  CHECK(d.Read(0) == w.bytes);
}

TEST_CASE("the chain runs across WAL files, and a later entry at a lower index is the log's end") {
  TempDataDir d;
  WalBuilder w;
  w.Crc();
  w.Metadata();
  w.Entry(2, 10);
  w.Entry(2, 11);
  w.Entry(2, 12);
  w.State(2, 1, 10);
  d.Write(3, w.bytes);
  w.bytes.clear();
  w.Crc();
  w.Metadata();
  w.State(2, 1, 10);
  w.Entry(3, 11);  // a new leader's entry overrides 11 and 12
  w.State(3, 2, 10);
  d.Write(4, w.bytes + std::string(100, '\0'));

  uint64_t committed = 0;
  REQUIRE(CommitWalTail(d.dir, &committed).ok());
  CHECK(committed == 1);
  auto tail = ReadWalTail(d.dir);
  REQUIRE(tail.ok());
  CHECK(tail->commit == 11);
  CHECK(tail->term == 3);
  CHECK(tail->last_file == d.File(4));
  w.State(3, 2, 11);
  CHECK(d.Read(4) == w.bytes);
}

TEST_CASE("a torn last record ends the records; the HardState goes after the last whole one") {
  TempDataDir d;
  WalBuilder w;
  w.Crc();
  w.Metadata();
  w.Entry(2, 1);
  w.State(2, 1, 0);
  w.Entry(2, 2);
  const std::string whole = w.bytes;
  WalBuilder torn = w;
  torn.Entry(2, 3);
  // The last record's frame written, its body not: a sector of it all zeros.
  std::string bytes = torn.bytes;
  std::string padded = bytes + std::string(1024, '\0');
  for (size_t i = whole.size() + 8; i < bytes.size(); ++i) padded[i] = '\0';
  d.Write(0, padded);

  uint64_t committed = 0;
  REQUIRE(CommitWalTail(d.dir, &committed).ok());
  CHECK(committed == 2);
  w.State(2, 1, 2);
  CHECK(d.Read(0) == w.bytes);
  auto tail = ReadWalTail(d.dir);
  REQUIRE(tail.ok());
  CHECK(tail->commit == 2);
  CHECK(tail->last_index == 2);
}

TEST_CASE("a CRC mismatch that is no torn write is refused, and nothing is written") {
  TempDataDir d;
  WalBuilder w;
  w.Crc();
  w.Metadata();
  w.Entry(2, 1);
  w.State(2, 1, 0);
  w.Entry(2, 2);
  std::string bytes = w.bytes;
  bytes[bytes.size() - 4] ^= 0x01;  // a byte of the last entry's data ("put")
  d.Write(0, bytes);
  uint64_t committed = 7;
  Status s = CommitWalTail(d.dir, &committed);
  CHECK(s.code() == Status::Code::kDataLoss);
  CHECK(s.message().find("CRC mismatch") != std::string::npos);
  CHECK(committed == 0);
  CHECK(d.Read(0) == bytes);

  // A later file whose CRC record does not carry the chain is refused as well.
  TempDataDir d2;
  WalBuilder a;
  a.Crc();
  a.Metadata();
  a.Entry(2, 1);
  a.State(2, 1, 0);
  d2.Write(0, a.bytes);
  WalBuilder b;
  b.crc = a.crc ^ 1;
  b.Crc();
  b.Metadata();
  b.Entry(2, 2);
  d2.Write(1, b.bytes);
  CHECK(CommitWalTail(d2.dir, &committed).code() == Status::Code::kDataLoss);
  CHECK(d2.Read(1) == b.bytes);
}

TEST_CASE("nothing is written when the log ends in a snapshot from the leader or holds no HardState") {
  TempDataDir d;
  WalBuilder w;
  w.Crc();
  w.Metadata();
  w.Entry(2, 1);
  w.State(2, 1, 0);
  w.Entry(2, 2);
  w.Snapshot(50, 3);  // the leader's snapshot, saved; the HardState committing it was not
  d.Write(0, w.bytes);
  uint64_t committed = 7;
  REQUIRE(CommitWalTail(d.dir, &committed).ok());
  CHECK(committed == 0);
  CHECK(d.Read(0) == w.bytes);

  TempDataDir none;
  WalBuilder n;
  n.Crc();
  n.Metadata();
  n.Entry(1, 1);
  none.Write(0, n.bytes);
  REQUIRE(CommitWalTail(none.dir, &committed).ok());
  CHECK(committed == 0);
  CHECK(none.Read(0) == n.bytes);

  TempDataDir empty;
  std::filesystem::remove_all(empty.dir + "/member/wal");
  CHECK(CommitWalTail(empty.dir).IsNotFound());
}

}  // namespace
}  // namespace quorate
