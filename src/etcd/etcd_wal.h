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

}  // namespace quorate
