// Commits the tail of a member's raft log in a copy of its WAL, for rule 8's recover (DESIGN §4).
// etcd syncs entries to its WAL, but a HardState that only advances `commit` is written without a
// sync, so after a SIGKILL the saved commit may trail entries a quorum acknowledged; started with
// --force-new-cluster, etcd drops every entry past that commit. A leader elected from this member
// would commit its whole log; this does so on the copy, before etcd starts on it: one HardState
// record appended whose commit is the last entry's index. Only ever on a copy: the caller owns it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "quorate/status.h"

namespace quorate {

// What the WAL of <data_dir>/member/wal holds, read as etcd reads it: every *.wal file in order,
// each record's CRC-32C chained from the one before (restarted by each file's CRC record); a torn
// or zeroed tail of the last file ends the records (etcd repairs it so).
struct WalTail {
  bool has_state = false;  // a HardState record was read
  uint64_t term = 0;       // the last HardState's
  uint64_t vote = 0;
  uint64_t commit = 0;
  bool has_entry = false;   // an entry record was read
  uint64_t last_index = 0;  // the last entry record's (a later one at a lower index overrides)
  uint64_t last_term = 0;
  uint64_t max_snapshot_index = 0;  // the highest snapshot record's index
  std::string last_file;            // the last WAL file, and where its last valid record ends
  uint64_t end_offset = 0;
  uint32_t crc = 0;  // the chained CRC after that record
};

// DataLoss for a broken chain or a record that is not etcd's before the last file's tail; NotFound
// without a WAL file.
Result<WalTail> ReadWalTail(const std::string& data_dir);

// When the last entry's index is past the last HardState's commit: truncates the last WAL file
// after its last valid record, appends a HardState record (term at least the last entry's, vote
// kept, commit the last entry's index) chained to it, and fsyncs the file. `committed`, when
// given, gets how many entries that committed (0: nothing written). Nothing is written when the
// WAL cannot be read (ReadWalTail's errors), holds no HardState, or ends in a snapshot record past
// its entries (a snapshot from the leader, which etcd takes only once a HardState commits it).
Status CommitWalTail(const std::string& data_dir, uint64_t* committed = nullptr);

// CRC-32C (Castagnoli) of `data` continued from `crc`, as etcd's WAL chains it.
uint32_t Crc32cExtend(uint32_t crc, std::string_view data);

}  // namespace quorate
