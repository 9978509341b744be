// The head of an etcd WAL file naming a member and a cluster, as etcd's WAL encoder writes it (a CRC
// record, then the metadata record), so tests give a data dir an identity without running etcd.
// Built only into the test binaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "quorate/status.h"

namespace quorate {

std::string WalHead(MemberId member_id, ClusterId cluster_id);

// The first WAL file of a data dir, as etcd names it:
// <data_dir>/member/wal/0000000000000000-0000000000000000.wal.
std::string WalFile(const std::string& data_dir);

// Writes WalFile(data_dir) with that head.
Status WriteWal(const std::string& data_dir, MemberId member_id, ClusterId cluster_id);

// Appends to that file the entry record of a raft entry of `term` at `index`, as a leader's
// entry reaches a member's log (a term of 2 or more is past the bootstrap's).
Status AppendWalEntry(const std::string& data_dir, uint64_t term, uint64_t index);

// A WAL written record by record as etcd's encoder writes it: each record's CRC-32C chained from the
// one before, a file's first record (Crc) carrying the chain so far.
struct WalBuilder {
  uint32_t crc = 0;
  std::string bytes;

  void Record(uint64_t type, const std::string& data);
  void Crc();
  void Metadata(MemberId member_id = 7, ClusterId cluster_id = 9);
  void Snapshot(uint64_t index, uint64_t term);
  // A normal entry carrying `data`.
  void Entry(uint64_t term, uint64_t index, std::string_view data = "put");
  void State(uint64_t term, uint64_t vote, uint64_t commit);
};

// The raft log a WAL file written as above holds, as etcd replays it: its entries in order (one at
// an index already held cuts the log there), and the last HardState's commit. Records only, CRCs not
// checked (ReadWalTail does that); nullopt for a file that is not such a WAL.
struct WalLog {
  struct Entry {
    uint64_t term = 0;
    uint64_t index = 0;
    std::string data;
  };
  std::vector<Entry> entries;
  uint64_t commit = 0;
};
Result<WalLog> ReadWalLog(const std::string& path);

}  // namespace quorate
