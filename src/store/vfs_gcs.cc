#include "store/vfs_gcs.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>

#include "net/cloud/google_credentials.h"
#include "net/cloud/opaque.h"
#include "quorate/json.h"
#include "quorate/text.h"

namespace quorate {
namespace {

// What the store asks Google's chain for: objects read, written and deleted.
constexpr char kReadWriteScope[] = "https://www.googleapis.com/auth/devstorage.read_write";
// Cloud Storage's upload IDs are about 150 bytes.
constexpr size_t kMaxUploadIdBytes = 1024;
// A part Cloud Storage kept only in part is sent again from where it stopped, this many times at most.
constexpr int kMaxPartResends = 3;

// The error JSON of the API: {"error": {"code": 404, "message": "...", "errors": [{"reason": ...}]}};
// empty fields for a body that is not one (alt=media errors come as plain text).
struct GcsError {
  std::string reason;
  std::string message;
};
GcsError ParseGcsError(const std::string& body) {
  auto doc = ParseForeignJson(body);
  if (!doc.ok() || !doc->is_object() || !doc->contains("error") || !(*doc)["error"].is_object()) {
    return {"", body.substr(0, 200)};
  }
  const auto& error = (*doc)["error"];
  GcsError out;
  if (error.contains("message") && error["message"].is_string()) out.message = error["message"].get<std::string>();
  if (error.contains("errors") && error["errors"].is_array() && !error["errors"].empty() &&
      error["errors"][0].is_object() && error["errors"][0].contains("reason") &&
      error["errors"][0]["reason"].is_string()) {
    out.reason = error["errors"][0]["reason"].get<std::string>();
  }
  return out;
}

// The API says a bucket is missing only in words; an object's 404 names the object instead.
bool BucketMissing(const ObjectAnswer& answer) {
  return answer.status == 404 && answer.body.find("bucket does not exist") != std::string::npos;
}

// A resumable upload: a session begun once, parts PUT at their offsets, the last PUT naming the
// total size. The session's URI comes from the answer, but only its upload_id is taken from it:
// requests (and the token) go to the configured endpoint, never to a host an answer names.
class GcsResumable : public PartUpload {
 public:
  GcsResumable(ObjectStore& store, ObjectCall session) : store_(store), session_(std::move(session)) {}

  Status Part(std::string bytes) override {
    const uint64_t end = offset_ + bytes.size();
    for (int sends = 0; offset_ < end; ++sends) {
      if (sends > kMaxPartResends) {
        return Status::Unavailable(fmt::format("{}: the store kept bytes up to {} of {} after {} sends",
                                               session_.what, offset_, end, sends));
      }
      const std::string_view rest = std::string_view(bytes).substr(bytes.size() - (end - offset_));
      ObjectCall put = session_;
      put.method = "PUT";
      put.body = std::string(rest);
      put.headers = {{"Content-Type", "application/octet-stream"},
                     {"Content-Range", fmt::format("bytes {}-{}/*", offset_, end - 1)}};
      auto r = store_.Send(put, store_.PartDeadline(), ObjectStore::kMaxAnswerBytes);
      if (!r.ok()) return r.status();
      // 308 Resume Incomplete: the Range header says how much the store holds so far.
      if (r->status != 308) return store_.Refused(put, *r);
      auto kept = KeptBytes(r->Header("Range"));
      if (!kept || *kept < offset_ || *kept > end) {
        return Status::Unavailable(fmt::format("{}: after bytes {}-{} the store says it holds '{}'", session_.what,
                                               offset_, end - 1, Printable(r->Header("Range"), 60)));
      }
      offset_ = *kept;
    }
    return Status::Ok();
  }

  Status Finish(std::string last) override {
    const uint64_t total = offset_ + last.size();
    ObjectCall put = session_;
    put.method = "PUT";
    put.headers = {{"Content-Type", "application/octet-stream"},
                   {"Content-Range", last.empty() ? fmt::format("bytes */{}", total)
                                                  : fmt::format("bytes {}-{}/{}", offset_, total - 1, total)}};
    put.body = std::move(last);
    auto r = store_.Send(put, store_.PartDeadline(), ObjectStore::kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status != 200 && r->status != 201) return store_.Refused(put, *r);
    return Status::Ok();
  }

  void Abort() override {
    ObjectCall cancel = session_;
    cancel.method = "DELETE";
    (void)store_.Send(cancel, store_.PartDeadline(), ObjectStore::kMaxAnswerBytes);
  }

 private:
  // "bytes=0-8388607": the bytes held are 0 to the end, so their count is end + 1. No header: none.
  static std::optional<uint64_t> KeptBytes(const std::string& range) {
    if (range.empty()) return 0;
    if (range.rfind("bytes=0-", 0) != 0) return std::nullopt;
    uint64_t last = 0;
    const char* first = range.data() + 8;
    const char* stop = range.data() + range.size();
    auto [end, ec] = std::from_chars(first, stop, last);
    if (ec != std::errc() || end != stop) return std::nullopt;
    return last + 1;
  }

  ObjectStore& store_;
  ObjectCall session_;
  uint64_t offset_ = 0;
};

class GcsVfs : public ObjectStore {
 public:
  GcsVfs(Settings settings, std::string bucket, BearerTokenSource token)
      : ObjectStore(std::move(settings)), bucket_(std::move(bucket)), token_(std::move(token)) {}

  Status Refused(const ObjectCall& call, const ObjectAnswer& answer) const override {
    const GcsError error = ParseGcsError(answer.body);
    std::string text = fmt::format("{} {} at {}: HTTP {}", call.method, call.what, settings().endpoint.Text(),
                                   answer.status);
    if (!error.reason.empty()) text += " " + Printable(error.reason, 64);
    if (!error.message.empty()) text += ": " + Printable(error.message, 200);
    if (answer.status == 401) {
      return Status::InvalidArgument(text + "; the token was rejected: give a current OAuth access token of an "
                                            "identity with the devstorage.read_write scope");
    }
    if (answer.status == 403) {
      return Status::InvalidArgument(text + fmt::format("; the identity lacks permission on bucket '{}': grant it "
                                                        "roles/storage.objectUser (storage.objects.create, get, list, "
                                                        "delete)",
                                                        bucket_));
    }
    // An object's own 404 never comes here (it is NotFound, or done for a delete): this one is about
    // the bucket, or about a resumable session that expired.
    if (answer.status == 404 && !IsSession(call)) {
      return Status::InvalidArgument(text + fmt::format("; bucket '{}' does not exist at {}: create it or fix the "
                                                        "bucket in the URL",
                                                        bucket_, settings().endpoint.Text()));
    }
    return Status::InvalidArgument(text);
  }

  bool ObjectMissing(const ObjectAnswer& answer) const override { return !BucketMissing(answer); }

 protected:
  ObjectCall ListCall(const std::string& full_prefix, const std::string& page_token) const override {
    ObjectCall call{"GET", ObjectsPath(), {{"prefix", full_prefix}, {"fields", "items(name),nextPageToken"}}, {}, "",
                    UrlOf(full_prefix)};
    if (settings().page_size) call.query.emplace_back("maxResults", std::to_string(settings().page_size));
    if (!page_token.empty()) call.query.emplace_back("pageToken", page_token);
    return call;
  }

  Result<ObjectListPage> ParseListPage(const std::string& body) const override {
    auto doc = ParseForeignJson(body);
    if (!doc.ok() || !doc->is_object()) {
      return Status::DataLoss(fmt::format("the listing is not the JSON API's object list; it starts '{}'",
                                          Printable(body.substr(0, 80), 80)));
    }
    ObjectListPage page;
    if (doc->contains("items")) {
      const auto& items = (*doc)["items"];
      if (!items.is_array()) return Status::DataLoss("the listing's items are not a list");
      for (const auto& item : items) {
        if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
          return Status::DataLoss("the listing has an item without a name");
        }
        page.names.push_back(item["name"].get<std::string>());
      }
    }
    if (doc->contains("nextPageToken")) {
      if (!(*doc)["nextPageToken"].is_string()) return Status::DataLoss("the listing's nextPageToken is not a string");
      page.next_token = (*doc)["nextPageToken"].get<std::string>();
    }
    return page;
  }

  ObjectCall GetCall(const std::string& full_key) const override {
    return {"GET", ObjectPath(full_key), {{"alt", "media"}}, {}, "", UrlOf(full_key)};
  }

  ObjectCall PutCall(const std::string& full_key, std::string body, bool only_if_absent) const override {
    ObjectCall call{"POST",
                    "/upload" + ObjectsPath(),
                    {{"uploadType", "media"}, {"name", full_key}},
                    {{"Content-Type", "application/octet-stream"}},
                    std::move(body),
                    UrlOf(full_key)};
    // Generation 0 matches only an object that does not exist: the create is atomic at the store.
    if (only_if_absent) call.query.emplace_back("ifGenerationMatch", "0");
    return call;
  }

  ObjectCall DeleteCall(const std::string& full_key) const override {
    return {"DELETE", ObjectPath(full_key), {}, {}, "", UrlOf(full_key)};
  }

  bool AlreadyThere(const ObjectAnswer& answer) const override { return answer.status == 412; }

  Status Authorize(HttpRequest& request, Clock::TimePoint deadline) override {
    auto token = token_.token(deadline);
    if (!token.ok()) return token.status();
    request.headers.emplace_back("Authorization", "Bearer " + *token);
    return Status::Ok();
  }

  bool RenewCredentials() override {
    if (!token_.drop) return false;
    token_.drop();
    return true;
  }

  Result<std::unique_ptr<PartUpload>> StartParts(const std::string& full_key) override {
    ObjectCall start{"POST",
                     "/upload" + ObjectsPath(),
                     {{"uploadType", "resumable"}, {"name", full_key}},
                     {{"X-Upload-Content-Type", "application/octet-stream"}},
                     "",
                     UrlOf(full_key)};
    auto r = Send(start, PartDeadline(), kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status != 200) return Refused(start, *r);
    auto upload_id = UploadIdOf(r->Header("Location"));
    if (!upload_id.ok()) return upload_id.status().Prefixed(fmt::format("starting a resumable upload of {}", start.what));
    ObjectCall session = start;
    session.query.emplace_back("upload_id", *upload_id);
    session.headers.clear();
    return std::unique_ptr<PartUpload>(new GcsResumable(*this, std::move(session)));
  }

 private:
  static bool IsSession(const ObjectCall& call) {
    return std::any_of(call.query.begin(), call.query.end(), [](const auto& q) { return q.first == "upload_id"; });
  }
  std::string ObjectsPath() const { return "/storage/v1/b/" + PercentEncode(bucket_, false) + "/o"; }
  // The object's name is one path segment: its '/' are encoded too.
  std::string ObjectPath(const std::string& full_key) const { return ObjectsPath() + "/" + PercentEncode(full_key, false); }

  // The session URI must be one of this endpoint's upload URIs for this bucket; its upload_id is
  // sent back in a query, so it is checked as any token from an answer.
  Result<std::string> UploadIdOf(const std::string& location) const {
    const std::string path = "/upload" + ObjectsPath() + "?";
    const StoreEndpoint& e = settings().endpoint;
    if (location.rfind(e.Text() + path, 0) != 0 && location.rfind(e.BaseUrl() + path, 0) != 0) {
      return Status::Unavailable(fmt::format("the session URI ({} bytes) is not an upload URI of {} at {}",
                                             location.size(), settings().url, e.Text()));
    }
    std::stringstream query(location.substr(location.find('?') + 1));
    for (std::string pair; std::getline(query, pair, '&');) {
      if (pair.rfind("upload_id=", 0) != 0) continue;
      std::string id = PercentDecode(pair.substr(std::string("upload_id=").size()));
      if (Status s = cloud::CheckOpaque(id, kMaxUploadIdBytes, "the session's upload_id"); !s.ok()) return s;
      return id;
    }
    return Status::Unavailable("the session URI has no upload_id");
  }

  std::string bucket_;
  BearerTokenSource token_;
};

bool IsBucketName(const std::string& name) {
  if (name.size() < 3 || name.size() > 222) return false;
  if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") != std::string::npos) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  // Each dot-separated part is at most 63 characters.
  size_t start = 0;
  for (size_t dot = name.find('.'); ; dot = name.find('.', start)) {
    size_t len = (dot == std::string::npos ? name.size() : dot) - start;
    if (len == 0 || len > 63) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

Result<std::unique_ptr<Vfs>> OpenGcsVfs(const std::string& url, Clock::TimePoint deadline, BearerTokenSource token) {
  auto parts = SplitStoreUrl(url, "gs", {"endpoint", "timeout", "page_size"});
  if (!parts.ok()) return parts.status();
  if (!IsBucketName(parts->first)) {
    return parts->Bad(fmt::format("bucket '{}' is not a Cloud Storage bucket name: 3-63 of a-z, 0-9, '-', '_' "
                                  "(up to 222 with dots), starting and ending with a letter or digit; want "
                                  "gs://bucket/prefix",
                                  Printable(parts->first, 80)));
  }
  ObjectStore::Settings s;
  s.url = "gs://" + parts->first;
  s.root = parts->rest;
  s.deadline = deadline;
  if (!s.root.empty()) {
    if (Status v = ValidateKey(s.root); !v.ok()) return parts->Bad("prefix: " + v.message());
  }
  auto endpoint = ParseStoreEndpoint(parts->params.count("endpoint") ? parts->params.at("endpoint")
                                                                     : "https://storage.googleapis.com");
  if (!endpoint.ok()) return parts->Bad(endpoint.status().message());
  s.endpoint = *endpoint;
  if (Status c = ObjectStore::TakeCommonParams(*parts, 1000, s); !c.ok()) return c;
  if (!token) {
    auto from_env = EnvBearerToken("GOOGLE_OAUTH_ACCESS_TOKEN");
    if (!from_env.ok()) return parts->Bad(from_env.status().message());
    if (*from_env) {
      token = std::move(**from_env);
    } else {
      // Google's chain: a key or external account file, else the metadata server (GCE, GKE).
      cloud::GoogleSettings settings;
      settings.scope = kReadWriteScope;
      auto google = cloud::GoogleTokenSource::Create(settings);
      if (!google.ok()) return parts->Bad(google.status().message());
      token = {[google = *google](Clock::TimePoint deadline) { return google->Token(deadline); },
               [google = *google] { google->Drop(); }};
    }
  }
  return std::unique_ptr<Vfs>(new GcsVfs(std::move(s), parts->first, std::move(token)));
}

}  // namespace quorate
