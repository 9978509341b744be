#include "testing/mem_vfs.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "quorate/fs.h"

namespace quorate {

MemVfs::MemVfs(bool exclusive) : objects_(std::make_shared<Objects>()) { objects_->exclusive = exclusive; }

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
  if (it == objects_->by_key.end()) return Status::NotFound(fmt::format("{}/{}: no such object", Describe(), key));
  if (it->second.size() > max_bytes) return TooLargeToRead(Describe() + "/" + key, it->second.size(), max_bytes);
  return it->second;
}

Result<bool> MemVfs::CreateIfAbsent(const std::string& key, const std::string& content) {
  {
    std::lock_guard lock(objects_->mu);
    if (objects_->by_key.contains(key)) return false;
    if (objects_->exclusive) {
      objects_->Put(key, content);
      return true;
    }
  }
  // S3's two steps: another writer's check may come in between.
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  std::lock_guard lock(objects_->mu);
  objects_->Put(key, content);
  return true;
}

Status MemVfs::Write(const std::string& key, const std::string& content) {
  std::lock_guard lock(objects_->mu);
  objects_->Put(key, content);
  return Status::Ok();
}

std::vector<std::string> MemVfs::History(const std::string& key) const {
  std::lock_guard lock(objects_->mu);
  auto it = objects_->history.find(key);
  return it == objects_->history.end() ? std::vector<std::string>{} : it->second;
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
