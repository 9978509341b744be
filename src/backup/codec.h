// The stages a backup streams through, each a Sink that passes what it makes to the next one:
// etcd's snapshot stream is checked against the sha256 etcd appends, compressed (gzip or zstd),
// optionally encrypted (AES-256-GCM), and sent to the store; a restore runs the same stages backwards.
// Each stage holds at most a few buffers, so memory stays flat whatever the database's size.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/status.h"

namespace quorate {

class Sink {
 public:
  virtual ~Sink() = default;
  virtual Status Write(std::string_view bytes) = 0;
  // The stream is whole: flush, and check what can only be checked at the end (a hash, a tag).
  virtual Status Finish() = 0;
};

enum class Compression { kGzip, kZstd };
const char* CompressionName(Compression c);  // "gzip", "zstd"
Result<Compression> ParseCompression(const std::string& name);

std::unique_ptr<Sink> MakeCompressor(Compression c, Sink& next);
// DataLoss for bytes that are not such a stream, or one cut short (seen at Finish).
std::unique_ptr<Sink> MakeDecompressor(Compression c, Sink& next);

// An AES-256 key and its ID: the first 16 hex digits of a SHA-256 over it, recorded with each
// backup so that, after a rotation, the key file a backup needs is named, never guessed.
struct BackupKey {
  std::array<unsigned char, 32> bytes{};
  std::string id;
};
// A key file holds 32 bytes, raw or as 64 hex digits (a trailing newline is allowed), e.g. from
// `openssl rand -hex 32`. InvalidArgument naming the file otherwise.
Result<BackupKey> LoadBackupKey(const std::string& path);
// Every key file of --backup-key-file, in order.
Result<std::vector<BackupKey>> LoadBackupKeys(const std::vector<std::string>& paths);
BackupKey BackupKeyFromBytes(const std::array<unsigned char, 32>& bytes);

// Writes a random 12-byte nonce, the ciphertext, then the 16-byte GCM tag.
std::unique_ptr<Sink> MakeEncryptor(const BackupKey& key, Sink& next);
// DataLoss at Finish when the tag does not match (a wrong key or changed bytes). What it passed on
// before is unauthenticated until then: callers use it only after Finish returns OK.
std::unique_ptr<Sink> MakeDecryptor(const BackupKey& key, Sink& next);

inline constexpr uint64_t kSnapshotHashBytes = 32;

// etcd's snapshot stream: the database, then the sha256 of it in its last 32 bytes. Passes every
// byte on unchanged; Finish is DataLoss when the hash does not match.
class SnapshotCheck : public Sink {
 public:
  explicit SnapshotCheck(Sink* next);
  ~SnapshotCheck() override;
  Status Write(std::string_view bytes) override;
  Status Finish() override;
  uint64_t db_bytes() const { return db_bytes_; }
  const std::string& sha256_hex() const { return sha256_hex_; }  // of the database, set by Finish

 private:
  Sink* next_;
  struct Hasher;
  std::unique_ptr<Hasher> hasher_;
  std::string tail_;  // the last up to 32 bytes seen: the hash, once the stream ends
  uint64_t db_bytes_ = 0;
  std::string sha256_hex_;
};

// Counts what passes, for the stored size.
class CountingSink : public Sink {
 public:
  explicit CountingSink(Sink& next) : next_(next) {}
  Status Write(std::string_view bytes) override {
    bytes_ += bytes.size();
    return next_.Write(bytes);
  }
  Status Finish() override { return next_.Finish(); }
  uint64_t bytes() const { return bytes_; }

 private:
  Sink& next_;
  uint64_t bytes_ = 0;
};

// Passes at most `limit` bytes on: the write that would pass it is refused whole, with `refusal`,
// so a decompression bomb stops at the size its metadata declares instead of filling a disk.
class LimitSink : public Sink {
 public:
  LimitSink(Sink& next, uint64_t limit, Status refusal) : next_(next), limit_(limit), refusal_(std::move(refusal)) {}
  Status Write(std::string_view bytes) override {
    if (bytes.size() > limit_ - passed_) return refusal_;
    passed_ += bytes.size();
    return next_.Write(bytes);
  }
  Status Finish() override { return next_.Finish(); }

 private:
  Sink& next_;
  uint64_t limit_;
  Status refusal_;
  uint64_t passed_ = 0;
};

// Passes what it is given to `next` on a thread of its own, through a bounded queue: a backup read
// back inflates on the caller's thread while that one hashes and writes, where one thread did all
// of it in turn. When the queue is full (the thread is waiting for a core: a busy machine gives a
// process's threads no more time than one), the caller passes the oldest piece on itself, so the
// stream goes no slower than on one thread waiting on the other's wake-ups. Pieces reach `next`
// one at a time and in order, from either thread. It holds at most `buffers` queued buffers of
// `piece` bytes (HandoffSize) and one each side, so memory stays flat whatever the stream's size. An
// error of `next` stops the stream: the queue is dropped and the caller's next Write (or Finish)
// returns it. Finish passes on what is left, then calls next's Finish on the caller's thread.
// Dropped without Finish (the caller met an error), it drops what is queued and stops its thread.
// Where no thread can be made it passes each write straight on, the same bytes.
inline constexpr size_t kHandoffPiece = 256 * 1024;
inline constexpr size_t kHandoffBuffers = 4;
// A stream's read back takes the defaults; zstd's compressor smaller ones (codec.cc, kZstdHandoff).
struct HandoffSize {
  size_t piece = kHandoffPiece;
  size_t buffers = kHandoffBuffers;
};
std::unique_ptr<Sink> MakeHandoff(Sink& next, HandoffSize size = {});

// The end of a chain that keeps nothing (verification).
class DiscardSink : public Sink {
 public:
  Status Write(std::string_view) override { return Status::Ok(); }
  Status Finish() override { return Status::Ok(); }
};

}  // namespace quorate
