// The head of an etcd WAL file naming a member and a cluster, as etcd's WAL encoder writes it (a CRC
// record, then the metadata record), so tests give a data dir an identity without running etcd.
// Built only into the test binaries.
#pragma once

#include <string>

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

}  // namespace quorate
