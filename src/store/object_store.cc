#include "store/object_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "net/cloud/opaque.h"
#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/text.h"

namespace quorate {
namespace {

constexpr int kTries = 3;
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
constexpr auto kPartTime = std::chrono::minutes(2);
// A page of 1000 names is a few hundred KB of JSON or XML. A registry holds a few keys a member,
// so a listing that goes on for more pages is a store handing out page tokens without end.
constexpr size_t kMaxListPageBytes = 4 << 20;
constexpr int kMaxListPages = 1000;
// Cloud Storage's page tokens and Azure's markers are a few hundred bytes.
constexpr size_t kMaxPageTokenBytes = 4096;
// OAuth access tokens run to about 2 KB (Azure AD's JWTs); anything far larger is not one.
constexpr size_t kMaxBearerTokenBytes = 16 * 1024;

// Up to one part is held; an object that fits in it is one PUT at Commit, a larger one goes up in
// parts that stay invisible until the last.
class ChunkedUpload : public VfsUpload {
 public:
  ChunkedUpload(std::function<Result<std::unique_ptr<PartUpload>>()> start, std::function<Status(std::string)> put_whole)
      : start_(std::move(start)), put_whole_(std::move(put_whole)) {
    buffer_.reserve(ObjectStore::kPartBytes);
  }
  ~ChunkedUpload() override {
    if (parts_ && !committed_) parts_->Abort();
  }

  Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      size_t take = std::min(bytes.size(), ObjectStore::kPartBytes - buffer_.size());
      buffer_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (buffer_.size() < ObjectStore::kPartBytes) continue;
      if (!parts_) {
        auto started = start_();
        if (!started.ok()) return started.status();
        parts_ = std::move(*started);
      }
      Status sent = parts_->Part(std::exchange(buffer_, {}));
      buffer_.reserve(ObjectStore::kPartBytes);
      if (!sent.ok()) return sent;
    }
    return Status::Ok();
  }

  Status Commit() override {
    Status s = parts_ ? parts_->Finish(std::exchange(buffer_, {})) : put_whole_(std::exchange(buffer_, {}));
    committed_ = s.ok();
    return s;
  }

 private:
  std::function<Result<std::unique_ptr<PartUpload>>()> start_;
  std::function<Status(std::string)> put_whole_;
  std::unique_ptr<PartUpload> parts_;
  std::string buffer_;
  bool committed_ = false;
};

// Ranged GETs of one part each, so no answer is larger than a part.
class RangedDownload : public VfsDownload {
 public:
  RangedDownload(ObjectStore& store, ObjectCall get) : store_(store), get_(std::move(get)) {}

  // Asks for the first part, so a missing object is NotFound at Download, not at the first Read.
  Status Start() { return Fetch(); }

  Result<size_t> Read(char* buffer, size_t size) override {
    if (taken_ == part_.size() && !at_end_) {
      if (Status s = Fetch(); !s.ok()) return s;
    }
    size_t n = std::min(size, part_.size() - taken_);
    std::copy_n(part_.data() + taken_, n, buffer);
    taken_ += n;
    return n;
  }

 private:
  Status Fetch() {
    ObjectCall get = get_;
    get.headers.emplace_back("Range", fmt::format("bytes={}-{}", offset_, offset_ + ObjectStore::kPartBytes - 1));
    auto r = store_.Send(get, store_.PartDeadline(), ObjectStore::kPartBytes);
    if (!r.ok()) return r.status();
    part_.clear();
    taken_ = 0;
    if (r->status == 416) {  // asked from the end of the object (an empty one has no byte 0)
      at_end_ = true;
      return Status::Ok();
    }
    if (r->status == 404 && store_.ObjectMissing(*r)) return Status::NotFound(fmt::format("{} does not exist", get.what));
    if (r->status != 206 && r->status != 200) return store_.Refused(get, *r);
    // 200 is the whole object from a store that ignores ranges: it fitted in one part.
    part_ = std::move(r->body);
    offset_ += part_.size();
    at_end_ = r->status == 200 || part_.size() < ObjectStore::kPartBytes || EndsAt(r->Header("Content-Range"), offset_);
    return Status::Ok();
  }

  // "bytes 0-99/100": true when `offset` is the object's size.
  static bool EndsAt(const std::string& content_range, uint64_t offset) {
    size_t slash = content_range.rfind('/');
    if (slash == std::string::npos) return false;
    uint64_t total = 0;
    const char* first = content_range.data() + slash + 1;
    const char* last = content_range.data() + content_range.size();
    auto [end, ec] = std::from_chars(first, last, total);
    return ec == std::errc() && end == last && total == offset;
  }

  ObjectStore& store_;
  ObjectCall get_;
  std::string part_;
  size_t taken_ = 0;
  uint64_t offset_ = 0;
  bool at_end_ = false;
};

}  // namespace

Result<std::optional<BearerTokenSource>> EnvBearerToken(const char* name) {
  std::string token = Env(name);
  if (token.empty()) return std::optional<BearerTokenSource>();
  if (Status s = cloud::CheckOpaque(token, kMaxBearerTokenBytes, name); !s.ok()) {
    return Status::InvalidArgument(s.message() + "; set it to an OAuth access token");
  }
  return std::optional<BearerTokenSource>(
      BearerTokenSource{[token](Clock::TimePoint) -> Result<std::string> { return token; }, {}});
}

std::string PercentDecode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr == text.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

Status StoreUrl::Bad(const std::string& why) const {
  return Status::InvalidArgument(fmt::format("store '{}': {}", Printable(url, 200), why));
}

Result<StoreUrl> SplitStoreUrl(const std::string& url, const std::string& scheme, const std::set<std::string>& known) {
  StoreUrl out;
  out.url = url;
  const std::string start = scheme + "://";
  if (url.rfind(start, 0) != 0) return out.Bad("not a " + start + " URL");
  std::string rest = url.substr(start.size()), query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  size_t slash = rest.find('/');
  out.first = rest.substr(0, slash);
  out.rest = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!out.rest.empty() && out.rest.back() == '/') out.rest.pop_back();
  std::string names;
  for (const auto& name : known) names += (names.empty() ? "" : ", ") + name + "=";
  for (size_t i = 0; !query.empty() && i <= query.size();) {
    size_t amp = std::min(query.find('&', i), query.size());
    std::string pair = query.substr(i, amp - i);
    i = amp + 1;
    size_t eq = pair.find('=');
    std::string name = pair.substr(0, eq);
    if (eq == std::string::npos || !known.count(name)) {
      return out.Bad(fmt::format("'{}' is not one of {}", Printable(pair, 80), names));
    }
    if (!out.params.emplace(name, PercentDecode(pair.substr(eq + 1))).second) {
      return out.Bad(fmt::format("{}= is given twice", name));
    }
  }
  return out;
}

std::string StoreEndpoint::BaseUrl() const {
  return fmt::format("{}://{}:{}", scheme, host, port ? port : (scheme == "https" ? 443 : 80));
}

std::string StoreEndpoint::Text() const {
  return port ? fmt::format("{}://{}:{}", scheme, host, port) : fmt::format("{}://{}", scheme, host);
}

Result<StoreEndpoint> ParseStoreEndpoint(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format(
        "endpoint '{}' {}; want http(s)://host[:port], e.g. endpoint=http://127.0.0.1:10000", Printable(text, 200),
        why));
  };
  StoreEndpoint e;
  size_t sep = text.find("://");
  if (sep == std::string::npos) return bad("has no scheme");
  e.scheme = text.substr(0, sep);
  if (e.scheme != "http" && e.scheme != "https") return bad("is not http or https");
  std::string rest = text.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@") != std::string::npos) return bad("has a path, query or user; want none");
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || e.port < 1 || e.port > 65535) {
      return bad("has a bad port");
    }
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return bad("has no host");
  if (!IsPrintable(rest) || rest.find(' ') != std::string::npos) return bad("has a host that is not a host name");
  e.host = rest;
  if ((e.scheme == "http" && e.port == 80) || (e.scheme == "https" && e.port == 443)) e.port = 0;
  return e;
}

std::string ObjectCall::Target() const {
  std::string target = path;
  for (const auto& [name, value] : query) {
    target += (target.size() == path.size() ? "?" : "&") + PercentEncode(name, false) + "=" + PercentEncode(value, false);
  }
  return target;
}

std::string ObjectAnswer::Header(const std::string& name) const { return HttpResponse{status, headers, {}}.Header(name); }

Status ObjectStore::TakeCommonParams(const StoreUrl& url, int max_page_size, Settings& settings) {
  if (auto it = url.params.find("timeout"); it != url.params.end()) {
    auto timeout = ParseDuration(it->second, "timeout=");
    if (!timeout.ok()) return url.Bad(timeout.status().message());
    settings.timeout = *timeout;
  }
  if (auto it = url.params.find("page_size"); it != url.params.end()) {
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), settings.page_size);
    if (ec != std::errc() || end != text.data() + text.size() || settings.page_size < 1 ||
        settings.page_size > max_page_size) {
      return url.Bad(fmt::format("page_size={}: want 1 to {} names a listing page", Printable(text, 40), max_page_size));
    }
  }
  return Status::Ok();
}

std::string ObjectStore::Describe() const { return s_.root.empty() ? s_.url : s_.url + "/" + s_.root; }

std::string ObjectStore::UrlOf(const std::string& full_key) const { return s_.url + "/" + full_key; }

Clock::TimePoint ObjectStore::CallDeadline() const { return std::min(RealClock().Now() + s_.timeout, s_.deadline); }

Clock::TimePoint ObjectStore::PartDeadline() const {
  return std::min(RealClock().Now() + std::max<Clock::Duration>(s_.timeout, kPartTime), s_.deadline);
}

bool ObjectStore::Retryable(const ObjectAnswer& answer) const { return IsRetryableHttpStatus(answer.status); }

Result<std::vector<std::string>> ObjectStore::List(const std::string& prefix) {
  auto keys = ListNow(prefix);
  if (!keys.ok()) last_failure_ = keys.status();
  return keys;
}

Result<std::vector<std::string>> ObjectStore::ListNow(const std::string& prefix) {
  if (!prefix.empty()) {
    if (Status s = ValidateKey(prefix); !s.ok()) return s;
  }
  // The trailing '/' is what makes "a" a directory: "ab" does not start with "a/".
  const std::string full = prefix.empty() ? (s_.root.empty() ? "" : s_.root + "/") : FullKey(prefix) + "/";
  const size_t strip = s_.root.empty() ? 0 : s_.root.size() + 1;
  std::vector<std::string> keys;
  std::string token;
  std::set<std::string> tokens;
  const Clock::TimePoint deadline = CallDeadline();
  for (int pages = 1;; ++pages) {
    if (pages > kMaxListPages) {
      return Status::Unavailable(fmt::format(
          "listing {} at {}: not done after {} pages (the store keeps handing out page tokens)", UrlOf(full),
          s_.endpoint.Text(), kMaxListPages));
    }
    ObjectCall call = ListCall(full, token);
    auto r = Send(call, deadline, kMaxListPageBytes);
    if (!r.ok() && pages > 1 && r.status().IsUnavailable() && RealClock().Now() >= deadline) {
      // The page the deadline cut short is not the story: the listing that never ended is.
      return Status::Unavailable(
          fmt::format("listing {} at {}: {} pages, each with a new page token, and more to come when the time ran "
                      "out ({})",
                      UrlOf(full), s_.endpoint.Text(), pages - 1, r.status().message()));
    }
    if (!r.ok()) return r.status();
    if (r->status != 200) return Refused(call, *r);
    auto page = ParseListPage(r->body);
    if (!page.ok()) return page.status().Prefixed(fmt::format("listing {}", UrlOf(full)));
    for (std::string& name : page->names) {
      // Anything not a valid key (a console "folder/" marker, an object with a space) cannot be a
      // record, and is left out just as the directory backend leaves out its dot files.
      std::string relative = name.substr(std::min(strip, name.size()));
      if (name.rfind(full, 0) == 0 && ValidateKey(relative).ok()) keys.push_back(std::move(relative));
    }
    if (page->next_token.empty()) break;
    if (Status s = cloud::CheckOpaque(page->next_token, kMaxPageTokenBytes, "the next page's token");
        !s.ok()) {
      return s.Prefixed(fmt::format("listing {} at {}", UrlOf(full), s_.endpoint.Text()));
    }
    if (!tokens.insert(page->next_token).second) {
      return Status::Unavailable(fmt::format("listing {} at {}: the store returned a page token it had given before",
                                             UrlOf(full), s_.endpoint.Text()));
    }
    token = page->next_token;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

Result<std::string> ObjectStore::Read(const std::string& key, size_t max_bytes) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  ObjectCall call = GetCall(FullKey(key));
  // The cap is the caller's (but room for a refusal's text): a larger object is refused as its
  // bytes arrive, never read whole.
  auto r = Send(call, CallDeadline(), std::max(max_bytes, kMaxAnswerBytes));
  if (!r.ok()) return r.status();
  if (r->status == 200 && r->body.size() > max_bytes) return TooLargeToRead(call.what, r->body.size(), max_bytes);
  if (r->status == 200) return std::move(r->body);
  if (r->status == 404 && ObjectMissing(*r)) return Status::NotFound(fmt::format("{} does not exist", call.what));
  return Refused(call, *r);
}

Result<bool> ObjectStore::CreateIfAbsent(const std::string& key, const std::string& content) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  // A retry after a lost answer may meet our own first write and say false: callers read back
  // what is there, and the rendezvous treats its own identical record as registered.
  ObjectCall call = PutCall(FullKey(key), content, true);
  auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
  if (!r.ok()) return r.status();
  if (r->status / 100 == 2) return true;
  if (AlreadyThere(*r)) return false;
  return Refused(call, *r);
}

Status ObjectStore::Write(const std::string& key, const std::string& content) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  ObjectCall call = PutCall(FullKey(key), content, false);
  auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
  if (!r.ok()) return r.status();
  if (r->status / 100 == 2) return Status::Ok();
  return Refused(call, *r);
}

Status ObjectStore::Remove(const std::string& key) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  ObjectCall call = DeleteCall(FullKey(key));
  auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
  if (!r.ok()) return r.status();
  if (r->status / 100 == 2 || (r->status == 404 && ObjectMissing(*r))) return Status::Ok();
  return Refused(call, *r);
}

Result<int> ObjectStore::RemoveAbandonedUploads(const std::string& prefix, std::chrono::system_clock::time_point) {
  if (!prefix.empty()) {
    if (Status s = ValidateKey(prefix); !s.ok()) return s;
  }
  return 0;
}

Result<std::unique_ptr<VfsUpload>> ObjectStore::Upload(const std::string& key) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  const std::string full = FullKey(key);
  auto put_whole = [this, full](std::string body) {
    ObjectCall put = PutCall(full, std::move(body), false);
    auto r = Send(put, PartDeadline(), kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    return r->status / 100 == 2 ? Status::Ok() : Refused(put, *r);
  };
  return std::unique_ptr<VfsUpload>(new ChunkedUpload([this, full] { return StartParts(full); }, put_whole));
}

Result<std::unique_ptr<VfsDownload>> ObjectStore::Download(const std::string& key) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  auto download = std::make_unique<RangedDownload>(*this, GetCall(FullKey(key)));
  if (Status s = download->Start(); !s.ok()) return s;
  return std::unique_ptr<VfsDownload>(std::move(download));
}

Result<ObjectAnswer> ObjectStore::Send(const ObjectCall& call, Clock::TimePoint deadline, size_t max_body) {
  // Asked again once the caller's time is up, the last failure is still the reason to give.
  if (!last_failure_.ok() && RealClock().Now() >= s_.deadline) return last_failure_;
  auto answer = SendInTime(call, deadline, max_body);
  last_failure_ = answer.ok() ? Status::Ok() : answer.status();
  return answer;
}

Result<ObjectAnswer> ObjectStore::SendInTime(const ObjectCall& call, Clock::TimePoint deadline, size_t max_body) {
  const Clock::TimePoint start = RealClock().Now();
  Backoff backoff(RealClock(), kFirstBackoff, kMaxBackoff, deadline);
  const std::string what = fmt::format("{} {} at {}", call.method, call.what, s_.endpoint.Text());
  std::string last;
  int tries = 0;
  bool renewed = false;
  do {
    ++tries;
    HttpRequest request;
    request.base_url = s_.endpoint.BaseUrl();
    request.method = call.method;
    request.target = call.Target();
    request.headers = call.headers;
    request.body = call.body;
    request.deadline = deadline;
    request.max_body = max_body;
    if (Status s = Authorize(request, deadline); !s.ok()) return s.Prefixed(what);
    HttpResult result = HttpSend(request);
    if (result.ok()) {
      ObjectAnswer answer{result.response.status, std::move(result.response.body), std::move(result.response.headers)};
      if (answer.status == 401 && !renewed && RenewCredentials()) {
        // A cached token the store no longer takes: once more, with a fresh one.
        renewed = true;
        --tries;
        continue;
      }
      if (!Retryable(answer)) return answer;
      last = fmt::format("HTTP {}: {}", answer.status, Printable(answer.body, 200));
    } else if (result.failure == HttpFailure::kTlsUntrusted || result.failure == HttpFailure::kTlsSetUp) {
      return Status::InvalidArgument(fmt::format("{}: {}; the endpoint's TLS certificate is not trusted", what, result.why));
    } else if (result.failure == HttpFailure::kTooLarge) {
      return Status::DataLoss(fmt::format("{}: {}: not an answer quorate reads", what, result.why));
    } else {
      last = result.why;
    }
  } while (tries < kTries && backoff.Wait() == Backoff::kRetry && RealClock().Now() < deadline);
  return Status::Unavailable(fmt::format(
      "{}: failed {} time{} within {} ms: {}; is the store up?", what, tries, tries == 1 ? "" : "s",
      std::chrono::duration_cast<std::chrono::milliseconds>(RealClock().Now() - start).count(), last));
}

}  // namespace quorate
