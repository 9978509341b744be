// FakeSnapshot, a SnapshotSource without etcd: a made-up database of the asked size, streamed in
// etcd's pieces with etcd's trailing sha256, that can break off part way or carry a wrong hash.
#pragma once

#include <cstdint>
#include <string>

#include "backup/backup.h"

namespace quorate {

struct FakeSnapshot {
  uint64_t db_bytes = 1 << 20;
  bool wrong_hash = false;
  uint64_t fail_after = UINT64_MAX;  // bytes streamed before the stream breaks (Unavailable)
  int64_t revision = 42;
  // The database it streams, whole (for tests to compare with what a restore wrote).
  std::string Database() const;
  // The stream: the database, then its sha256.
  std::string Stream() const;
  SnapshotSource Source() const;
};

}  // namespace quorate
