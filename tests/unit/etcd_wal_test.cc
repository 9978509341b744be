#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "etcd/etcd_wal.h"
#include "quorate/fs.h"
#include "testing/fake_wal.h"
#include "testing/fifo_trap.h"

namespace quorate {
namespace {

// The first 56 bytes of the WAL file of a real etcd 3.4.23 member d900b5d72e088c74 of cluster
// 5c5ed96c7149493e: the CRC record, then the metadata record, each framed and padded to 8 bytes.
const unsigned char kHead[] = {
    0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x84, 0x08, 0x04, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x81, 0x08, 0x01, 0x10, 0xfe, 0xef, 0xcd, 0x85, 0x0f,
    0x1a, 0x15, 0x08, 0xf4, 0x98, 0xa2, 0xf0, 0xf2, 0xba, 0xad, 0x80, 0xd9, 0x01, 0x10, 0xbe, 0x92,
    0xa5, 0x8a, 0xc7, 0xad, 0xb6, 0xaf, 0x5c, 0x00};

std::string Head() { return std::string(reinterpret_cast<const char*>(kHead), sizeof kHead); }

TEST_CASE("the member and cluster ID come out of a real etcd WAL head") {
  auto id = ParseWalIdentity(Head() + std::string(64, '\0'));
  REQUIRE(id.ok());
  CHECK(IdToHex(id->member_id) == "d900b5d72e088c74");
  CHECK(IdToHex(id->cluster_id) == "5c5ed96c7149493e");
}

TEST_CASE("a WAL head that is not etcd's is DataLoss, never a guess") {
  std::string head = Head();
  CHECK(ParseWalIdentity("").status().code() == Status::Code::kDataLoss);
  CHECK(ParseWalIdentity(head.substr(0, 40)).status().code() == Status::Code::kDataLoss);
  std::string swapped = head;
  swapped[9] = 0x01;  // the first record claims to be metadata
  CHECK(ParseWalIdentity(swapped).status().code() == Status::Code::kDataLoss);
  std::string huge = head;
  huge[22] = 0x7f;  // a length beyond the bytes there are
  CHECK(ParseWalIdentity(huge).status().code() == Status::Code::kDataLoss);
  CHECK(ParseWalIdentity(std::string(4096, '\0')).status().code() == Status::Code::kDataLoss);
}

TEST_CASE("ReadWalIdentity reads the first WAL file of a data dir") {
  char tmpl[] = "/tmp/quorate-wal-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  CHECK(ReadWalIdentity(dir).status().IsNotFound());
  REQUIRE(MakeDirs(dir + "/member/wal").ok());
  std::ofstream(dir + "/member/wal/0000000000000000-0000000000000000.wal", std::ios::binary) << Head();
  std::ofstream(dir + "/member/wal/0.tmp", std::ios::binary) << "not a WAL";
  auto id = ReadWalIdentity(dir);
  CHECK((id.ok() && IdToHex(id->member_id) == "d900b5d72e088c74"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a FIFO planted as the first WAL file is refused at once; a preallocated WAL is read by its head") {
  char tmpl[] = "/tmp/quorate-wal-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  REQUIRE(MakeDirs(dir + "/member/wal").ok());
  const std::string fifo = dir + "/member/wal/0000000000000000-0000000000000000.wal";
  REQUIRE(MakeFifo(fifo));
  Result<WalIdentity> got = Status::Internal("not read");
  CHECK(FinishesWithin(std::chrono::seconds(5), fifo, [&] { got = ReadWalIdentity(dir); }));
  CHECK(got.status().code() == Status::Code::kDataLoss);
  CHECK(got.status().message().find("is a FIFO") != std::string::npos);

  // etcd preallocates 64 MB: a sparse 1 GiB one shows that only the head is read.
  REQUIRE(std::filesystem::remove(fifo));
  std::ofstream(fifo, std::ios::binary) << Head();
  REQUIRE(::truncate(fifo.c_str(), off_t{1} << 30) == 0);
  auto id = ReadWalIdentity(dir);
  CHECK((id.ok() && IdToHex(id->member_id) == "d900b5d72e088c74"));
  std::filesystem::remove_all(dir);
}

// The records of two real etcd 3.4.23 WAL files, up to the zeros that follow them. The first is
// member a of a 3-member cluster started alone: the CRC, metadata and empty snapshot records, the
// 3 bootstrap entries of term 1, hard states, and never a leader. The second is a 1-member
// cluster that elected itself: past the bootstrap, entries of term 2.
const char* kAloneOfThree =
    "040000000000008408041000000000001e0000000000008208011085cff598031a1408fea2a68ed7e186ca5b1084c1f6ffd1"
    "8dd7a94f00000e00000000000082080510a7cbebdd0f1a040800100000006c00000000000084080210a1c9fb8c061a620801"
    "10011801225a0800100018fea2a68ed7e186ca5b224a7b226964223a363539383932393039383536323137393435342c2270"
    "65657255524c73223a5b22687474703a2f2f3132372e302e302e313a32333830225d2c226e616d65223a2261227d00000000"
    "6c00000000000084080210e08589e1091a62080110011802225a08001000188fcba0ead390c9a070224a7b226964223a3830"
    "38383738363536303431313531303135392c227065657255524c73223a5b22687474703a2f2f3132372e302e302e323a3233"
    "3830225d2c226e616d65223a2262227d000000006e00000000000082080210fca3aae8021a64080110011803225c08001000"
    "18c5a580cce085cf96bb01224b7b226964223a31333438373530323632373437303035343038352c227065657255524c7322"
    "3a5b22687474703a2f2f3132372e302e302e333a32333830225d2c226e616d65223a2263227d000010000000000000000803"
    "10deed9f870a1a06080110001803180000000000000008031098d9fc97091a0e080210fea2a68ed7e186ca5b180318000000"
    "00000000080310d3b188ea0b1a0e080310fea2a68ed7e186ca5b18031800000000000000080310e2c8dfb1091a0e080410fe"
    "a2a68ed7e186ca5b1803";
const char* kLeaderOfOne =
    "040000000000008408041000000000001f00000000000081080110f3ebd7c3011a150881ba99f1eae4c6c0d501109899909d"
    "ffc1919d08000e000000000000820805109bacbad20b1a040800100000006f00000000000081080210aee39789091a650801"
    "10011801225d080010001881ba99f1eae4c6c0d501224c7b226964223a31353338343630373635353031383738313935332c"
    "227065657255524c73223a5b22687474703a2f2f3132372e302e302e313a3132333830225d2c226e616d65223a2262227d00"
    "1000000000000000080310e3ecb8e40f1a060801100018011000000000000000080210cbcb9a97071a060800100218029800"
    "00000000000008021088b2dbbe071a8d0108001002180322840108819a8abdecc1e8805d12035055541a262f302f6d656d62"
    "6572732f643538313162323661653236356430312f6174747269627574657322347b226e616d65223a2262222c22636c6965"
    "6e7455524c73223a5b22687474703a2f2f3132372e302e302e313a3132333739225d7d280032003800480050005800600068"
    "0070007800800100190000000000008708031094e6cb95091a0f08021081ba99f1eae4c6c0d5011803000000000000004b00"
    "0000000000850802109299f6b1071a41080010021804223908849a8abdecc1e8805d12035055541a0a2f302f76657273696f"
    "6e2205332e342e30280032003800480050005800600068007000780080010000000000001900000000000087080310f8858b"
    "d4011a0f08021081ba99f1eae4c6c0d501180400000000000000";

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST_CASE("a WAL tells whether the member's raft log went past its bootstrap") {
  const std::string alone = FromHex(kAloneOfThree), led = FromHex(kLeaderOfOne);
  const std::string zeros(4096, '\0');
  CHECK_FALSE(ParseWalPastBootstrap(alone + zeros, false));
  CHECK_FALSE(ParseWalPastBootstrap(alone, true));
  CHECK(ParseWalPastBootstrap(led + zeros, false));
  // Cut short by the read, the rest is unknown: past, the careful answer. At a whole file's end,
  // as etcd reads it: not past.
  CHECK(ParseWalPastBootstrap(alone.substr(0, alone.size() - 20), false));
  CHECK_FALSE(ParseWalPastBootstrap(alone.substr(0, alone.size() - 20), true));
  // An entry record whose entry does not read as protobuf (wire type 7) is unknown too: its frame
  // says 5 bytes and 3 of padding, then type 2 and data 0x0f.
  const std::string garbled("\x05\0\0\0\0\0\0\x83\x08\x02\x1a\x01\x0f\0\0\0", 16);
  CHECK(ParseWalPastBootstrap(alone + garbled + zeros, false));

  char tmpl[] = "/tmp/quorate-wal-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  CHECK(ReadWalPastBootstrap(dir).status().IsNotFound());
  REQUIRE(MakeDirs(dir + "/member/wal").ok());
  const std::string path = WalFile(dir);
  std::ofstream(path, std::ios::binary) << alone;
  REQUIRE(truncate(path.c_str(), 64000000) == 0);  // preallocated as etcd does
  auto past = ReadWalPastBootstrap(dir);
  REQUIRE(past.ok());
  CHECK_FALSE(*past);
  std::ofstream(path, std::ios::binary) << led;
  REQUIRE(truncate(path.c_str(), 64000000) == 0);
  past = ReadWalPastBootstrap(dir);
  REQUIRE(past.ok());
  CHECK(*past);

  // The simulator's WAL reads as etcd's does: the head alone and a bootstrap entry are not past, a
  // leader's entry of term 2 is.
  REQUIRE(WriteWal(dir, 0x11, 0x22).ok());
  REQUIRE(AppendWalEntry(dir, 1, 1).ok());
  past = ReadWalPastBootstrap(dir);
  REQUIRE(past.ok());
  CHECK_FALSE(*past);
  REQUIRE(AppendWalEntry(dir, 2, 4).ok());
  past = ReadWalPastBootstrap(dir);
  REQUIRE(past.ok());
  CHECK(*past);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace quorate
