#include "etcd/wal_commit.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "etcd/wal_format.h"
#include "quorate/fs.h"

namespace quorate {
namespace {

using namespace wal;  // the record types and Varint, shared with the other WAL reader
// etcd tells a torn write from corruption by a 512-byte sector of the record left all zeros.
constexpr uint64_t kSectorBytes = 512;
// A WAL file is preallocated to 64 MB and grows past it only by one large record.
constexpr size_t kMaxWalFileBytes = size_t{1} << 30;

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

// The varint and bytes fields of a protobuf message (the messages read here use no others, but
// fixed-width fields are skipped rather than refused); false when it is malformed.
struct Fields {
  std::array<uint64_t, 8> varint{};
  std::array<std::string_view, 8> bytes{};
};

bool ParseFields(std::string_view m, Fields& f) {
  while (!m.empty()) {
    auto key = Varint(m);
    if (!key) return false;
    const uint64_t number = *key >> 3;
    switch (*key & 7) {
      case 0: {
        auto v = Varint(m);
        if (!v) return false;
        if (number < f.varint.size()) f.varint[number] = *v;
        break;
      }
      case 1:
      case 5: {
        const size_t n = (*key & 7) == 1 ? 8 : 4;
        if (m.size() < n) return false;
        m.remove_prefix(n);
        break;
      }
      case 2: {
        auto n = Varint(m);
        if (!n || *n > m.size()) return false;
        if (number < f.bytes.size()) f.bytes[number] = m.substr(0, *n);
        m.remove_prefix(*n);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

// etcd's decoder: a record that fails to parse or to match its CRC in the last file is a torn write
// (not corruption) when a sector's part of it, counted from the file's start, is all zeros.
bool IsTorn(std::string_view data, uint64_t file_offset) {
  while (!data.empty()) {
    const size_t chunk = std::min<uint64_t>(kSectorBytes - file_offset % kSectorBytes, data.size());
    if (data.substr(0, chunk).find_first_not_of('\0') == std::string_view::npos) return true;
    data.remove_prefix(chunk);
    file_offset += chunk;
  }
  return false;
}

Result<std::vector<std::string>> WalFiles(const std::string& wal_dir) {
  std::vector<std::pair<uint64_t, std::string>> files;
  DIR* d = opendir(wal_dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} holds no WAL file", wal_dir));
    return Status::FromErrno(errno, "list " + wal_dir);
  }
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    uint64_t seq = 0, index = 0;
    char tail = 0;
    // etcd's own names only: %016x-%016x.wal (not its .tmp files nor a repair's .broken copies).
    if (name.size() != 37 || name.compare(33, 4, ".wal") != 0) continue;
    if (std::sscanf(name.c_str(), "%16" SCNx64 "-%16" SCNx64 ".wa%c", &seq, &index, &tail) != 3) continue;
    files.emplace_back(seq, wal_dir + "/" + name);
  }
  closedir(d);
  if (files.empty()) return Status::NotFound(fmt::format("{} holds no WAL file", wal_dir));
  std::sort(files.begin(), files.end());
  std::vector<std::string> paths;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0 && files[i].first != files[i - 1].first + 1) {
      return Status::DataLoss(
          fmt::format("{}: the WAL files' sequence numbers are not consecutive at {}", wal_dir, files[i].second));
    }
    paths.push_back(files[i].second);
  }
  return paths;
}

std::string Frame(const std::string& record) {
  const size_t pad = (8 - record.size() % 8) % 8;
  uint64_t word = record.size();
  if (pad != 0) word |= static_cast<uint64_t>(0x80 | pad) << 56;
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((word >> (8 * i)) & 0xff);
  return out + record + std::string(pad, '\0');
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, std::string_view data) {
  const auto& table = CrcTable();
  crc = ~crc;
  for (char ch : data) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

Result<WalTail> ReadWalTail(const std::string& data_dir) {
  auto files = WalFiles(data_dir + "/member/wal");
  if (!files.ok()) return files.status();
  WalTail tail;
  uint32_t crc = 0;
  for (size_t i = 0; i < files->size(); ++i) {
    const std::string& path = (*files)[i];
    const bool last = i + 1 == files->size();
    auto content = ReadFile(path, kMaxWalFileBytes);
    if (!content.ok()) return content.status();
    const std::string_view file = *content;
    auto bad = [&](uint64_t at, const std::string& why) {
      return Status::DataLoss(fmt::format("{}: {} at offset {}", path, why, at));
    };
    uint64_t off = 0;
    while (true) {
      // The end of the file, or the zeros of its preallocated rest: the records go on in the next.
      if (off == file.size()) break;
      if (file.size() - off < 8) {
        if (last) break;
        return bad(off, "a cut length word");
      }
      uint64_t word = 0;
      for (int b = 7; b >= 0; --b) word = word << 8 | static_cast<uint8_t>(file[off + b]);
      if (word == 0) break;
      const uint64_t length = word & 0x00ffffffffffffffULL;
      const uint64_t pad = (word >> 63) != 0 ? (word >> 56) & 0x7 : 0;
      if (length > file.size() - off - 8 || pad > file.size() - off - 8 - length) {
        if (last) break;
        return bad(off, "a record longer than the file");
      }
      const std::string_view framed = file.substr(off + 8, length + pad);
      const std::string_view message = framed.substr(0, length);
      Fields rec;
      if (!ParseFields(message, rec)) {
        if (last && IsTorn(framed, off + 8)) break;
        return bad(off, "a record that is not a walpb.Record");
      }
      const uint64_t type = rec.varint[1];
      const auto rec_crc = static_cast<uint32_t>(rec.varint[2]);
      const std::string_view data = rec.bytes[3];
      if (type == kCrcType) {
        // The first file's opens the chain; each later one must carry the chain so far.
        if (crc != 0 && rec_crc != crc) return bad(off, "a CRC record that breaks the chain");
        crc = rec_crc;
      } else {
        const uint32_t next = Crc32cExtend(crc, data);
        if (rec_crc != next) {
          if (last && IsTorn(framed, off + 8)) break;
          return bad(off, fmt::format("a CRC mismatch (record {:08x}, chain {:08x})", rec_crc, next));
        }
        crc = next;
        Fields f;
        if (type != kMetadataType && !ParseFields(data, f)) return bad(off, "an unreadable record");
        if (type == kEntryType) {  // raftpb.Entry: Term 2, Index 3
          tail.has_entry = true;
          tail.last_term = f.varint[2];
          tail.last_index = f.varint[3];
        } else if (type == kStateType) {  // raftpb.HardState: term 1, vote 2, commit 3
          tail.has_state = true;
          tail.term = f.varint[1];
          tail.vote = f.varint[2];
          tail.commit = f.varint[3];
        } else if (type == kSnapshotType) {  // walpb.Snapshot: index 1, term 2
          tail.max_snapshot_index = std::max(tail.max_snapshot_index, f.varint[1]);
        } else if (type != kMetadataType) {
          return bad(off, fmt::format("a record of unknown type {}", type));
        }
      }
      off += 8 + length + pad;
    }
    if (last) {
      tail.last_file = path;
      tail.end_offset = off;
      tail.crc = crc;
    }
  }
  return tail;
}

Status CommitWalTail(const std::string& data_dir, uint64_t* committed) {
  if (committed != nullptr) *committed = 0;
  auto tail = ReadWalTail(data_dir);
  if (!tail.ok()) return tail.status();
  if (!tail->has_state || !tail->has_entry || tail->last_index <= tail->commit) return Status::Ok();
  if (tail->max_snapshot_index > tail->last_index) return Status::Ok();

  std::string state;
  state += '\x08';
  PutVarint(state, std::max(tail->term, tail->last_term));
  state += '\x10';
  PutVarint(state, tail->vote);
  state += '\x18';
  PutVarint(state, tail->last_index);
  std::string record;
  record += '\x08';
  PutVarint(record, kStateType);
  record += '\x10';
  PutVarint(record, Crc32cExtend(tail->crc, state));
  record += '\x1a';
  PutVarint(record, state.size());
  record += state;
  const std::string framed = Frame(record);

  const std::string& path = tail->last_file;
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  Status s = Status::Ok();
  if (ftruncate(fd, static_cast<off_t>(tail->end_offset)) != 0) {
    s = Status::FromErrno(errno, "truncate " + path);
  } else {
    size_t done = 0;
    while (done < framed.size()) {
      ssize_t n = pwrite(fd, framed.data() + done, framed.size() - done, static_cast<off_t>(tail->end_offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s = Status::FromErrno(errno, "write " + path);
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (s.ok() && fsync(fd) != 0) s = Status::FromErrno(errno, "fsync " + path);
  }
  close(fd);
  if (!s.ok()) return s;
  if (committed != nullptr) *committed = tail->last_index - tail->commit;
  return Status::Ok();
}

}  // namespace quorate
