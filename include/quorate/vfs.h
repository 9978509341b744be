// A small store of named records: a shared directory (NFS, hostPath) or a bucket prefix (S3, Cloud
// Storage, Azure Blob). The rendezvous, the `file` and `s3` providers, `cluster-init --bucket` and
// backups are written against this seam only, so they behave the same on every backend.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "quorate/clock.h"
#include "quorate/status.h"

namespace quorate {

// One object written as a stream, for what is too large to hold in memory (a backup): nothing is
// visible under its key until Commit returns OK. An upload dropped uncommitted (an error, a leader
// change, a crash) leaves nothing that List shows.
class VfsUpload {
 public:
  virtual ~VfsUpload() = default;
  virtual Status Append(std::string_view bytes) = 0;
  virtual Status Commit() = 0;
};

// One object read as a stream, a piece at a time.
class VfsDownload {
 public:
  virtual ~VfsDownload() = default;
  // Up to `size` bytes into `buffer`; 0 at the end of the object.
  virtual Result<size_t> Read(char* buffer, size_t size) = 0;
};

class Vfs {
 public:
  virtual ~Vfs() = default;
  // The full keys (as Read takes them) below `prefix`, a key read as a directory ("a" lists "a/b"
  // and "a/c/d", never "ab"; "" lists everything), sorted. Every page of a listing is read.
  virtual Result<std::vector<std::string>> List(const std::string& prefix) = 0;
  // NotFound when absent; DataLoss when it holds more than `max_bytes` (refused before the whole of
  // it is read) or is not a record at all (a FIFO planted in a shared directory).
  virtual Result<std::string> Read(const std::string& key, size_t max_bytes) = 0;
  // Writes only if `key` is absent: true when this call created it, false when it was there.
  // Only when exclusive_create() is true do racing writers get exactly one true between them.
  virtual Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) = 0;
  // Replaces `key`; readers see the old or the new content, never a mix.
  virtual Status Write(const std::string& key, const std::string& content) = 0;
  // Objects of any size, as streams: Upload replaces `key` at its Commit; Download reads `key`
  // (NotFound when absent). Remove deletes `key`; a key already absent is not an error.
  virtual Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) = 0;
  virtual Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) = 0;
  virtual Status Remove(const std::string& key) = 0;
  // Uploads under `prefix` begun before `started_before` and never committed (their writer was
  // killed mid-way): the directory store's hidden temp files, S3's open multipart uploads, whose
  // parts a bucket keeps, and bills, until they are aborted. Removed; returns how many.
  virtual Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                             std::chrono::system_clock::time_point started_before) = 0;
  virtual bool exclusive_create() const = 0;
  // file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://account/container/prefix, for
  // messages.
  virtual std::string Describe() const = 0;
};

// "file:///dir" (or a plain path), "s3://bucket/prefix?endpoint=http://host:port&region=r",
// "gs://bucket/prefix" or "azblob://account/container/prefix" (each with ?endpoint= and more). No
// call of a cloud store lasts past `deadline` (a command's whole budget).
Result<std::unique_ptr<Vfs>> OpenVfs(const std::string& url, Clock::TimePoint deadline = Clock::kNever);

// The forms OpenVfs takes, for messages; and whether `url` starts as one of its URLs does, for a
// flag's check before the store is opened.
inline constexpr const char* kStoreForms =
    "file:///dir, s3://bucket/prefix, gs://bucket/prefix or azblob://account/container/prefix";
bool HasStoreScheme(const std::string& url);

// Keys are relative names of [A-Za-z0-9._:-] segments joined by '/': no segment starting with '.'
// (so no "..", and room for a backend's hidden temp files), no control characters, at most 512
// bytes. InvalidArgument naming the key otherwise.
Status ValidateKey(const std::string& key);

}  // namespace quorate
