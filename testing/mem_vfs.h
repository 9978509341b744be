// MemVfs, a backup store in memory for the simulator and tests: the objects of one store, shared by
// every handle Share() makes (each node's quorate opens its own), linearizable, with uploads that
// show nothing until their Commit (as the real stores promise).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "quorate/vfs.h"

namespace quorate {

class MemVfs : public Vfs {
 public:
  // `exclusive`: CreateIfAbsent is atomic (a directory, Cloud Storage, Azure Blob). Not: S3's (and
  // s3rver's) check and put are two steps, so racing writers can both "win".
  explicit MemVfs(bool exclusive = true);
  // Another handle on the same objects.
  std::unique_ptr<Vfs> Share() const;

  Result<std::vector<std::string>> List(const std::string& prefix) override;
  Result<std::string> Read(const std::string& key, size_t max_bytes) override;
  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override;
  Status Write(const std::string& key, const std::string& content) override;
  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override;
  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override;
  Status Remove(const std::string& key) override;
  // An upload here commits or vanishes with its handle: none is ever left behind.
  Result<int> RemoveAbandonedUploads(const std::string& prefix, std::chrono::system_clock::time_point started_before) override;
  bool exclusive_create() const override { return objects_->exclusive; }
  std::string Describe() const override { return "mem://"; }
  // Every content ever written under `key`, in order.
  std::vector<std::string> History(const std::string& key) const;

 private:
  struct Objects {
    std::mutex mu;
    std::map<std::string, std::string> by_key;
    std::map<std::string, std::vector<std::string>> history;
    bool exclusive = true;
    void Put(const std::string& key, const std::string& content) {
      by_key[key] = content;
      history[key].push_back(content);
    }
  };
  explicit MemVfs(std::shared_ptr<Objects> objects) : objects_(std::move(objects)) {}
  std::shared_ptr<Objects> objects_;
};

}  // namespace quorate
