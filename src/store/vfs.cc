#include "quorate/vfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "quorate/fs.h"
#include "store/s3.h"
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

// A streamed object: a hidden file beside its final name in the open directory `dir`, renamed over
// it at Commit. Private (0600): a backup holds the whole keyspace.
class FileUpload : public VfsUpload {
 public:
  FileUpload(UniqueFd dir, std::string dir_path, std::string name, std::string temp, UniqueFd fd)
      : dir_(std::move(dir)), dir_path_(std::move(dir_path)), name_(std::move(name)), temp_(std::move(temp)),
        fd_(std::move(fd)) {}
  ~FileUpload() override {
    fd_.reset();
    if (!committed_) unlinkat(dir_.get(), temp_.c_str(), 0);
  }

  Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t n = write(fd_.get(), bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "write " + dir_path_ + "/" + temp_);
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (fsync(fd_.get()) != 0) return Status::FromErrno(errno, "fsync " + dir_path_ + "/" + temp_);
    fd_.reset();
    if (renameat(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str()) != 0) {
      return Status::FromErrno(errno, "rename " + dir_path_ + "/" + temp_ + " to " + name_);
    }
    committed_ = true;
    if (fsync(dir_.get()) != 0) return Status::FromErrno(errno, "fsync " + dir_path_);
    return Status::Ok();
  }

 private:
  UniqueFd dir_;
  std::string dir_path_, name_, temp_;
  UniqueFd fd_;
  bool committed_ = false;
};

class FileDownload : public VfsDownload {
 public:
  FileDownload(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  Result<size_t> Read(char* buffer, size_t size) override {
    while (true) {
      ssize_t n = read(fd_.get(), buffer, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "read " + path_);
      return static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  UniqueFd fd_;
};

// A key's folder (empty for one at the root) and its last segment.
std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// A shared directory. Records are written to a hidden temp file first, so a reader (or List) never
// sees half of one; the temp name is random because several hosts (NFS) and threads write here.
// Below its root it follows no symbolic link: every segment of a key is opened with openat and
// O_NOFOLLOW from the folder above it, so a link planted in the store (a folder, or a record such
// as _etcd_backup.meta pointing at /etc/shadow) is refused when named and skipped when listed,
// never read, written or removed through. The root itself is the operator's, a link or not.
class DirectoryVfs : public Vfs {
 public:
  DirectoryVfs(std::string root, UniqueFd root_fd) : root_(std::move(root)), root_fd_(std::move(root_fd)) {}

  Result<std::vector<std::string>> List(const std::string& prefix) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    std::vector<std::string> keys;
    auto base = OpenFolder(prefix, /*create=*/false);
    if (!base.ok() && base.status().IsNotFound()) return keys;
    if (!base.ok()) return base.status();
    // Dot files are this backend's temp files and NFS's .nfsXXXX silly renames, not records.
    Status walked = Walk(base->get(), prefix, [&](const std::string& key, const std::string& name, const Stat& st) {
      if (name.front() == '.') return false;
      if (S_ISREG(st.st_mode)) keys.push_back(key);
      return S_ISDIR(st.st_mode);
    });
    if (!walked.ok()) return walked;
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  Result<std::string> Read(const std::string& key, size_t max_bytes) override {
    auto fd = OpenRecord(key);
    if (!fd.ok()) return fd.status();
    return ReadOpenFile(fd->get(), PathOf(key), max_bytes);
  }

  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const auto [folder, name] = SplitKey(key);
    auto dir = OpenFolder(folder, /*create=*/true, kFolderMode);
    if (!dir.ok()) return dir.status();
    auto tmp = WriteHiddenTempAt(dir->get(), PathOf(folder), name, content, kRecordMode);
    if (!tmp.ok()) return tmp.status();
    // link(2) fails with EEXIST when the name is taken, atomically, even on NFSv2/3 where
    // O_EXCL on the final name is not safe; the record appears whole or not at all.
    bool created = linkat(dir->get(), tmp->c_str(), dir->get(), name.c_str(), 0) == 0;
    int err = errno;
    if (!created && err == EEXIST) {
      // NFS may retransmit a link whose reply was lost and answer EEXIST to our own success:
      // the temp file then has two names (the recipe of open(2)'s O_EXCL notes).
      struct stat st;
      created = fstatat(dir->get(), tmp->c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_nlink == 2;
    } else if (!created) {
      unlinkat(dir->get(), tmp->c_str(), 0);
      return Status::FromErrno(err, "link " + PathOf(folder) + "/" + *tmp + " to " + PathOf(key));
    }
    unlinkat(dir->get(), tmp->c_str(), 0);
    if (!created) return false;
    if (fsync(dir->get()) != 0) return Status::FromErrno(errno, "fsync " + PathOf(folder));
    return true;
  }

  Status Write(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const auto [folder, name] = SplitKey(key);
    auto dir = OpenFolder(folder, /*create=*/true, kFolderMode);
    if (!dir.ok()) return dir.status();
    auto tmp = WriteHiddenTempAt(dir->get(), PathOf(folder), name, content, kRecordMode);
    if (!tmp.ok()) return tmp.status();
    if (renameat(dir->get(), tmp->c_str(), dir->get(), name.c_str()) != 0) {
      int err = errno;
      unlinkat(dir->get(), tmp->c_str(), 0);
      return Status::FromErrno(err, "rename " + PathOf(folder) + "/" + *tmp + " to " + PathOf(key));
    }
    if (fsync(dir->get()) != 0) return Status::FromErrno(errno, "fsync " + PathOf(folder));
    return Status::Ok();
  }

  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const auto [folder, name] = SplitKey(key);
    auto dir = OpenFolder(folder, /*create=*/true, 0700);
    if (!dir.ok()) return dir.status();
    std::string temp = fmt::format(".upload-{}-{}", getpid(), uploads_++);
    UniqueFd fd(openat(dir->get(), temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return Status::FromErrno(errno, "create " + PathOf(folder) + "/" + temp);
    return std::unique_ptr<VfsUpload>(
        new FileUpload(std::move(*dir), PathOf(folder), name, std::move(temp), std::move(fd)));
  }

  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override {
    auto fd = OpenRecord(key);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return Status::DataLoss(PathOf(key) + " is not a regular file");
    }
    fcntl(fd->get(), F_SETFL, 0);
    return std::unique_ptr<VfsDownload>(new FileDownload(PathOf(key), std::move(*fd)));
  }

  Status Remove(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const auto [folder, name] = SplitKey(key);
    auto dir = OpenFolder(folder, /*create=*/false);
    if (!dir.ok()) return dir.status().IsNotFound() ? Status::Ok() : dir.status();
    // unlinkat removes a planted link itself, never what it points at.
    if (unlinkat(dir->get(), name.c_str(), 0) != 0 && errno != ENOENT) {
      return Status::FromErrno(errno, "remove " + PathOf(key));
    }
    RemoveEmptyFolders(folder);
    return Status::Ok();
  }

  Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                     std::chrono::system_clock::time_point started_before) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    auto base = OpenFolder(prefix, /*create=*/false);
    if (!base.ok()) return base.status().IsNotFound() ? Result<int>(0) : base.status();
    const auto cutoff = std::chrono::system_clock::to_time_t(started_before);
    std::vector<std::string> abandoned;
    Status walked = Walk(base->get(), prefix, [&](const std::string& key, const std::string& name, const Stat& st) {
      // Only a regular file of ours is removed, never a planted link.
      if (S_ISREG(st.st_mode) && name.rfind(".upload-", 0) == 0 && st.st_mtime < cutoff) abandoned.push_back(key);
      return S_ISDIR(st.st_mode);
    });
    if (!walked.ok()) return walked;
    int removed = 0;
    for (const std::string& key : abandoned) {
      const auto [folder, name] = SplitKey(key);
      auto dir = OpenFolder(folder, /*create=*/false);
      if (!dir.ok()) continue;
      if (unlinkat(dir->get(), name.c_str(), 0) != 0 && errno != ENOENT) {
        return Status::FromErrno(errno, "remove " + PathOf(key));
      }
      ++removed;
      // A folder that held only the abandoned upload goes with it, as Remove does for a last file.
      RemoveEmptyFolders(folder);
    }
    return removed;
  }

  bool exclusive_create() const override { return true; }
  std::string Describe() const override { return "file://" + root_; }

 private:
  // Readable by all: the quorate processes sharing the directory may run as other users on other
  // hosts, and a record holds names and URLs only, never a secret.
  static constexpr int kRecordMode = 0644;
  static constexpr int kFolderMode = 0755;

  std::string PathOf(const std::string& key) const { return key.empty() ? root_ : root_ + "/" + key; }

  // What an openat with O_NOFOLLOW refused at `key`, said as the store's rule. A link opened as a
  // folder (O_DIRECTORY) fails with ENOTDIR, as any file that is not one does: lstat tells them apart.
  Status Refusal(const std::string& key, int err, const char* what) const {
    if (err == ENOENT) return Status::NotFound(PathOf(key) + " does not exist");
    struct stat st;
    if (err == ELOOP || (err == ENOTDIR && fstatat(root_fd_.get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISLNK(st.st_mode))) {
      return Status::DataLoss(fmt::format("{} is a symbolic link; the store {} follows none below its root",
                                          PathOf(key), Describe()));
    }
    if (err == ENOTDIR) return Status::DataLoss(fmt::format("{} is not a directory", PathOf(key)));
    return Status::FromErrno(err, std::string(what) + " " + PathOf(key));
  }

  // The folder `rel` ("" for the root), each segment opened from the one above it, none a link;
  // missing ones are made with `mode` when `create`.
  Result<UniqueFd> OpenFolder(const std::string& rel, bool create, int mode = 0700) const {
    UniqueFd dir(openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return Status::FromErrno(errno, "open " + root_);
    size_t start = 0;
    while (start < rel.size()) {
      size_t slash = rel.find('/', start);
      if (slash == std::string::npos) slash = rel.size();
      const std::string segment = rel.substr(start, slash - start);
      const std::string so_far = rel.substr(0, slash);
      if (create && mkdirat(dir.get(), segment.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
        return Status::FromErrno(errno, "create directory " + PathOf(so_far));
      }
      UniqueFd next(openat(dir.get(), segment.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) return Refusal(so_far, errno, "open");
      dir = std::move(next);
      start = slash + 1;
    }
    return dir;
  }

  // The record `key`, opened for reading without following a link or waiting on a FIFO.
  Result<UniqueFd> OpenRecord(const std::string& key) const {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    const auto [folder, name] = SplitKey(key);
    auto dir = OpenFolder(folder, /*create=*/false);
    if (!dir.ok()) return dir.status();
    UniqueFd fd(openat(dir->get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return Refusal(key, errno, "open");
    return fd;
  }

  // Empty folders from `folder` up to the root's child, as a removed backup's last file leaves them.
  void RemoveEmptyFolders(std::string folder) const {
    while (!folder.empty()) {
      const auto [parent, name] = SplitKey(folder);
      auto dir = OpenFolder(parent, /*create=*/false);
      if (!dir.ok() || unlinkat(dir->get(), name.c_str(), AT_REMOVEDIR) != 0) return;
      folder = parent;
    }
  }

  // Every entry below the open folder `dir` (key `rel`), depth first, none through a link: `visit`
  // gets each one's key, name and lstat, and a folder is entered when it returns true.
  using Stat = struct stat;
  using Visitor = std::function<bool(const std::string& key, const std::string& name, const Stat& st)>;
  Status Walk(int dir, const std::string& rel, const Visitor& visit) const {
    UniqueFd own(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* stream = own ? fdopendir(own.get()) : nullptr;
    if (stream == nullptr) return Status::FromErrno(errno, "list " + PathOf(rel));
    own.release();  // the stream owns it now
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* entry = readdir(stream)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    const int err = errno;
    closedir(stream);
    if (err != 0) return Status::FromErrno(err, "list " + PathOf(rel));
    for (const std::string& name : names) {
      const std::string key = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
      // A key is at most kMaxKeyBytes: deeper nesting is not the store's.
      if (!visit(key, name, st) || key.size() > kMaxKeyBytes) continue;
      UniqueFd sub(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) continue;  // replaced by a link or removed since its lstat
      if (Status s = Walk(sub.get(), key, visit); !s.ok()) return s;
    }
    return Status::Ok();
  }

  std::string root_;
  UniqueFd root_fd_;
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
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return Status::FromErrno(errno, fmt::format("store '{}': open {}", url, root));
  return std::unique_ptr<Vfs>(new DirectoryVfs(root, std::move(root_fd)));
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
