// What of etcd's write-ahead log format both WAL readers need (etcd_wal: whose data a dir holds;
// wal_commit: the tail recover commits): walpb.Record's types and protobuf's varint.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace quorate::wal {

// walpb.Record types (etcd wal/wal.go).
inline constexpr uint64_t kMetadataType = 1;
inline constexpr uint64_t kEntryType = 2;
inline constexpr uint64_t kStateType = 3;
inline constexpr uint64_t kCrcType = 4;
inline constexpr uint64_t kSnapshotType = 5;

// A base-128 varint taken off the front of `rest`; nullopt when it runs past the end or 64 bits.
inline std::optional<uint64_t> Varint(std::string_view& rest) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && !rest.empty(); shift += 7) {
    auto b = static_cast<uint8_t>(rest.front());
    rest.remove_prefix(1);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  return std::nullopt;
}

}  // namespace quorate::wal
