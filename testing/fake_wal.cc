#include "testing/fake_wal.h"

#include <fstream>

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

}  // namespace

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
