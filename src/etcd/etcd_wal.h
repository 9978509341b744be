// Whose data an etcd data dir holds, read from etcd's write-ahead log without etcd: every WAL file
// opens with a CRC record and a metadata record naming the member ID and the cluster ID (etcd's
// wal/encoder.go framing around walpb.Record, with an etcdserverpb.Metadata in it). init reads it
// to tell, before any quorum exists, that its own member was removed from its own cluster.
#pragma once

#include <string>
#include <string_view>

#include "core/cluster.h"
#include "quorate/status.h"

namespace quorate {

// From the first WAL file of <data-dir>/member/wal. NotFound without a WAL file; DataLoss when it does
// not open with the records above.
Result<WalIdentity> ReadWalIdentity(const std::string& data_dir);

// The same from the first bytes of a WAL file.
Result<WalIdentity> ParseWalIdentity(std::string_view head);

// Whether the member's raft log went past its bootstrap. etcd writes a new member's initial
// membership as entries of term 1, which no leader ever has (the first election makes term 2), and
// every entry a leader appends carries its term: an entry or a snapshot of term 2 or more means this
// member once heard from a leader, so the cluster had a quorum and committed past its bootstrap.
// Read from the start of the first WAL file. True also when it cannot tell (a record it cannot read,
// or no end of the records within what it reads): callers take "past" as the careful answer.
// NotFound without a WAL file.
Result<bool> ReadWalPastBootstrap(const std::string& data_dir);

// The same from the start of a WAL file; `whole_file` when `head` is all of it.
bool ParseWalPastBootstrap(std::string_view head, bool whole_file);

}  // namespace quorate
