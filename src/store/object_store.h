// What the cloud object stores (gs://, azblob://) share, written once: the store URL and its
// parameters, one call's tries within a deadline, listings read page by page under a cap with every
// page token and name checked, and the Vfs itself built on a cloud's few requests (put, conditional
// put, get, ranged get, delete, list, an upload in parts). Each cloud (vfs_gcs.cc, vfs_azblob.cc)
// only says how its requests look and how its answers read; the guarantees live here.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "net/cloud/request.h"
#include "quorate/clock.h"
#include "quorate/http.h"
#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

// The bearer tokens of the cloud identity quorate runs as (src/net/cloud/'s chains, or a fixed one).
struct BearerTokenSource {
  // A token, fetched (or refreshed) within `deadline`. Unavailable when the identity's service did
  // not answer in time; InvalidArgument when only the operator can fix it.
  std::function<Result<std::string>(Clock::TimePoint deadline)> token;
  // The store refused the token (401: revoked or expired early): the next one is fetched afresh.
  // Empty for a token that cannot be renewed.
  std::function<void()> drop;
  explicit operator bool() const { return static_cast<bool>(token); }
};

// The operator's own token in the environment variable `name` when it is set (terraform's google
// provider takes GOOGLE_OAUTH_ACCESS_TOKEN first the same way); nullopt when it is not. A token that
// could not go into a header is InvalidArgument, and is never shown.
Result<std::optional<BearerTokenSource>> EnvBearerToken(const char* name);

// The kit's encoder (net/cloud/request.h), for the stores' paths and queries. And back: "%XX"
// decoded, anything else kept as it is.
using cloud::PercentEncode;
std::string PercentDecode(const std::string& text);

// A store URL taken apart: "scheme://a/b/c?name=value&...", the path after the scheme split at its
// first '/' and the parameters percent-decoded. InvalidArgument naming the URL for a parameter that
// is not in `known` or is given twice.
struct StoreUrl {
  std::string url;    // as given, for messages
  std::string first;  // bucket, or account
  std::string rest;   // the path after it, trailing '/' dropped
  std::map<std::string, std::string> params;
  Status Bad(const std::string& why) const;
};
Result<StoreUrl> SplitStoreUrl(const std::string& url, const std::string& scheme, const std::set<std::string>& known);

struct StoreEndpoint {
  std::string scheme;  // http or https
  std::string host;    // an IPv6 host in brackets
  int port = 0;        // 0: the scheme's default
  std::string BaseUrl() const;  // scheme://host:port, for the HTTP client
  std::string Text() const;     // as the operator would write it, for messages
};
// "http(s)://host[:port]" without a path, query or user; InvalidArgument naming it otherwise.
Result<StoreEndpoint> ParseStoreEndpoint(const std::string& text);

// One request of a cloud's REST API.
struct ObjectCall {
  std::string method;
  std::string path;  // percent-encoded, as it goes on the wire
  std::vector<std::pair<std::string, std::string>> query;  // not yet encoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string what;  // the object or listing it is about, as a URL for messages: gs://bucket/key
  std::string Target() const;  // path and encoded query
};

struct ObjectAnswer {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string Header(const std::string& name) const;
};

// One listing page: the full object names on it, and the token of the next page (empty: the last).
struct ObjectListPage {
  std::vector<std::string> names;
  std::string next_token;
};

// A cloud's upload in parts, begun by ObjectStore::StartParts: nothing is visible until Finish.
class PartUpload {
 public:
  virtual ~PartUpload() = default;
  // One full part (ObjectStore::kPartBytes); more follow.
  virtual Status Part(std::string bytes) = 0;
  // The last bytes (possibly none), then the object appears whole.
  virtual Status Finish(std::string last) = 0;
  // The upload is dropped uncommitted: tell the store, as far as it can be told.
  virtual void Abort() = 0;
};

class ObjectStore : public Vfs {
 public:
  // A streamed object goes up and comes down in parts of this size: memory stays flat whatever the
  // size. A multiple of 256 KiB, as Cloud Storage's resumable chunks must be.
  static constexpr size_t kPartBytes = 8 << 20;
  // An answer to a PUT or DELETE, or a refusal, is a few hundred bytes.
  static constexpr size_t kMaxAnswerBytes = 64 * 1024;

  struct Settings {
    std::string url;   // scheme://bucket, without the prefix: keys are url/root/key
    std::string root;  // the URL's prefix
    StoreEndpoint endpoint;
    std::chrono::milliseconds timeout{5000};  // the longest one Vfs call takes, tries included
    int page_size = 0;                        // 0: the store's default
    Clock::TimePoint deadline = Clock::kNever;  // the caller's: no call lasts past it
  };
  // timeout= and page_size= (1 to `max_page_size`) from `url`'s parameters into `settings`.
  static Status TakeCommonParams(const StoreUrl& url, int max_page_size, Settings& settings);

  Result<std::vector<std::string>> List(const std::string& prefix) override;
  Result<std::string> Read(const std::string& key, size_t max_bytes) override;
  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override;
  Status Write(const std::string& key, const std::string& content) override;
  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override;
  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override;
  Status Remove(const std::string& key) override;
  // Neither cloud lists what an unfinished upload sent, and both discard it after a week (a
  // resumable session expires, uncommitted blocks are collected): there is nothing to remove.
  Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                     std::chrono::system_clock::time_point started_before) override;
  // Both clouds refuse a create over an existing object atomically.
  bool exclusive_create() const override { return true; }
  std::string Describe() const override;

  // Up to 3 tries until `deadline`, paced by a backoff; an answer that is not retryable is returned
  // whatever its status. A body over `max_body` is DataLoss; no answer in time is Unavailable.
  Result<ObjectAnswer> Send(const ObjectCall& call, Clock::TimePoint deadline, size_t max_body);
  // One call of a stream (a part): at least 2 minutes (timeout= is sized for small records), within
  // the caller's deadline.
  Clock::TimePoint PartDeadline() const;
  std::string UrlOf(const std::string& full_key) const;
  const Settings& settings() const { return s_; }

  // A refusal of `call` as a Status: the cloud's error code and message, escaped, and what to fix.
  virtual Status Refused(const ObjectCall& call, const ObjectAnswer& answer) const = 0;
  // A 404 about the object, not about the bucket or container.
  virtual bool ObjectMissing(const ObjectAnswer& answer) const = 0;

 protected:
  explicit ObjectStore(Settings settings) : s_(std::move(settings)) {}

  // A cloud's requests, for full object names (root/key) and full prefixes ("root/dir/", "").
  virtual ObjectCall ListCall(const std::string& full_prefix, const std::string& page_token) const = 0;
  virtual Result<ObjectListPage> ParseListPage(const std::string& body) const = 0;
  virtual ObjectCall GetCall(const std::string& full_key) const = 0;  // a Range header may be added
  virtual ObjectCall PutCall(const std::string& full_key, std::string body, bool only_if_absent) const = 0;
  virtual ObjectCall DeleteCall(const std::string& full_key) const = 0;
  // The answer to PutCall(only_if_absent) when the object was already there.
  virtual bool AlreadyThere(const ObjectAnswer& answer) const = 0;
  virtual bool Retryable(const ObjectAnswer& answer) const;
  // Adds the credentials to one try of a request (a signature carries the time of sending).
  virtual Status Authorize(HttpRequest& request, Clock::TimePoint deadline) = 0;
  // After a 401: true when fresh credentials can be fetched, so the request is tried once more.
  virtual bool RenewCredentials() { return false; }
  virtual Result<std::unique_ptr<PartUpload>> StartParts(const std::string& full_key) = 0;

  std::string FullKey(const std::string& key) const { return s_.root.empty() ? key : s_.root + "/" + key; }

 private:
  Result<std::vector<std::string>> ListNow(const std::string& prefix);
  Result<ObjectAnswer> SendInTime(const ObjectCall& call, Clock::TimePoint deadline, size_t max_body);
  // Each Vfs call ends within timeout= and the caller's deadline, tries and pages included.
  Clock::TimePoint CallDeadline() const;

  Settings s_;
  Status last_failure_;
};

}  // namespace quorate
