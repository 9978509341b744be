// ForwardingVfs: a Vfs that passes every call on to another one, for a test to override the calls it
// watches or breaks (a second handle on one store, a store that records what it is asked to write).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "quorate/vfs.h"

namespace quorate {

class ForwardingVfs : public Vfs {
 public:
  explicit ForwardingVfs(Vfs& inner) : inner_(inner) {}
  Result<std::vector<std::string>> List(const std::string& prefix) override { return inner_.List(prefix); }
  Result<std::string> Read(const std::string& key, size_t max_bytes) override { return inner_.Read(key, max_bytes); }
  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override {
    return inner_.CreateIfAbsent(key, content);
  }
  Status Write(const std::string& key, const std::string& content) override { return inner_.Write(key, content); }
  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override { return inner_.Upload(key); }
  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override { return inner_.Download(key); }
  Status Remove(const std::string& key) override { return inner_.Remove(key); }
  Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                     std::chrono::system_clock::time_point started_before) override {
    return inner_.RemoveAbandonedUploads(prefix, started_before);
  }
  bool exclusive_create() const override { return inner_.exclusive_create(); }
  std::string Describe() const override { return inner_.Describe(); }

 private:
  Vfs& inner_;
};

}  // namespace quorate
