#include "store/s3.h"

#include <fmt/format.h>
#include <pugixml.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "net/cloud/aws_credentials.h"
#include "net/cloud/sigv4.h"
#include "quorate/clock.h"
#include "quorate/duration.h"
#include "quorate/env.h"
#include "quorate/fs.h"
#include "quorate/http.h"
#include "quorate/rendezvous.h"
#include "quorate/text.h"

namespace quorate {
namespace s3 {
namespace {

// AWS's continuation tokens are about a hundred bytes of base64.
constexpr size_t kMaxContinuationTokenBytes = 1024;

// The answer's root element named `name`, or an empty node when `xml` is not that document at all.
pugi::xml_node Root(pugi::xml_document& doc, const std::string& xml, const char* name) {
  // No DOCTYPE, so no entity defined by the answer; character references are decoded as XML says.
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default & ~pugi::parse_doctype);
  if (!parsed) return {};
  return doc.child(name);
}

}  // namespace

Result<ListPage> ParseListPage(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "ListBucketResult");
  if (!root) {
    return Status::DataLoss(fmt::format("the listing is not S3's ListBucketResult XML; it starts '{}'",
                                        Printable(xml.substr(0, 80), 80)));
  }
  ListPage page;
  for (pugi::xml_node contents : root.children("Contents")) {
    pugi::xml_node key = contents.child("Key");
    if (!key) return Status::DataLoss("the listing has a <Contents> without a <Key>");
    page.keys.push_back(key.text().get());
  }
  page.truncated = std::string_view(root.child("IsTruncated").text().get()) == "true";
  page.next_token = root.child("NextContinuationToken").text().get();
  if (page.truncated && page.next_token.empty()) {
    return Status::DataLoss("the listing is truncated but has no NextContinuationToken to read on from");
  }
  // The token goes back into the next request; S3's are base64, so anything with a space or a
  // control byte in it (CR LF above all) is not S3's, escaped on the wire or not.
  if (page.next_token.size() > kMaxContinuationTokenBytes ||
      std::any_of(page.next_token.begin(), page.next_token.end(),
                  [](unsigned char c) { return c <= 0x20 || c >= 0x7f; })) {
    return Status::DataLoss(fmt::format(
        "the listing's NextContinuationToken ({} bytes) holds a space, a control byte or a byte beyond ASCII, or is "
        "longer than {} bytes",
        page.next_token.size(), kMaxContinuationTokenBytes));
  }
  return page;
}

Result<MultipartPage> ParseMultipartUploads(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "ListMultipartUploadsResult");
  if (!root) {
    return Status::DataLoss(fmt::format("the list of multipart uploads is not S3's ListMultipartUploadsResult XML; "
                                        "it starts '{}'",
                                        Printable(xml.substr(0, 80), 80)));
  }
  MultipartPage page;
  for (pugi::xml_node upload : root.children("Upload")) {
    MultipartUpload u{upload.child("Key").text().get(), upload.child("UploadId").text().get(), {}};
    const std::string initiated = upload.child("Initiated").text().get();
    // "2026-11-24T14:00:00.000Z": the fraction and the Z after the seconds.
    auto when = ParseUtcTimePrefix(initiated);
    if (u.key.empty() || u.upload_id.empty() || !when || initiated.back() != 'Z') {
      return Status::DataLoss(fmt::format("the list of multipart uploads has an upload without a key, an ID or an "
                                          "ISO 8601 UTC start time: key '{}', initiated '{}'",
                                          Printable(u.key, 64), Printable(initiated, 40)));
    }
    u.initiated = *when;
    page.uploads.push_back(std::move(u));
  }
  page.truncated = std::string_view(root.child("IsTruncated").text().get()) == "true";
  page.next_key_marker = root.child("NextKeyMarker").text().get();
  page.next_upload_id_marker = root.child("NextUploadIdMarker").text().get();
  if (page.truncated && page.next_key_marker.empty()) {
    return Status::DataLoss("the list of multipart uploads is truncated but has no NextKeyMarker to read on from");
  }
  return page;
}

ErrorBody ParseErrorBody(const std::string& xml) {
  pugi::xml_document doc;
  pugi::xml_node root = Root(doc, xml, "Error");
  if (!root) return {};
  return {root.child("Code").text().get(), root.child("Message").text().get()};
}

std::string ParseUploadId(const std::string& xml) {
  pugi::xml_document doc;
  return Root(doc, xml, "InitiateMultipartUploadResult").child("UploadId").text().get();
}

std::string CompleteMultipartBody(const std::vector<std::string>& etags) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("CompleteMultipartUpload");
  for (size_t i = 0; i < etags.size(); ++i) {
    pugi::xml_node part = root.append_child("Part");
    part.append_child("PartNumber").text().set(static_cast<unsigned>(i + 1));
    part.append_child("ETag").text().set(etags[i].c_str());
  }
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration);
  return out.str();
}

Target Address(const std::string& endpoint_host, int port, const std::string& bucket, const std::string& key,
               bool path_style) {
  std::string authority = port ? fmt::format("{}:{}", endpoint_host, port) : endpoint_host;
  if (path_style) return {authority, key.empty() ? "/" + bucket : "/" + bucket + "/" + key};
  return {bucket + "." + authority, "/" + key};
}

}  // namespace s3

namespace {

constexpr int kTries = 3;
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
// A ListObjectsV2 page of 1000 keys is about 300 KB. A registry holds a few keys a member, so a
// listing that goes on for more pages is a store handing out continuation tokens without end.
constexpr size_t kMaxListPageBytes = 4 << 20;
constexpr int kMaxListPages = 1000;

struct Endpoint {
  std::string scheme;
  std::string host;  // IPv6 in brackets, as in a Host header
  int port = 0;      // 0: the scheme's default, left out of the Host header as clients do
};

Result<Endpoint> ParseEndpoint(std::string text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(
        fmt::format("endpoint '{}' {}; want http(s)://host[:port], e.g. endpoint=http://127.0.0.1:4568", text, why));
  };
  Endpoint e;
  size_t sep = text.find("://");
  if (sep == std::string::npos) return bad("has no scheme");
  e.scheme = text.substr(0, sep);
  if (e.scheme != "http" && e.scheme != "https") return bad("is not http or https");
  std::string rest = text.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@") != std::string::npos) return bad("has a path, query or user; S3 wants none");
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
  e.host = rest;
  if ((e.scheme == "http" && e.port == 80) || (e.scheme == "https" && e.port == 443)) e.port = 0;
  return e;
}

// "%2F" and friends in a URL parameter's value, so an endpoint may be given encoded or not.
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

struct Call {
  std::string method;
  std::string key;  // the full object key; empty for the bucket itself (a listing)
  std::map<std::string, std::string> query;
  std::string body;
  std::map<std::string, std::string> headers;  // signed too; lower-case names
};

struct Response {
  int status = 0;
  std::string body;
  s3::ErrorBody error;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string Header(const std::string& name) const {
    return HttpResponse{status, headers, {}}.Header(name);
  }
};

// A streamed object goes up and comes down in parts of this size: memory stays flat whatever the
// size, and S3 takes parts of 5 MiB or more (but the last), at most 10,000 of them.
constexpr size_t kPartBytes = 8 << 20;
constexpr int kMaxParts = 10000;
constexpr auto kPartTime = std::chrono::minutes(2);

// An error answer (a PUT's, a refusal's) is a few hundred bytes of XML.
constexpr size_t kMaxAnswerBytes = 64 * 1024;

bool Retryable(const Response& r) {
  // 409 ConditionalRequestConflict: another conditional write to the key was in flight; AWS asks
  // for a retry, which then sees the winner (412).
  return IsRetryableHttpStatus(r.status) || (r.status == 409 && r.error.code == "ConditionalRequestConflict");
}

class S3Vfs : public Vfs {
 public:
  struct Options {
    std::string bucket;
    std::string root;  // the URL's prefix: keys live under root/
    Endpoint endpoint;
    std::string region;
    bool path_style = true;
    bool conditional_put = false;
    std::chrono::milliseconds timeout{5000};
    int page_size = 0;  // 0: the store's default (1000 on AWS)
    // AWS's chain (src/net/cloud/aws_credentials.h), as the aws provider uses it.
    std::shared_ptr<cloud::AwsCredentialChain> credentials;
    Clock::TimePoint deadline = Clock::kNever;  // the caller's: no call lasts past it
  };
  explicit S3Vfs(Options o) : o_(std::move(o)) {}

  std::string Describe() const override {
    return o_.root.empty() ? "s3://" + o_.bucket : fmt::format("s3://{}/{}", o_.bucket, o_.root);
  }
  bool exclusive_create() const override { return o_.conditional_put; }

  Result<std::vector<std::string>> List(const std::string& prefix) override {
    auto keys = ListNow(prefix);
    if (!keys.ok()) last_failure_ = keys.status();
    return keys;
  }

  Result<std::string> Read(const std::string& key, size_t max_bytes) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    Call call{"GET", FullKey(key), {}, "", {}};
    auto r = Send(call, CallDeadline(), kMaxRecordBytes);
    if (!r.ok()) return r.status();
    if (r->status == 200 && r->body.size() > max_bytes) return TooLargeToRead(Url(call.key), r->body.size(), max_bytes);
    if (r->status == 200) return std::move(r->body);
    if (r->status == 404 && r->error.code != "NoSuchBucket") {
      return Status::NotFound(fmt::format("{} does not exist", Url(call.key)));
    }
    return Refused(call, *r);
  }

  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    if (o_.conditional_put) {
      // A retry after a lost answer may meet our own first write and say false: callers read back
      // what is there, and the rendezvous treats its own identical record as registered.
      Call call{"PUT", FullKey(key), {}, content, {{"if-none-match", "*"}}};
      auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
      if (!r.ok()) return r.status();
      if (r->status == 412) return false;
      if (r->status / 100 == 2) return true;
      return Refused(call, *r);
    }
    // HEAD then PUT is not exclusive: two writers can both see the key absent and both write, the
    // later one winning. exclusive_create() says so, and the rendezvous then seals only a set that
    // every writer would encode byte for byte alike and never trusts a true from here alone.
    Call head{"HEAD", FullKey(key), {}, "", {}};
    auto r = Send(head, CallDeadline(), kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status == 200) return false;
    // A HEAD answer has no body, so a missing bucket looks like a missing key: the PUT names it.
    if (r->status != 404) return Refused(head, *r);
    if (Status s = Write(key, content); !s.ok()) return s;
    return true;
  }

  Status Write(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    Call call{"PUT", FullKey(key), {}, content, {}};
    auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status / 100 == 2) return Status::Ok();
    return Refused(call, *r);
  }

  Result<std::unique_ptr<VfsUpload>> Upload(const std::string& key) override;
  Result<std::unique_ptr<VfsDownload>> Download(const std::string& key) override;

  Status Remove(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    Call call{"DELETE", FullKey(key), {}, "", {}};
    auto r = Send(call, CallDeadline(), kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status / 100 == 2 || (r->status == 404 && r->error.code != "NoSuchBucket")) return Status::Ok();
    return Refused(call, *r);
  }

  Result<int> RemoveAbandonedUploads(const std::string& prefix,
                                     std::chrono::system_clock::time_point started_before) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    const std::string full = prefix.empty() ? (o_.root.empty() ? "" : o_.root + "/") : FullKey(prefix) + "/";
    const Clock::TimePoint deadline = CallDeadline();
    std::vector<s3::MultipartUpload> abandoned;
    std::string key_marker, upload_id_marker;
    for (int pages = 1;; ++pages) {
      if (pages > kMaxListPages) {
        return Status::Unavailable(fmt::format("listing the multipart uploads of {} at {}: not done after {} pages",
                                               Url(full), EndpointText(), kMaxListPages));
      }
      Call call{"GET", "", {{"uploads", ""}, {"prefix", full}}, "", {}};
      if (!key_marker.empty()) call.query["key-marker"] = key_marker;
      if (!upload_id_marker.empty()) call.query["upload-id-marker"] = upload_id_marker;
      auto r = Send(call, deadline, kMaxListPageBytes);
      if (!r.ok()) return r.status();
      if (r->status != 200) return Refused(call, *r);
      auto page = s3::ParseMultipartUploads(r->body);
      if (!page.ok()) return page.status().Prefixed(fmt::format("listing the multipart uploads of {}", Url(full)));
      const size_t strip = o_.root.empty() ? 0 : o_.root.size() + 1;
      for (auto& u : page->uploads) {
        // The key becomes the path of the abort: one that is not a key quorate writes (a '..'
        // segment, a control byte) is not one of our uploads, and is never followed out of the store.
        const bool ours = u.key.rfind(full, 0) == 0 && ValidateKey(u.key.substr(strip)).ok();
        if (ours && u.initiated < started_before) abandoned.push_back(std::move(u));
      }
      if (!page->truncated) break;
      if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker) {
        return Status::Unavailable(fmt::format("listing the multipart uploads of {} at {}: the store gave the same "
                                               "markers twice",
                                               Url(full), EndpointText()));
      }
      key_marker = page->next_key_marker;
      upload_id_marker = page->next_upload_id_marker;
    }
    for (const auto& u : abandoned) {
      Call abort{"DELETE", u.key, {{"uploadId", u.upload_id}}, "", {}};
      auto r = Send(abort, deadline, kMaxAnswerBytes);
      if (!r.ok()) return r.status();
      // 404 NoSuchUpload: it ended (completed or aborted) since the listing.
      if (r->status / 100 != 2 && r->status != 404) return Refused(abort, *r);
    }
    return static_cast<int>(abandoned.size());
  }

  // One call of a stream: a part, or the start or end of a multipart upload.
  // A part of 8 MiB gets at least kPartTime (timeout= is sized for small records), within the
  // caller's deadline: uploads that time out on big databases are a known way backups fail.
  Result<Response> SendPart(const Call& call, size_t max_body) {
    return Send(call, std::min(RealClock().Now() + std::max<Clock::Duration>(o_.timeout, kPartTime), o_.deadline),
                max_body);
  }
  Status RefusedPart(const Call& call, const Response& r) const { return Refused(call, r); }
  std::string FullKeyOf(const std::string& key) const { return FullKey(key); }
  std::string UrlOf(const std::string& full_key) const { return Url(full_key); }

 private:
  Result<std::vector<std::string>> ListNow(const std::string& prefix) {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    // The trailing '/' is what makes "a" a directory: "ab" does not start with "a/".
    const std::string full = prefix.empty() ? (o_.root.empty() ? "" : o_.root + "/") : FullKey(prefix) + "/";
    const size_t strip = o_.root.empty() ? 0 : o_.root.size() + 1;
    std::vector<std::string> keys;
    std::string token;
    std::set<std::string> tokens;
    const Clock::TimePoint deadline = CallDeadline();
    for (int pages = 1;; ++pages) {
      if (pages > kMaxListPages) {
        return Status::Unavailable(fmt::format(
            "listing {} at {}: not done after {} pages (the store keeps handing out continuation tokens)", Url(full),
            EndpointText(), kMaxListPages));
      }
      Call call{"GET", "", {{"list-type", "2"}, {"prefix", full}}, "", {}};
      if (o_.page_size) call.query["max-keys"] = std::to_string(o_.page_size);
      if (!token.empty()) call.query["continuation-token"] = token;
      auto r = Send(call, deadline, kMaxListPageBytes);
      if (!r.ok() && pages > 1 && r.status().IsUnavailable() && RealClock().Now() >= deadline) {
        // The page the deadline cut short is not the story: the listing that never ended is.
        return Status::Unavailable(
            fmt::format("listing {} at {}: {} pages, each with a new continuation token, and more to come when the "
                        "time ran out ({})",
                        Url(full), EndpointText(), pages - 1, r.status().message()));
      }
      if (!r.ok()) return r.status();
      if (r->status != 200) return Refused(call, *r);
      auto page = s3::ParseListPage(r->body);
      if (!page.ok()) return page.status().Prefixed(fmt::format("listing {} at {}", Url(full), EndpointText()));
      for (std::string& key : page->keys) {
        // Anything not a valid key (a console "folder/" marker, a stray upload with a space) cannot
        // be a record, and is left out just as the directory backend leaves out its dot files.
        std::string relative = key.substr(std::min(strip, key.size()));
        if (key.rfind(full, 0) == 0 && ValidateKey(relative).ok()) keys.push_back(std::move(relative));
      }
      if (!page->truncated) break;
      if (!tokens.insert(page->next_token).second) {
        return Status::Unavailable(
            fmt::format("listing {} at {}: the store returned a continuation token it had given before", Url(full),
                        EndpointText()));
      }
      token = page->next_token;
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }


  // Each Vfs call ends within timeout= and the caller's deadline, retries and pages included.
  Clock::TimePoint CallDeadline() const { return std::min(RealClock().Now() + o_.timeout, o_.deadline); }

  std::string FullKey(const std::string& key) const { return o_.root.empty() ? key : o_.root + "/" + key; }
  std::string Url(const std::string& full_key) const { return fmt::format("s3://{}/{}", o_.bucket, full_key); }
  std::string EndpointText() const {
    return o_.endpoint.port ? fmt::format("{}://{}:{}", o_.endpoint.scheme, o_.endpoint.host, o_.endpoint.port)
                            : fmt::format("{}://{}", o_.endpoint.scheme, o_.endpoint.host);
  }

  // A request the store answered and refused.
  Status Refused(const Call& call, const Response& r) const {
    std::string text = fmt::format("{} {} at {}: HTTP {}", call.method, Url(call.key), EndpointText(), r.status);
    if (!r.error.code.empty()) text += " " + Printable(r.error.code, 64);
    if (!r.error.message.empty()) text += ": " + Printable(r.error.message, 200);
    if (r.status == 403) {
      return Status::InvalidArgument(
          text +
          fmt::format("; credentials rejected: check {} (s3:GetObject, s3:PutObject, s3:ListBucket and "
                      "s3:DeleteObject on the bucket), the region and the clock",
                      o_.credentials->Source()));
    }
    if (r.error.code == "NoSuchBucket") {
      return Status::InvalidArgument(
          text + fmt::format("; bucket '{}' does not exist at {}: create it or fix the bucket in the URL", o_.bucket,
                             EndpointText()));
    }
    if (r.error.code == "PermanentRedirect" || r.error.code == "AuthorizationHeaderMalformed") {
      return Status::InvalidArgument(text + "; set region= (or AWS_REGION) to the bucket's region");
    }
    return Status::InvalidArgument(text);
  }

  // Up to kTries tries until `deadline`, paced by Backoff. An answer that is not retryable is
  // returned whatever its status, for the caller to read; a body over `max_body` is DataLoss.
  Result<Response> Send(const Call& call, Clock::TimePoint deadline, size_t max_body) {
    const Clock::TimePoint start = RealClock().Now();
    // Asked again once the caller's time is up, the last failure is still the reason to give.
    if (!last_failure_.ok() && start >= o_.deadline) return last_failure_;
    auto response = SendInTime(call, deadline, max_body, start);
    last_failure_ = response.ok() ? Status::Ok() : response.status();
    return response;
  }

  Result<Response> SendInTime(const Call& call, Clock::TimePoint deadline, size_t max_body, Clock::TimePoint start) {
    Backoff backoff(RealClock(), kFirstBackoff, kMaxBackoff, deadline);
    std::string last;
    int tries = 0;
    do {
      ++tries;
      auto creds = o_.credentials->Get(deadline);
      if (!creds.ok()) {
        last = creds.status().message();
        continue;
      }
      HttpResult result = SendOnce(call, *creds, deadline, max_body);
      const std::string what = fmt::format("{} {} at {}", call.method, Url(call.key), EndpointText());
      if (result.ok()) {
        Response r{result.response.status, std::move(result.response.body), {}, std::move(result.response.headers)};
        r.error = s3::ParseErrorBody(r.body);
        if (!Retryable(r)) return r;
        last = fmt::format("HTTP {} {} {}", r.status, Printable(r.error.code, 64), Printable(r.error.message, 200));
      } else if (result.failure == HttpFailure::kTlsUntrusted || result.failure == HttpFailure::kTlsSetUp) {
        return Status::InvalidArgument(
            fmt::format("{}: {}; the endpoint's TLS certificate is not trusted", what, result.why));
      } else if (result.failure == HttpFailure::kTooLarge) {
        return Status::DataLoss(fmt::format("{}: {}: not an answer quorate reads", what, result.why));
      } else {
        last = result.why;
      }
    } while (tries < kTries && backoff.Wait() == Backoff::kRetry && RealClock().Now() < deadline);
    return Status::Unavailable(fmt::format(
        "{} {} at {}: failed {} time{} within {} ms: {}; is the store up?", call.method, Url(call.key), EndpointText(),
        tries, tries == 1 ? "" : "s",
        std::chrono::duration_cast<std::chrono::milliseconds>(RealClock().Now() - start).count(), last));
  }

  HttpResult SendOnce(const Call& call, const cloud::AwsCredentials& creds, Clock::TimePoint deadline,
                      size_t max_body) {
    const s3::Target target = s3::Address(o_.endpoint.host, o_.endpoint.port, o_.bucket, call.key, o_.path_style);
    sigv4::Request signed_part{call.method, target.path, call.query, call.headers, sigv4::Sha256Hex(call.body)};
    signed_part.headers["host"] = target.host;
    signed_part.headers["x-amz-date"] = sigv4::AmzDate(std::chrono::system_clock::now());
    signed_part.headers["x-amz-content-sha256"] = signed_part.payload_hash;
    if (!creds.session_token.empty()) signed_part.headers["x-amz-security-token"] = creds.session_token;

    HttpRequest request;
    request.method = call.method;
    // The path is encoded and signed as it is; it goes on the wire byte for byte.
    request.target = sigv4::UriEncode(target.path, true);
    std::string query;
    for (const auto& [k, v] : call.query) {
      query += (query.empty() ? "?" : "&") + sigv4::UriEncode(k, false) + "=" + sigv4::UriEncode(v, false);
    }
    request.target += query;
    for (const auto& [name, value] : signed_part.headers) request.headers.emplace_back(name, value);
    request.headers.emplace_back("Authorization",
                                 sigv4::Authorization(signed_part, creds.access_key, creds.secret, o_.region, "s3"));
    if (call.method == "PUT" || call.method == "POST") {
      request.body = call.body;
      request.headers.emplace_back("Content-Type", "application/octet-stream");
    }
    const std::string connect_host = o_.path_style ? o_.endpoint.host : o_.bucket + "." + o_.endpoint.host;
    const int port = o_.endpoint.port ? o_.endpoint.port : (o_.endpoint.scheme == "https" ? 443 : 80);
    request.base_url = fmt::format("{}://{}:{}", o_.endpoint.scheme, connect_host, port);
    request.deadline = deadline;
    request.max_body = max_body;
    return HttpSend(request);
  }

  Options o_;
  Status last_failure_;
};

// Up to one part is held; an object that fits in it is one PUT at Commit, a larger one a multipart
// upload whose parts are invisible until CompleteMultipartUpload. An upload dropped before that is
// aborted (and one a crash leaves behind is never listed; a bucket lifecycle rule reclaims it).
class S3Upload : public VfsUpload {
 public:
  S3Upload(S3Vfs& store, std::string full_key) : store_(store), key_(std::move(full_key)) { buffer_.reserve(kPartBytes); }
  ~S3Upload() override {
    if (!committed_ && !upload_id_.empty()) {
      Call abort{"DELETE", key_, {{"uploadId", upload_id_}}, "", {}};
      (void)store_.SendPart(abort, kMaxAnswerBytes);
    }
  }

  Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      size_t take = std::min(bytes.size(), kPartBytes - buffer_.size());
      buffer_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (buffer_.size() == kPartBytes) {
        if (Status s = SendBufferedPart(); !s.ok()) return s;
      }
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (upload_id_.empty()) {
      Call put{"PUT", key_, {}, std::move(buffer_), {}};
      auto r = store_.SendPart(put, kMaxAnswerBytes);
      if (!r.ok()) return r.status();
      if (r->status / 100 != 2) return store_.RefusedPart(put, *r);
      committed_ = true;
      return Status::Ok();
    }
    if (!buffer_.empty()) {
      if (Status s = SendBufferedPart(); !s.ok()) return s;
    }
    Call complete{"POST", key_, {{"uploadId", upload_id_}}, s3::CompleteMultipartBody(etags_), {}};
    auto r = store_.SendPart(complete, kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    // S3 may answer 200 and still fail the completion, with an <Error> body.
    if (r->status != 200 || !r->error.code.empty()) return store_.RefusedPart(complete, *r);
    committed_ = true;
    return Status::Ok();
  }

 private:
  Status SendBufferedPart() {
    if (upload_id_.empty()) {
      Call start{"POST", key_, {{"uploads", ""}}, "", {}};
      auto r = store_.SendPart(start, kMaxAnswerBytes);
      if (!r.ok()) return r.status();
      if (r->status != 200) return store_.RefusedPart(start, *r);
      upload_id_ = s3::ParseUploadId(r->body);
      if (upload_id_.empty()) {
        return Status::Unavailable(fmt::format("starting a multipart upload of {}: the answer names no UploadId",
                                               store_.UrlOf(key_)));
      }
    }
    if (etags_.size() >= static_cast<size_t>(kMaxParts)) {
      return Status::FailedPrecondition(fmt::format("{}: more than {} parts of {} bytes; S3 takes no more",
                                                    store_.UrlOf(key_), kMaxParts, kPartBytes));
    }
    Call part{"PUT",
              key_,
              {{"partNumber", std::to_string(etags_.size() + 1)}, {"uploadId", upload_id_}},
              std::move(buffer_),
              {}};
    buffer_.clear();
    auto r = store_.SendPart(part, kMaxAnswerBytes);
    if (!r.ok()) return r.status();
    if (r->status != 200) return store_.RefusedPart(part, *r);
    std::string etag = r->Header("ETag");
    if (etag.empty()) {
      return Status::Unavailable(fmt::format("part {} of {}: the answer has no ETag", etags_.size() + 1,
                                             store_.UrlOf(key_)));
    }
    etags_.push_back(std::move(etag));
    return Status::Ok();
  }

  S3Vfs& store_;
  std::string key_;
  std::string buffer_;
  std::string upload_id_;
  std::vector<std::string> etags_;
  bool committed_ = false;
};

// Ranged GETs of one part each, so no answer is larger than a part.
class S3Download : public VfsDownload {
 public:
  S3Download(S3Vfs& store, std::string full_key) : store_(store), key_(std::move(full_key)) {}

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
    Call get{"GET", key_, {}, "", {{"range", fmt::format("bytes={}-{}", offset_, offset_ + kPartBytes - 1)}}};
    auto r = store_.SendPart(get, kPartBytes);
    if (!r.ok()) return r.status();
    part_.clear();
    taken_ = 0;
    if (r->status == 416) {  // asked from the end of the object (an empty one has no byte 0)
      at_end_ = true;
      return Status::Ok();
    }
    if (r->status == 404 && r->error.code != "NoSuchBucket") {
      return Status::NotFound(fmt::format("{} does not exist", store_.UrlOf(key_)));
    }
    if (r->status != 206 && r->status != 200) return store_.RefusedPart(get, *r);
    // 200 is the whole object from a store that ignores ranges: it fitted in one part.
    part_ = std::move(r->body);
    offset_ += part_.size();
    at_end_ = r->status == 200 || part_.size() < kPartBytes || EndsAt(r->Header("Content-Range"), offset_);
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

  S3Vfs& store_;
  std::string key_;
  std::string part_;
  size_t taken_ = 0;
  uint64_t offset_ = 0;
  bool at_end_ = false;
};

Result<std::unique_ptr<VfsUpload>> S3Vfs::Upload(const std::string& key) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  return std::unique_ptr<VfsUpload>(new S3Upload(*this, FullKey(key)));
}

Result<std::unique_ptr<VfsDownload>> S3Vfs::Download(const std::string& key) {
  if (Status s = ValidateKey(key); !s.ok()) return s;
  auto download = std::make_unique<S3Download>(*this, FullKey(key));
  if (Status s = download->Start(); !s.ok()) return s;
  return std::unique_ptr<VfsDownload>(std::move(download));
}

}  // namespace

Result<std::unique_ptr<Vfs>> OpenS3Vfs(const std::string& url, Clock::TimePoint deadline) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(fmt::format("store '{}': {}", url, why)); };
  if (url.rfind("s3://", 0) != 0) return bad("not an s3:// URL");
  std::string rest = url.substr(5), query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  S3Vfs::Options o;
  o.deadline = deadline;
  size_t slash = rest.find('/');
  o.bucket = rest.substr(0, slash);
  o.root = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!o.root.empty() && o.root.back() == '/') o.root.pop_back();
  const bool bucket_ok = o.bucket.size() >= 3 && o.bucket.size() <= 63 &&
                         o.bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") == std::string::npos &&
                         o.bucket.front() != '.' && o.bucket.front() != '-' && o.bucket.back() != '.' &&
                         o.bucket.back() != '-';
  if (!bucket_ok) {
    return bad(
        fmt::format("bucket '{}' is not an S3 bucket name: 3-63 of a-z, 0-9, '.' and '-', starting and "
                    "ending with a letter or digit; want s3://bucket/prefix",
                    o.bucket));
  }
  if (!o.root.empty()) {
    if (Status s = ValidateKey(o.root); !s.ok()) return bad("prefix: " + s.message());
  }

  static const std::set<std::string> kKnown = {"endpoint",        "region",  "path_style",
                                               "conditional_put", "timeout", "page_size"};
  std::map<std::string, std::string> params;
  for (size_t i = 0; !query.empty() && i <= query.size();) {
    size_t amp = std::min(query.find('&', i), query.size());
    std::string pair = query.substr(i, amp - i);
    i = amp + 1;
    size_t eq = pair.find('=');
    std::string name = pair.substr(0, eq);
    if (eq == std::string::npos || !kKnown.count(name)) {
      return bad(
          fmt::format("'{}' is not one of endpoint=, region=, path_style=, conditional_put=, timeout=, "
                      "page_size=",
                      pair));
    }
    if (!params.emplace(name, PercentDecode(pair.substr(eq + 1))).second) {
      return bad(fmt::format("{}= is given twice", name));
    }
  }
  auto flag = [&](const std::string& name, bool fallback) -> Result<bool> {
    auto it = params.find(name);
    if (it == params.end()) return fallback;
    if (it->second == "true" || it->second == "false") return it->second == "true";
    return bad(fmt::format("{}={}: want true or false", name, it->second));
  };

  o.region = params.count("region") ? params["region"] : Env("AWS_REGION");
  if (o.region.empty()) o.region = Env("AWS_DEFAULT_REGION");
  if (o.region.empty()) o.region = "us-east-1";
  auto endpoint = ParseEndpoint(params.count("endpoint") ? params["endpoint"] : cloud::AwsEndpoint("s3", o.region));
  if (!endpoint.ok()) return bad(endpoint.status().message());
  o.endpoint = *endpoint;
  // S3-compatible servers (MinIO, s3rver, Ceph) seldom have wildcard DNS for bucket.host; AWS
  // prefers virtual-host names.
  auto path_style = flag("path_style", params.count("endpoint") > 0);
  if (!path_style.ok()) return path_style.status();
  o.path_style = *path_style;
  auto conditional = flag("conditional_put", false);
  if (!conditional.ok()) return conditional.status();
  o.conditional_put = *conditional;
  if (params.count("timeout")) {
    auto timeout = ParseDuration(params["timeout"], "timeout=");
    if (!timeout.ok()) return bad(timeout.status().message());
    o.timeout = *timeout;
  }
  if (params.count("page_size")) {
    const std::string& text = params["page_size"];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), o.page_size);
    if (ec != std::errc() || end != text.data() + text.size() || o.page_size < 1 || o.page_size > 1000) {
      return bad(fmt::format("page_size={}: want 1 to 1000 keys a listing page", text));
    }
  }

  // The chain the aws provider uses: keys, profiles, web identity, container, instance role.
  cloud::AwsSettings settings;
  settings.region = o.region;
  auto credentials = cloud::AwsCredentialChain::Create(settings);
  if (!credentials.ok()) return bad(credentials.status().message());
  o.credentials = std::move(*credentials);
  return std::unique_ptr<Vfs>(new S3Vfs(std::move(o)));
}

}  // namespace quorate
