#include "testing/fake_wal.h"

#include <fstream>

#include "etcd/wal_commit.h"

#include <map>
#include <optional>

#include "quorate/fs.h"

namespace quorate {
namespace {

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}

// One walpb.Record framed as etcd's encoder frames it: a little-endian length whose top byte flags
// the padding to 8 bytes, the record, the padding.
std::string Frame(const std::string& record) {
  size_t pad = (8 - record.size() % 8) % 8;
  uint64_t frame = record.size() | (pad != 0 ? (static_cast<uint64_t>(0x80 | pad) << 56) : 0);
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((frame >> (8 * i)) & 0xff);
  return out + record + std::string(pad, '\0');
}

// A protobuf field's varint at `at` in `data`, `at` moved past it; nullopt past the end.
std::optional<uint64_t> ReadVarint(std::string_view data, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < data.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<uint8_t>(data[at++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;
}

// The varint fields of a message, and its length-delimited ones, by field number.
struct Fields {
  std::map<uint64_t, uint64_t> numbers;
  std::map<uint64_t, std::string> bytes;
};

std::optional<Fields> ParseFields(std::string_view data) {
  Fields out;
  for (size_t at = 0; at < data.size();) {
    auto key = ReadVarint(data, at);
    if (!key) return std::nullopt;
    if ((*key & 7) == 0) {
      auto v = ReadVarint(data, at);
      if (!v) return std::nullopt;
      out.numbers[*key >> 3] = *v;
    } else if ((*key & 7) == 2) {
      auto len = ReadVarint(data, at);
      if (!len || *len > data.size() - at) return std::nullopt;
      out.bytes[*key >> 3] = std::string(data.substr(at, *len));
      at += *len;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

void WalBuilder::Record(uint64_t type, const std::string& data) {
  crc = Crc32cExtend(crc, data);
  bytes += Frame("\x08" + Varint(type) + "\x10" + Varint(crc) + "\x1a" + Varint(data.size()) + data);
}

void WalBuilder::Crc() { bytes += Frame("\x08\x04\x10" + Varint(crc)); }

void WalBuilder::Metadata(MemberId member_id, ClusterId cluster_id) {
  Record(1, "\x08" + Varint(member_id) + "\x10" + Varint(cluster_id));
}

void WalBuilder::Snapshot(uint64_t index, uint64_t term) { Record(5, "\x08" + Varint(index) + "\x10" + Varint(term)); }

void WalBuilder::Entry(uint64_t term, uint64_t index, std::string_view data) {
  Record(2, std::string("\x08\x00", 2) + "\x10" + Varint(term) + "\x18" + Varint(index) + "\x22" +
                Varint(data.size()) + std::string(data));
}

void WalBuilder::State(uint64_t term, uint64_t vote, uint64_t commit) {
  Record(3, "\x08" + Varint(term) + "\x10" + Varint(vote) + "\x18" + Varint(commit));
}

Result<WalLog> ReadWalLog(const std::string& path) {
  auto file = ReadFile(path, 64 << 20);
  if (!file.ok()) return file.status();
  const std::string_view data = *file;
  WalLog log;
  for (size_t at = 0; at + 8 <= data.size();) {
    uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= static_cast<uint64_t>(static_cast<uint8_t>(data[at + i])) << (8 * i);
    if (word == 0) break;  // the preallocated rest
    const uint64_t length = word & ~(uint64_t{0xff} << 56);
    const uint64_t pad = (word >> 56) & 0x80 ? (word >> 56) & 0x7 : 0;
    at += 8;
    if (length > data.size() - at) return Status::DataLoss(path + ": a record runs past the end");
    auto record = ParseFields(data.substr(at, length));
    at += length + pad;
    if (!record) return Status::DataLoss(path + ": not a WAL record");
    const uint64_t type = record->numbers[1];
    auto body = ParseFields(record->bytes[3]);
    if (!body) return Status::DataLoss(path + ": not a WAL record's data");
    if (type == 2) {
      const uint64_t index = body->numbers[3];
      while (!log.entries.empty() && log.entries.back().index >= index) log.entries.pop_back();
      log.entries.push_back({body->numbers[2], index, body->bytes[4]});
    } else if (type == 3) {
      log.commit = body->numbers[3];
    }
  }
  return log;
}

std::string WalHead(MemberId member_id, ClusterId cluster_id) {
  std::string crc("\x08\x04\x10\x00", 4);  // type 4 (CRC), crc 0
  std::string metadata = "\x08" + Varint(member_id) + "\x10" + Varint(cluster_id);
  std::string record = "\x08\x01\x1a" + Varint(metadata.size()) + metadata;  // type 1 (metadata), data
  return Frame(crc) + Frame(record);
}

std::string WalFile(const std::string& data_dir) {
  return data_dir + "/member/wal/0000000000000000-0000000000000000.wal";
}

Status WriteWal(const std::string& data_dir, MemberId member_id, ClusterId cluster_id) {
  if (Status s = MakeDirs(data_dir + "/member/wal"); !s.ok()) return s;
  const std::string path = WalFile(data_dir);
  std::ofstream out(path, std::ios::binary);
  out << WalHead(member_id, cluster_id);
  if (!out.flush()) return Status::Internal("cannot write " + path);
  return Status::Ok();
}

Status AppendWalEntry(const std::string& data_dir, uint64_t term, uint64_t index) {
  const std::string path = WalFile(data_dir);
  std::string entry = "\x10" + Varint(term) + "\x18" + Varint(index);       // raftpb.Entry: Term, Index
  std::string record = "\x08\x02\x1a" + Varint(entry.size()) + entry;  // type 2 (entry), data (crc 0: left out)
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << Frame(record);
  if (!out.flush()) return Status::Internal("cannot append to " + path);
  return Status::Ok();
}

}  // namespace quorate
