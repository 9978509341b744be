#include <doctest/doctest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "etcd/etcd_wal.h"
#include "quorate/fs.h"
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

}  // namespace
}  // namespace quorate
