#include "etcd/etcd_wal.h"

#include <dirent.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "etcd/wal_format.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

using namespace wal;  // the record types and Varint, shared with the other WAL reader
// The two records are a few dozen bytes; a WAL file is preallocated to 64 MB.
constexpr size_t kHeadBytes = 4096;
// A bootstrap writes a few records of a few hundred bytes each; a log that went past it shows an
// entry of a leader's term within its first records.
constexpr size_t kProgressScanBytes = 1 << 20;

// One protobuf field of the two messages involved, which use only varints and bytes.
struct Field {
  uint64_t number = 0;
  uint64_t varint = 0;
  std::string_view bytes;
};

// Reads every field of `message`; false when it is malformed or uses another wire type.
bool ForEachField(std::string_view message, const std::function<void(const Field&)>& fn) {
  while (!message.empty()) {
    auto key = Varint(message);
    if (!key) return false;
    Field f;
    f.number = *key >> 3;
    if ((*key & 7) == 0) {
      auto v = Varint(message);
      if (!v) return false;
      f.varint = *v;
    } else if ((*key & 7) == 2) {
      auto n = Varint(message);
      if (!n || *n > message.size()) return false;
      f.bytes = message.substr(0, *n);
      message.remove_prefix(*n);
    } else {
      return false;
    }
    fn(f);
  }
  return true;
}

struct Record {
  uint64_t type = 0;
  std::string_view data;
};

// One frame: a little-endian uint64 whose low 56 bits are the record's length and whose top byte,
// when its high bit is set, holds the padding to 8 bytes; then the record and the padding.
std::optional<Record> NextRecord(std::string_view& head) {
  if (head.size() < 8) return std::nullopt;
  uint64_t frame = 0;
  for (int i = 7; i >= 0; --i) frame = frame << 8 | static_cast<uint8_t>(head[i]);
  head.remove_prefix(8);
  uint64_t length = frame & 0x00ffffffffffffffULL;
  uint64_t pad = (frame >> 56) & 0x80 ? (frame >> 56) & 0x7 : 0;
  if (length == 0 || length + pad > head.size()) return std::nullopt;
  std::string_view message = head.substr(0, length);
  head.remove_prefix(length + pad);
  Record r;
  bool ok = ForEachField(message, [&](const Field& f) {
    if (f.number == 1) r.type = f.varint;
    if (f.number == 3) r.data = f.bytes;
  });
  if (!ok) return std::nullopt;
  return r;
}

}  // namespace

Result<WalIdentity> ParseWalIdentity(std::string_view head) {
  auto bad = [](const char* why) { return Status::DataLoss(fmt::format("WAL file does not open as etcd's: {}", why)); };
  auto crc = NextRecord(head);
  if (!crc || crc->type != kCrcType) return bad("no CRC record first");
  auto meta = NextRecord(head);
  if (!meta || meta->type != kMetadataType) return bad("no metadata record after the CRC record");
  WalIdentity id;
  bool ok = ForEachField(meta->data, [&](const Field& f) {
    if (f.number == 1) id.member_id = f.varint;
    if (f.number == 2) id.cluster_id = f.varint;
  });
  if (!ok) return bad("unreadable metadata");
  if (id.member_id == 0 || id.cluster_id == 0) return bad("metadata without a member or cluster ID");
  return id;
}

bool ParseWalPastBootstrap(std::string_view head, bool whole_file) {
  while (true) {
    // A zero frame is the end of the records: the rest of a preallocated file is zeros.
    if (head.size() >= 8 && head.substr(0, 8).find_first_not_of('\0') == std::string_view::npos) return false;
    auto record = NextRecord(head);
    // What the read cut short may hold anything; the end of a whole file (a torn last record
    // included) is where etcd itself stops reading.
    if (!record) return !whole_file;
    if (record->type != kEntryType && record->type != kSnapshotType) continue;
    // raftpb.Entry's Term is field 2, and so is walpb.Snapshot's.
    uint64_t term = 0;
    if (!ForEachField(record->data, [&](const Field& f) {
          if (f.number == 2) term = f.varint;
        })) {
      return true;
    }
    if (term >= 2) return true;
  }
}

namespace {

Result<std::string> FirstWalFile(const std::string& data_dir) {
  std::string dir = data_dir + "/member/wal";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".wal") == 0) files.push_back(name);
    }
    closedir(d);
  }
  if (files.empty()) return Status::NotFound(fmt::format("{} holds no WAL file", dir));
  return dir + "/" + *std::min_element(files.begin(), files.end());
}

}  // namespace

Result<bool> ReadWalPastBootstrap(const std::string& data_dir) {
  auto path = FirstWalFile(data_dir);
  if (!path.ok()) return path.status();
  auto head = ReadFileHead(*path, kProgressScanBytes + 1);
  if (!head.ok()) return Status::DataLoss(head.status().message());
  const bool whole = head->size() <= kProgressScanBytes;
  if (!whole) head->resize(kProgressScanBytes);
  return ParseWalPastBootstrap(*head, whole);
}

Result<WalIdentity> ReadWalIdentity(const std::string& data_dir) {
  auto path = FirstWalFile(data_dir);
  if (!path.ok()) return path.status();
  auto head = ReadFileHead(*path, kHeadBytes);
  if (!head.ok()) return Status::DataLoss(head.status().message());
  auto id = ParseWalIdentity(*head);
  if (!id.ok()) return id.status().Prefixed(*path);
  return id;
}

}  // namespace quorate
