#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "quorate/config.h"
#include "quorate/member.h"
#include "quorate/s3.h"

namespace quorate {
namespace sigv4 {
namespace {

std::string Hex(const unsigned char* data, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", data[i]);
  return out;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string SigningKey(const std::string& secret, const std::string& date, const std::string& region,
                       const std::string& service) {
  return Hmac(Hmac(Hmac(Hmac("AWS4" + secret, date), region), service), "aws4_request");
}

std::string SignedHeaders(const Request& r) {
  std::string out;
  for (const auto& [name, value] : r.headers) out += (out.empty() ? "" : ";") + name;
  return out;
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof digest);
}

std::string UriEncode(const std::string& text, bool keep_slash) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string SigningKeyHex(const std::string& secret, const std::string& date, const std::string& region,
                          const std::string& service) {
  std::string key = SigningKey(secret, date, region, service);
  return Hex(reinterpret_cast<const unsigned char*>(key.data()), key.size());
}

std::string CanonicalRequest(const Request& r) {
  std::string query;
  std::map<std::string, std::string> encoded;
  for (const auto& [k, v] : r.query) encoded[UriEncode(k, false)] = UriEncode(v, false);
  for (const auto& [k, v] : encoded) query += (query.empty() ? "" : "&") + k + "=" + v;
  std::string headers;
  for (const auto& [name, value] : r.headers) headers += name + ":" + value + "\n";
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", r.method, UriEncode(r.path, true), query, headers, SignedHeaders(r),
                     r.payload_hash);
}

std::string Authorization(const Request& r, const std::string& access_key, const std::string& secret,
                          const std::string& region, const std::string& service) {
  const std::string& amz_date = r.headers.at("x-amz-date");
  std::string date = amz_date.substr(0, 8);
  std::string scope = fmt::format("{}/{}/{}/aws4_request", date, region, service);
  std::string to_sign =
      fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope, Sha256Hex(CanonicalRequest(r)));
  std::string sig = Hmac(SigningKey(secret, date, region, service), to_sign);
  return fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}", access_key, scope,
                     SignedHeaders(r), Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size()));
}

}  // namespace sigv4

namespace {

constexpr int kTries = 3;

// The text of the first <tag>...</tag> after `from`, with XML's five entities decoded.
std::string XmlText(const std::string& xml, const std::string& tag, size_t* from = nullptr) {
  size_t start_at = from ? *from : 0;
  size_t open = xml.find("<" + tag + ">", start_at);
  if (open == std::string::npos) return {};
  open += tag.size() + 2;
  size_t close = xml.find("</" + tag + ">", open);
  if (close == std::string::npos) return {};
  if (from) *from = close + tag.size() + 3;
  std::string raw = xml.substr(open, close - open), out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    size_t semi = raw.find(';', i);
    std::string ent = semi == std::string::npos ? "" : raw.substr(i, semi - i + 1);
    if (ent == "&amp;") out += '&';
    else if (ent == "&lt;") out += '<';
    else if (ent == "&gt;") out += '>';
    else if (ent == "&quot;") out += '"';
    else if (ent == "&apos;") out += '\'';
    else {
      out += '&';
      continue;
    }
    i = semi;
  }
  return out;
}

struct Response {
  int status = 0;
  std::string body;
};

class S3Vfs : public Vfs {
 public:
  S3Vfs(std::string bucket, std::string root, std::string endpoint, std::string region, bool path_style,
        bool conditional_put, std::chrono::milliseconds timeout, int page_size, std::string access_key,
        std::string secret, std::string session_token)
      : bucket_(std::move(bucket)),
        root_(std::move(root)),
        endpoint_(std::move(endpoint)),
        region_(std::move(region)),
        path_style_(path_style),
        conditional_put_(conditional_put),
        timeout_(timeout),
        page_size_(page_size),
        access_key_(std::move(access_key)),
        secret_(std::move(secret)),
        session_token_(std::move(session_token)) {}

  std::string Describe() const override {
    return fmt::format("s3://{}/{}", bucket_, root_);
  }
  bool exclusive_create() const override { return conditional_put_; }

  Result<std::vector<std::string>> List(const std::string& prefix) override {
    if (!prefix.empty()) {
      if (Status s = ValidateKey(prefix); !s.ok()) return s;
    }
    std::string full = FullKey(prefix.empty() ? "" : prefix + "/");
    std::vector<std::string> keys;
    std::string token;
    while (true) {
      std::map<std::string, std::string> query = {{"list-type", "2"}, {"prefix", full},
                                                  {"max-keys", std::to_string(page_size_)}};
      if (!token.empty()) query["continuation-token"] = token;
      auto r = Send("GET", "", query, "", {});
      if (!r.ok()) return r.status();
      if (r->status != 200) return Error(*r, "list " + full);
      size_t at = 0;
      while (true) {
        size_t contents = r->body.find("<Contents>", at);
        if (contents == std::string::npos) break;
        at = contents;
        std::string key = XmlText(r->body, "Key", &at);
        std::string relative = root_.empty() ? key : key.substr(std::min(key.size(), root_.size() + 1));
        if (ValidateKey(relative).ok()) keys.push_back(relative);
      }
      if (XmlText(r->body, "IsTruncated") != "true") break;
      token = XmlText(r->body, "NextContinuationToken");
      if (token.empty()) return Status::Unavailable(fmt::format("{}: truncated listing without a continuation token", Describe()));
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  Result<std::string> Read(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    auto r = Send("GET", FullKey(key), {}, "", {});
    if (!r.ok()) return r.status();
    if (r->status == 404) return Status::NotFound(fmt::format("{}/{} does not exist", Describe(), key));
    if (r->status != 200) return Error(*r, "read " + key);
    return r->body;
  }

  Result<bool> CreateIfAbsent(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    if (conditional_put_) {
      auto r = Send("PUT", FullKey(key), {}, content, {{"if-none-match", "*"}});
      if (!r.ok()) return r.status();
      if (r->status == 412) return false;
      if (r->status != 200) return Error(*r, "create " + key);
      return true;
    }
    // Without conditional PUT two writers can both see "absent" and both write: not exclusive.
    // The rendezvous allows for that by sealing only content every writer would write alike.
    auto head = Send("HEAD", FullKey(key), {}, "", {});
    if (!head.ok()) return head.status();
    if (head->status == 200) return false;
    if (head->status != 404) return Error(*head, "check " + key);
    if (Status s = Write(key, content); !s.ok()) return s;
    return true;
  }

  Status Write(const std::string& key, const std::string& content) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    auto r = Send("PUT", FullKey(key), {}, content, {});
    if (!r.ok()) return r.status();
    if (r->status != 200) return Error(*r, "write " + key);
    return Status::Ok();
  }

 private:
  std::string FullKey(const std::string& key) const { return root_.empty() ? key : root_ + "/" + key; }

  Status Error(const Response& r, const std::string& what) const {
    std::string code = XmlText(r.body, "Code"), message = XmlText(r.body, "Message");
    std::string text = fmt::format("{}: {} failed: HTTP {}{}{}", Describe(), what, r.status,
                                   code.empty() ? "" : " " + code, message.empty() ? "" : ": " + message);
    if (r.status == 403) return Status::InvalidArgument(text + " (credentials rejected: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
    if (code == "NoSuchBucket") return Status::InvalidArgument(text + fmt::format(" (create bucket '{}' or fix the URL)", bucket_));
    if (r.status >= 500) return Status::Unavailable(text);
    return Status::InvalidArgument(text);
  }

  Result<Response> Send(const std::string& method, const std::string& key, const std::map<std::string, std::string>& query,
                        const std::string& body, const std::map<std::string, std::string>& extra) {
    auto url = ParseUrl(endpoint_);
    std::string host = path_style_ ? fmt::format("{}:{}", url->host, url->port)
                                   : fmt::format("{}.{}:{}", bucket_, url->host, url->port);
    std::string path = path_style_ ? "/" + bucket_ + "/" + key : "/" + key;
    auto backoff = std::chrono::milliseconds(200);
    std::string last;
    for (int attempt = 1; attempt <= kTries; ++attempt) {
      sigv4::Request req{method, path, query, extra, sigv4::Sha256Hex(body)};
      std::time_t now = std::time(nullptr);
      char stamp[20];
      std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
      req.headers["host"] = host;
      req.headers["x-amz-date"] = stamp;
      req.headers["x-amz-content-sha256"] = req.payload_hash;
      if (!session_token_.empty()) req.headers["x-amz-security-token"] = session_token_;
      httplib::Request h;
      h.method = method;
      h.path = sigv4::UriEncode(path, true);
      std::string qs;
      std::map<std::string, std::string> encoded;
      for (const auto& [k, v] : query) encoded[sigv4::UriEncode(k, false)] = sigv4::UriEncode(v, false);
      for (const auto& [k, v] : encoded) qs += (qs.empty() ? "?" : "&") + k + "=" + v;
      h.path += qs;
      for (const auto& [k, v] : req.headers) h.set_header(k, v);
      h.set_header("Authorization", sigv4::Authorization(req, access_key_, secret_, region_, "s3"));
      h.body = body;
      if (method == "PUT") h.set_header("Content-Type", "application/octet-stream");
      httplib::Client client(fmt::format("{}://{}", url->scheme, host));
      client.set_url_encode(false);
      auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
      auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - secs).count();
      client.set_connection_timeout(secs.count(), usecs);
      client.set_read_timeout(secs.count(), usecs);
      client.set_write_timeout(secs.count(), usecs);
      auto res = client.send(h);
      if (res && res->status < 500) return Response{res->status, res->body};
      last = res ? fmt::format("HTTP {} {}", res->status, XmlText(res->body, "Message"))
                 : fmt::format("cannot reach {} ({} error)", endpoint_, httplib::to_string(res.error()));
      if (attempt < kTries) {
        std::this_thread::sleep_for(backoff);
        backoff *= 2;
      }
    }
    return Status::Unavailable(fmt::format("{}: {} {} failed {} times: {}", Describe(), method, key.empty() ? "/" : key,
                                           kTries, last));
  }

  std::string bucket_, root_, endpoint_, region_;
  bool path_style_, conditional_put_;
  std::chrono::milliseconds timeout_;
  int page_size_;
  std::string access_key_, secret_, session_token_;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<std::unique_ptr<Vfs>> OpenS3Vfs(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(fmt::format("store '{}': {}", url, why));
  };
  std::string rest = url.substr(5);  // after s3://
  std::string query;
  if (auto q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string bucket = rest.substr(0, rest.find('/'));
  std::string root = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/') + 1);
  while (!root.empty() && root.back() == '/') root.pop_back();
  if (bucket.empty() || bucket.size() > 63 ||
      bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    return bad("bucket name must be 1-63 of a-z, 0-9, '.', '-'");
  }
  if (!root.empty()) {
    if (Status s = ValidateKey(root); !s.ok()) return bad("prefix: " + s.message());
  }
  std::map<std::string, std::string> params;
  for (size_t i = 0; i < query.size();) {
    size_t amp = query.find('&', i);
    std::string kv = query.substr(i, amp == std::string::npos ? std::string::npos : amp - i);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return bad(fmt::format("'{}' is not key=value", kv));
    params[kv.substr(0, eq)] = kv.substr(eq + 1);
    if (amp == std::string::npos) break;
    i = amp + 1;
  }
  std::string region = params.count("region") ? params["region"] : Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = params.count("endpoint") ? params["endpoint"] : fmt::format("https://s3.{}.amazonaws.com:443", region);
  if (auto parsed = ParseUrl(endpoint); !parsed.ok()) return bad("endpoint: " + parsed.status().message());
  bool path_style = params.count("path_style") ? params["path_style"] == "true" : params.count("endpoint") > 0;
  bool conditional = params.count("conditional_put") && params["conditional_put"] == "true";
  std::chrono::milliseconds timeout{5000};
  if (params.count("timeout")) {
    auto d = ParseDuration(params["timeout"], "store timeout");
    if (!d.ok()) return bad(d.status().message());
    timeout = *d;
  }
  int page_size = 1000;
  if (params.count("page_size")) {
    page_size = std::atoi(params["page_size"].c_str());
    if (page_size < 1 || page_size > 1000) return bad("page_size must be 1-1000");
  }
  for (const auto& [k, v] : params) {
    static const std::set<std::string> kKnown = {"region", "endpoint", "path_style", "conditional_put", "timeout", "page_size"};
    if (!kKnown.count(k)) return bad(fmt::format("unknown parameter '{}' (known: endpoint, region, path_style, conditional_put, timeout, page_size)", k));
  }
  std::string access = Env("AWS_ACCESS_KEY_ID"), secret = Env("AWS_SECRET_ACCESS_KEY");
  if (access.empty() || secret.empty()) return bad("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  return std::unique_ptr<Vfs>(new S3Vfs(bucket, root, endpoint, region, path_style, conditional, timeout, page_size,
                                        access, secret, Env("AWS_SESSION_TOKEN")));
}

}  // namespace quorate
