#include "quorate/vfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "quorate/fs.h"
#include "quorate/s3.h"
#include "store/vfs_azblob.h"
#include "store/vfs_gcs.h"

namespace quorate {
namespace {

constexpr size_t kMaxKeyBytes = 512;

// Keys come from stores other nodes wrote: never echo a control character to a terminal.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text.substr(0, 80)) {
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > 80) out += "...";
  return out;
}

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
         c == ':';  // RFC 3339 times name backups (etcd-manager's layout)
}

// A streamed object: a hidden file beside its final name, renamed over it at Commit. Private (0600):
// a backup holds the whole keyspace.
class FileUpload : public VfsUpload {
 public:
  FileUpload(std::string path, std::string temp, int fd) : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  ~FileUpload() override {
    if (fd_ >= 0) close(fd_);
    if (!committed_) unlink(temp_.c_str());
  }

  Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t n = write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "write " + temp_);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (fsync(fd_) != 0) return Status::FromErrno(errno, "fsync " + temp_);
    close(fd_);
    fd_ = -1;
    if (rename(temp_.c_str(), path_.c_str()) != 0) return Status::FromErrno(errno, "rename " + temp_ + " to " + path_);
    committed_ = true;
    return SyncDir(path_.substr(0, path_.rfind('/')));
  }

 private:
  std::string path_, temp_;
  int fd_;
  bool committed_ = false;
};

class FileDownload : public VfsDownload {
 public:
  FileDownload(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~FileDownload() override { close(fd_); }
  Result<size_t> Read(char* buffer, size_t size) override {
    while (true) {
      ssize_t n = read(fd_, buffer, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "read " + path_);
      return static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_;
};

// A shared directory. Records are written to a hidden temp file first, so a reader (or List) never
// sees half of one; the temp name is random because several hosts (NFS) and threads write here.
class DirectoryVfs : public Vfs {
 public:
  explicit DirectoryVfs(std::string root) : root_(std::move(root)) {}

  Result<std::vector<std::string>> List(const std::string& prefix) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    namespace fs = std::filesystem;
    const fs::path base = prefix.empty() ? fs::path(root_) : fs::path(root_) / prefix;
    std::vector<std::string> keys;
    std::error_code ec;
    fs::recursive_directory_iterator it(base, ec);
    if (ec == std::errc::no_such_file_or_directory) return keys;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      // Dot files are this backend's temp files and NFS's .nfsXXXX silly renames, not records.
      if (it->path().filename().string().front() == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) keys.push_back(it->path().lexically_relative(root_).generic_string());
    }
    if (ec) return Status::FromErrno(ec.value(), "list " + base.string());
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  Result<std::string> Read(const std::string& key, size_t max_bytes) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    return ReadFile(PathOf(key), max_bytes);
  }

  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override {
    auto tmp = WriteTemp(key, content);
    if (!tmp.ok()) return tmp.status();
    const std::string path = PathOf(key);
    // link(2) fails with EEXIST when the name is taken, atomically, even on NFSv2/3 where
    // O_EXCL on the final name is not safe; the record appears whole or not at all.
    bool created = link(tmp->c_str(), path.c_str()) == 0;
    int err = errno;
    if (!created && err == EEXIST) {
      // NFS may retransmit a link whose reply was lost and answer EEXIST to our own success:
      // the temp file then has two names (the recipe of open(2)'s O_EXCL notes).
      struct stat st;
      created = stat(tmp->c_str(), &st) == 0 && st.st_nlink == 2;
    } else if (!created) {
      unlink(tmp->c_str());
      return Status::FromErrno(err, "link " + *tmp + " to " + path);
    }
    unlink(tmp->c_str());
    if (!created) return false;
    if (Status s = SyncDir(DirOf(path)); !s.ok()) return s;
    return true;
  }

  Status Write(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    return WriteFileAtomic(PathOf(key), content, kRecordMode);
  }

  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const std::string path = PathOf(key);
    const std::string dir = DirOf(path);
    if (Status s = MakeDirs(dir, 0700); !s.ok()) return s;
    std::string temp = fmt::format("{}/.upload-{}-{}", dir, getpid(), uploads_++);
    int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Status::FromErrno(errno, "create " + temp);
    return std::unique_ptr<VfsUpload>(new FileUpload(path, std::move(temp), fd));
  }

  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const std::string path = PathOf(key);
    // Non-blocking open and a check after it, as ReadFile does: a FIFO planted here is refused.
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) return Status::NotFound(path + " does not exist");
    if (fd < 0) return Status::FromErrno(errno, "open " + path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return Status::DataLoss(path + " is not a regular file");
    }
    fcntl(fd, F_SETFL, 0);
    return std::unique_ptr<VfsDownload>(new FileDownload(path, fd));
  }

  Status Remove(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const std::string path = PathOf(key);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno(errno, "remove " + path);
    // The folder of a backup goes with its last file; one still holding others stays.
    std::string dir = DirOf(path);
    while (dir.size() > root_.size() && rmdir(dir.c_str()) == 0) dir = DirOf(dir);
    return Status::Ok();
  }

  Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                     std::chrono::system_clock::time_point started_before) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    namespace fs = std::filesystem;
    const fs::path base = prefix.empty() ? fs::path(root_) : fs::path(root_) / prefix;
    const auto cutoff = std::chrono::system_clock::to_time_t(started_before);
    int removed = 0;
    std::vector<std::string> dirs;
    std::error_code ec;
    fs::recursive_directory_iterator it(base, ec);
    if (ec == std::errc::no_such_file_or_directory) return 0;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string path = it->path().string();
      if (it->path().filename().string().rfind(".upload-", 0) != 0) continue;
      struct stat st;
      // lstat: a planted link is never followed, only a regular file of ours is removed.
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime >= cutoff) continue;
      if (unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno(errno, "remove " + path);
      ++removed;
      dirs.push_back(DirOf(path));
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return Status::Unavailable(fmt::format("listing {}: {}", base.string(), ec.message()));
    }
    // A folder that held only the abandoned upload goes with it, as Remove does for a last file.
    for (std::string dir : dirs) {
      while (dir.size() > root_.size() && rmdir(dir.c_str()) == 0) dir = DirOf(dir);
    }
    return removed;
  }

  bool exclusive_create() const override { return true; }
  std::string Describe() const override { return "file://" + root_; }

 private:
  // Readable by all: the quorate processes sharing the directory may run as other users on other
  // hosts, and a record holds names and URLs only, never a secret.
  static constexpr int kRecordMode = 0644;

  std::string PathOf(const std::string& key) const { return root_ + "/" + key; }
  static std::string DirOf(const std::string& path) { return path.substr(0, path.rfind('/')); }

  // A hidden, fsynced copy of `content` beside `key`'s final name.
  Result<std::string> WriteTemp(const std::string& key, const std::string& content) {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    return WriteHiddenTemp(PathOf(key), content, kRecordMode);
  }

  std::string root_;
  std::atomic<uint64_t> uploads_{0};
};

Result<std::unique_ptr<Vfs>> OpenDirectory(const std::string& url, const std::string& dir) {
  std::error_code ec;
  std::string root = std::filesystem::absolute(dir, ec).lexically_normal().string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  // A shared store that is missing is most likely not mounted: writing into the bare mount
  // point would split the rendezvous, so it is never created here.
  if (ec || !std::filesystem::is_directory(root, ec)) {
    return Status::InvalidArgument(
        fmt::format("store '{}': {} is not a directory; create it or mount the shared volume there", url, root));
  }
  return std::unique_ptr<Vfs>(new DirectoryVfs(root));
}

}  // namespace

Status ValidateKey(const std::string& key) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format(
        "key '{}' {}; a key is segments of letters, digits, '.', '_', ':' and '-' joined by '/', at most {} bytes",
        Printable(key), why, kMaxKeyBytes));
  };
  if (key.empty()) return bad("is empty");
  if (key.size() > kMaxKeyBytes) return bad(fmt::format("is {} bytes long", key.size()));
  auto control = std::find_if(key.begin(), key.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
  if (control != key.end()) return bad("holds a control character");
  if (key.front() == '/') return bad("is absolute");
  size_t start = 0;
  while (true) {
    size_t slash = key.find('/', start);
    std::string_view segment = std::string_view(key).substr(start, slash == std::string::npos ? slash : slash - start);
    if (segment.empty()) return bad("has an empty segment");
    if (segment.front() == '.') return bad(fmt::format("has a segment '{}' starting with '.'", segment));
    auto odd = std::find_if_not(segment.begin(), segment.end(), IsKeyChar);
    if (odd != segment.end()) return bad(fmt::format("holds '{}'", Printable(std::string_view(&*odd, 1))));
    if (slash == std::string::npos) return Status::Ok();
    start = slash + 1;
  }
}

bool HasStoreScheme(const std::string& url) {
  for (const char* scheme : {"file:///", "s3://", "gs://", "azblob://"}) {
    if (url.rfind(scheme, 0) == 0) return true;
  }
  return false;
}

Result<std::unique_ptr<Vfs>> OpenVfs(const std::string& url, Clock::TimePoint deadline) {
  if (url.empty()) return Status::InvalidArgument(fmt::format("store URL is empty; want {}", kStoreForms));
  if (url.rfind("file://", 0) == 0) {
    std::string path = url.substr(7);
    if (path.empty() || path.front() != '/') {
      return Status::InvalidArgument(
          fmt::format("store '{}': a file URL names an absolute directory: file:///dir", Printable(url)));
    }
    return OpenDirectory(url, path);
  }
  if (url.rfind("s3://", 0) == 0) return OpenS3Vfs(url, deadline);
  if (url.rfind("gs://", 0) == 0) return OpenGcsVfs(url, deadline);
  if (url.rfind("azblob://", 0) == 0) return OpenAzblobVfs(url, deadline);
  if (url.find("://") != std::string::npos) {
    return Status::InvalidArgument(
        fmt::format("store '{}': unknown scheme; want a plain path or {}", Printable(url), kStoreForms));
  }
  return OpenDirectory(url, url);
}

}  // namespace quorate
