// MemVfs, a backup store in memory for the simulator and tests: the objects of one store, shared by
// every handle Share() makes (each node's quorate opens its own), linearizable, with uploads that
// show nothing until their Commit (as the real stores promise).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "quorate/vfs.h"

namespace quorate {

class MemVfs : public Vfs {
 public:
  MemVfs();
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
  bool exclusive_create() const override { return true; }
  std::string Describe() const override { return "mem://"; }

 private:
  struct Objects {
    std::mutex mu;
    std::map<std::string, std::string> by_key;
  };
  explicit MemVfs(std::shared_ptr<Objects> objects) : objects_(std::move(objects)) {}
  std::shared_ptr<Objects> objects_;
};

}  // namespace quorate
