#include "testing/fake_snapshot.h"

#include <openssl/sha.h>

#include <algorithm>

namespace quorate {

std::string FakeSnapshot::Database() const {
  // Compressible but not constant, as a bbolt file of keys is.
  std::string db(db_bytes, '\0');
  uint32_t x = 12345;
  for (uint64_t i = 0; i < db_bytes; ++i) {
    x = x * 1103515245 + 12345;
    db[i] = static_cast<char>(i % 7 == 0 ? (x >> 16) & 0xff : 'k');
  }
  return db;
}

std::string FakeSnapshot::Stream() const {
  std::string db = Database();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(db.data()), db.size(), digest);
  if (wrong_hash) digest[0] ^= 1;
  return db + std::string(reinterpret_cast<char*>(digest), sizeof digest);
}

SnapshotSource FakeSnapshot::Source() const {
  return [*this](const SnapshotSink& sink) -> Result<SnapshotHeader> {
    const std::string stream = Stream();
    constexpr size_t kPiece = 32 * 1024;  // etcd's
    for (size_t at = 0; at < stream.size(); at += kPiece) {
      if (at >= fail_after) return Status::Unavailable("snapshot of fake: the stream broke");
      if (Status s = sink(std::string_view(stream).substr(at, kPiece)); !s.ok()) return s;
    }
    return SnapshotHeader{"http://fake:2379", 0xc1, 0xa1, revision, "3.4.23"};
  };
}

}  // namespace quorate
