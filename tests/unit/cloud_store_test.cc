// The gs:// and azblob:// stores: their URLs and credentials checked before any call, the Shared Key
// string to sign, and scripted servers on 127.0.0.1 for what a real one never does: listings without
// end, page tokens that would inject a header, bodies too large, a session URI pointing elsewhere.
// The real wire formats are tested against tests/gcs/emulator.py and azurite.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "../support/ports.h"
#include "../support/scoped_env.h"
#include "store/vfs_azblob.h"
#include "store/vfs_gcs.h"

namespace quorate {
namespace {

using namespace std::chrono_literals;

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// `url` is refused as bad input (exit 2) with a message that says `says`.
void Bad(const std::string& url, const std::string& says) {
  auto vfs = OpenVfs(url);
  CHECK_MESSAGE(vfs.status().IsInvalidArgument(), url);
  CHECK_MESSAGE(Mentions(vfs.status(), says), vfs.status().message());
}

BearerTokenSource FixedToken(std::string token) {
  return {[token](Clock::TimePoint) -> Result<std::string> { return token; }, {}};
}

// An httplib server on 127.0.0.1 answering every request with `handler`, for one test case.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    auto any = [handler](const httplib::Request& req, httplib::Response& res) { handler(req, res); };
    server_.Get(".*", any);
    server_.Put(".*", any);
    server_.Post(".*", any);
    server_.Delete(".*", any);
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedServer() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("gs:// URLs are checked, naming the part and the fix") {
  ScopedEnv token("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.env-token");
  CHECK(OpenVfs("gs://my-bucket/etcd/prod?endpoint=http://127.0.0.1:4443&timeout=3s&page_size=100").ok());
  CHECK((*OpenVfs("gs://my-bucket/etcd/"))->Describe() == "gs://my-bucket/etcd");
  Bad("gs://My_Bucket/x", "is not a Cloud Storage bucket name");
  Bad("gs://ab/x", "is not a Cloud Storage bucket name");
  Bad("gs://bucket/x?region=eu", "'region=eu' is not one of endpoint=, page_size=, timeout=");
  Bad("gs://bucket/x?page_size=0", "page_size=0: want 1 to 1000");
  Bad("gs://bucket/x?page_size=5&page_size=6", "page_size= is given twice");
  Bad("gs://bucket/x?endpoint=ftp://h", "is not http or https");
  Bad("gs://bucket/../x", "prefix: key");
  ScopedEnv none("GOOGLE_OAUTH_ACCESS_TOKEN", ""), no_file("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json");
  Bad("gs://bucket/x", "/nonexistent/key.json");
  ScopedEnv broken("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.a\r\nX-Injected: 1");
  auto refused = OpenVfs("gs://bucket/x");
  CHECK(refused.status().IsInvalidArgument());
  CHECK_MESSAGE(!Mentions(refused.status(), "ya29"), refused.status().message());
}

TEST_CASE("azblob:// URLs and keys are checked, and the key is never shown") {
  ScopedEnv key("AZURE_STORAGE_KEY", "c2VjcmV0LWtleS1ieXRlcw==");
  auto vfs = OpenVfs("azblob://acct01/etcd-backups/prod/eu?endpoint=http://127.0.0.1:10000&page_size=5000");
  REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
  CHECK((*vfs)->Describe() == "azblob://acct01/etcd-backups/prod/eu");
  Bad("azblob://Acct/c0ntainer", "is not a storage account name");
  Bad("azblob://acct01", "container '' is not a container name");
  Bad("azblob://acct01/a--b", "container 'a--b' is not a container name");
  Bad("azblob://acct01/abc?page_size=5001", "page_size=5001: want 1 to 5000");
  {
    ScopedEnv not_base64("AZURE_STORAGE_KEY", "not base64 secret!");
    Bad("azblob://acct01/abc", "AZURE_STORAGE_KEY (18 bytes) is not base64");
    CHECK_FALSE(Mentions(OpenVfs("azblob://acct01/abc").status(), "secret"));
  }
  ScopedEnv no_key("AZURE_STORAGE_KEY", ""), no_token("AZURE_STORAGE_ACCESS_TOKEN", ""),
      secret("AZURE_CLIENT_SECRET", "s3cr3t"), no_tenant("AZURE_TENANT_ID", ""), no_client("AZURE_CLIENT_ID", "");
  Bad("azblob://acct01/abc", "AZURE_TENANT_ID");
  Bad("azblob://acct01/abc?environment=mars", "environment=mars: want public, usgovernment or china");
  CHECK(OpenAzblobVfs("azblob://acct01/abc", Clock::kNever, FixedToken("eyJ0")).ok());
  CHECK(HasStoreScheme("azblob://acct01/abc"));
  CHECK(HasStoreScheme("gs://b/p"));
  CHECK_FALSE(HasStoreScheme("gcs://b/p"));
}

// The layout of "Authorize with Shared Key" (Blob service REST API): twelve standard header lines,
// the x-ms- headers sorted, then /account/path and the query's names in order, values decoded.
TEST_CASE("azblob Shared Key: the string to sign") {
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"x-ms-version", "2021-08-06"},
      {"x-ms-date", "Fri, 26 Jun 2015 23:39:12 GMT"},
      {"Content-Type", "application/octet-stream"},
      {"If-None-Match", "*"},
      {"x-ms-blob-type", "BlockBlob"}};
  CHECK(azblob::StringToSign("PUT", "/acct/c/a/b%3Ac", headers, 5, "acct") ==
        "PUT\n\n\n5\n\napplication/octet-stream\n\n\n\n*\n\n\n"
        "x-ms-blob-type:BlockBlob\nx-ms-date:Fri, 26 Jun 2015 23:39:12 GMT\nx-ms-version:2021-08-06\n"
        "/acct/acct/c/a/b%3Ac");
  CHECK(azblob::StringToSign("GET", "/c?restype=container&comp=list&prefix=p%2Fq%2F&marker=2%21", {}, 0, "acct") ==
        "GET\n\n\n\n\n\n\n\n\n\n\n\n/acct/c\ncomp:list\nmarker:2!\nprefix:p/q/\nrestype:container");
  CHECK(azblob::SharedKeyAuthorization("acct", "key", "text").rfind("SharedKey acct:", 0) == 0);
}

TEST_CASE("gs:// and azblob:// against an endless listing: Unavailable within the timeout") {
  std::atomic<int> pages{0};
  ScriptedServer server([&](const httplib::Request& req, httplib::Response& res) {
    int n = ++pages;
    if (req.path.find("/storage/v1/") == 0) {
      res.set_content(fmt::format(R"({{"items":[{{"name":"p/k{}"}}],"nextPageToken":"t{}"}})", n, n),
                      "application/json");
    } else {
      res.set_content(fmt::format("<EnumerationResults><Blobs><Blob><Name>p/k{}</Name></Blob></Blobs>"
                                  "<NextMarker>m{}</NextMarker></EnumerationResults>",
                                  n, n),
                      "application/xml");
    }
  });
  ScopedEnv key("AZURE_STORAGE_KEY", "c2VjcmV0");
  for (const std::string url : {"gs://bucket/p?endpoint={}&timeout=1s", "azblob://acct01/cont/p?endpoint={}&timeout=1s"}) {
    auto vfs = url.starts_with("gs") ? OpenGcsVfs(fmt::format(fmt::runtime(url), server.endpoint()), Clock::kNever,
                                                  FixedToken("tok"))
                                     : OpenVfs(fmt::format(fmt::runtime(url), server.endpoint()));
    REQUIRE_MESSAGE(vfs.ok(), vfs.status().message());
    auto start = std::chrono::steady_clock::now();
    auto listed = (*vfs)->List("");
    auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(listed.status().IsUnavailable());
    CHECK_MESSAGE((Mentions(listed.status(), "pages") || Mentions(listed.status(), "page token")),
                  listed.status().message());
    CHECK(elapsed < 3s);
  }
}

TEST_CASE("a page token with CR LF never reaches a request, and is never echoed") {
  std::atomic<int> pages{0};
  ScriptedServer server([&](const httplib::Request& req, httplib::Response& res) {
    ++pages;
    if (req.path.find("/storage/v1/") == 0) {
      res.set_content(R"({"items":[{"name":"p/a"}],"nextPageToken":"tok\r\nX-Injected: evil"})", "application/json");
    } else {
      res.set_content("<EnumerationResults><Blobs/><NextMarker>m&#13;&#10;X-Injected: evil</NextMarker>"
                      "</EnumerationResults>",
                      "application/xml");
    }
  });
  auto gcs = OpenGcsVfs(fmt::format("gs://bucket/p?endpoint={}", server.endpoint()), Clock::kNever, FixedToken("t"));
  auto azure = OpenAzblobVfs(fmt::format("azblob://acct01/cont/p?endpoint={}", server.endpoint()), Clock::kNever,
                             FixedToken("t"));
  REQUIRE(gcs.ok());
  REQUIRE(azure.ok());
  for (auto* vfs : {&*gcs, &*azure}) {
    pages = 0;
    auto listed = (*vfs)->List("");
    CHECK(listed.status().IsUnavailable());
    CHECK_MESSAGE(Mentions(listed.status(), "a control byte"), listed.status().message());
    CHECK_MESSAGE(!Mentions(listed.status(), "X-Injected"), listed.status().message());
    CHECK(pages == 1);
  }
}

TEST_CASE("bodies larger than asked for are refused as they arrive") {
  const std::string huge(6 << 20, 'x');
  ScriptedServer server([&](const httplib::Request&, httplib::Response& res) {
    res.set_content(huge, "application/octet-stream");
  });
  auto vfs = OpenGcsVfs(fmt::format("gs://bucket/p?endpoint={}", server.endpoint()), Clock::kNever, FixedToken("t"));
  REQUIRE(vfs.ok());
  auto read = (*vfs)->Read("record", 64 * 1024);
  CHECK(read.status().code() == Status::Code::kDataLoss);
  CHECK_MESSAGE(Mentions(read.status(), "more than the 65536 allowed"), read.status().message());
  auto listed = (*vfs)->List("");
  CHECK(listed.status().code() == Status::Code::kDataLoss);
}

TEST_CASE("gs:// requests carry the seam's bearer token, fetched again after a 401; a session URI elsewhere is "
          "refused") {
  std::atomic<int> requests{0};
  std::string authorization;
  std::string location = "http://203.0.113.9/upload/storage/v1/b/bucket/o?uploadType=resumable&upload_id=abc";
  std::atomic<bool> reject_once{false};
  ScriptedServer server([&](const httplib::Request& req, httplib::Response& res) {
    ++requests;
    authorization = req.get_header_value("Authorization");
    if (reject_once.exchange(false)) {
      res.status = 401;
      return;
    }
    if (req.get_param_value("uploadType") == "resumable") {
      res.set_header("Location", location);
      res.status = 200;
      return;
    }
    if (requests == 1) {
      res.status = 503;
      return;
    }
    res.status = 200;
    res.set_content("{}", "application/json");
  });
  int asked = 0;
  int dropped = 0;
  BearerTokenSource source{[&](Clock::TimePoint deadline) -> Result<std::string> {
                             ++asked;
                             CHECK(deadline != Clock::kNever);
                             return fmt::format("ya29.seam-{}", dropped);
                           },
                           [&] { ++dropped; }};
  auto vfs = OpenGcsVfs(fmt::format("gs://bucket/p?endpoint={}", server.endpoint()), Clock::kNever, source);
  REQUIRE(vfs.ok());
  CHECK((*vfs)->Write("k", "v").ok());
  CHECK(requests == 2);
  CHECK(asked == 2);
  CHECK(authorization == "Bearer ya29.seam-0");
  // A token refused with 401 is dropped, and the request goes once more with a fresh one.
  reject_once = true;
  CHECK((*vfs)->Write("k", "v").ok());
  CHECK(dropped == 1);
  CHECK(authorization == "Bearer ya29.seam-1");

  auto upload = (*vfs)->Upload("big");
  REQUIRE(upload.ok());
  Status s = (*upload)->Append(std::string(ObjectStore::kPartBytes, 'x'));
  CHECK(s.IsUnavailable());
  CHECK_MESSAGE(Mentions(s, "is not an upload URI of gs://bucket"), s.message());
  CHECK_MESSAGE(!Mentions(s, "203.0.113.9"), s.message());

  BearerTokenSource failing{[](Clock::TimePoint) -> Result<std::string> {
                              return Status::Unavailable("the metadata server did not answer");
                            },
                            {}};
  auto no_token = OpenGcsVfs(fmt::format("gs://bucket/p?endpoint={}", server.endpoint()), Clock::kNever, failing);
  requests = 0;
  Status write = (*no_token)->Write("k", "v");
  CHECK(write.IsUnavailable());
  CHECK_MESSAGE(Mentions(write, "the metadata server did not answer"), write.message());
  CHECK(requests == 0);
}

TEST_CASE("azblob:// with a bearer token: the token and the pinned version on every request, no Shared Key") {
  std::string authorization, version;
  ScriptedServer server([&](const httplib::Request& req, httplib::Response& res) {
    authorization = req.get_header_value("Authorization");
    version = req.get_header_value("x-ms-version");
    res.status = 201;
  });
  ScopedEnv no_key("AZURE_STORAGE_KEY", "");
  auto vfs = OpenAzblobVfs(fmt::format("azblob://acct01/cont/p?endpoint={}", server.endpoint()), Clock::kNever,
                           FixedToken("eyJ0.azure"));
  REQUIRE(vfs.ok());
  CHECK(*(*vfs)->CreateIfAbsent("k", "v"));
  CHECK(authorization == "Bearer eyJ0.azure");
  CHECK(version == kAzureBlobVersion);
}

TEST_CASE("a store that never answers: Unavailable within timeout=") {
  SilentListener silent;
  auto vfs = OpenGcsVfs(fmt::format("gs://bucket/p?endpoint={}&timeout=700ms", silent.url()), Clock::kNever,
                        FixedToken("t"));
  REQUIRE(vfs.ok());
  auto start = std::chrono::steady_clock::now();
  Status write = (*vfs)->Write("k", "x");
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(write.IsUnavailable());
  CHECK_MESSAGE(Mentions(write, "is the store up?"), write.message());
  CHECK(elapsed >= 600ms);
  // Bounded by timeout= (700 ms), not by the 5 s default: the margin is for a loaded machine and
  // the sanitizer build.
  CHECK(elapsed < 4s);
}

}  // namespace quorate
