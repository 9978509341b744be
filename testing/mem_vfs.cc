#include "testing/mem_vfs.h"

#include <fmt/format.h>

namespace quorate {

MemVfs::MemVfs() : objects_(std::make_shared<Objects>()) {}

std::unique_ptr<Vfs> MemVfs::Share() const { return std::unique_ptr<Vfs>(new MemVfs(objects_)); }

Result<std::vector<std::string>> MemVfs::List(const std::string& prefix) {
  std::lock_guard lock(objects_->mu);
  std::vector<std::string> keys;
  // A prefix is read as a directory: "a" lists "a/b", never "ab".
  for (const auto& [key, content] : objects_->by_key) {
    if (prefix.empty() || key.rfind(prefix + "/", 0) == 0) keys.push_back(key);
  }
  return keys;
}

Result<std::string> MemVfs::Read(const std::string& key, size_t max_bytes) {
  std::lock_guard lock(objects_->mu);
  auto it = objects_->by_key.find(key);
  if (it == objects_->by_key.end()) return Status::NotFound(fmt::format("{}{}: no such object", Describe(), key));
  if (it->second.size() > max_bytes) {
    return Status::DataLoss(fmt::format("{}{} holds {} bytes, more than the {} read", Describe(), key, it->second.size(), max_bytes));
  }
  return it->second;
}

Result<bool> MemVfs::CreateIfAbsent(const std::string& key, const std::string& content) {
  std::lock_guard lock(objects_->mu);
  return objects_->by_key.emplace(key, content).second;
}

Status MemVfs::Write(const std::string& key, const std::string& content) {
  std::lock_guard lock(objects_->mu);
  objects_->by_key[key] = content;
  return Status::Ok();
}

Result<std::unique_ptr<VfsUpload>> MemVfs::Upload(const std::string& key) {
  struct MemUpload : VfsUpload {
    MemUpload(std::unique_ptr<Vfs> store, std::string key) : store(std::move(store)), key(std::move(key)) {}
    Status Append(std::string_view bytes) override {
      content.append(bytes);
      return Status::Ok();
    }
    Status Commit() override { return store->Write(key, content); }
    std::unique_ptr<Vfs> store;
    std::string key, content;
  };
  return std::unique_ptr<VfsUpload>(new MemUpload(Share(), key));
}

Result<std::unique_ptr<VfsDownload>> MemVfs::Download(const std::string& key) {
  struct MemDownload : VfsDownload {
    explicit MemDownload(std::string content) : content(std::move(content)) {}
    Result<size_t> Read(char* buffer, size_t size) override {
      const size_t n = content.copy(buffer, size, at);
      at += n;
      return n;
    }
    std::string content;
    size_t at = 0;
  };
  auto content = Read(key, std::string::npos);
  if (!content.ok()) return content.status();
  return std::unique_ptr<VfsDownload>(new MemDownload(std::move(*content)));
}

Status MemVfs::Remove(const std::string& key) {
  std::lock_guard lock(objects_->mu);
  objects_->by_key.erase(key);
  return Status::Ok();
}

Result<int> MemVfs::RemoveAbandonedUploads(const std::string&, std::chrono::system_clock::time_point) { return 0; }

}  // namespace quorate
