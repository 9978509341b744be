#include "store/s3.h"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "quorate/provider.h"
#include "../support/scoped_env.h"

namespace quorate {
namespace {

const std::string kEmptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// The secret of the S3 API Reference's examples ("Signature Calculations for the Authorization Header").
const std::string kDocSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

}  // namespace

// AWS General Reference, "Examples of how to derive a signing key for Signature Version 4".
TEST_CASE("SigV4 signing key matches AWS's example") {
  CHECK(sigv4::SigningKeyHex("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam") ==
        "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

// S3 API Reference, "Example: GET Object": the canonical request, its hash in the string to sign,
// and the Authorization header, each as published.
TEST_CASE("SigV4 matches AWS's S3 GET Object example") {
  sigv4::Request r{"GET", "/test.txt", {}, {}, sigv4::Sha256Hex("")};
  CHECK(r.payload_hash == kEmptySha);
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"range", "bytes=0-9"},
               {"x-amz-content-sha256", r.payload_hash},
               {"x-amz-date", "20130524T000000Z"}};
  const std::string canonical = sigv4::CanonicalRequest(r);
  CHECK(canonical ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\nx-amz-content-sha256:" + kEmptySha +
            "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n" + kEmptySha);
  CHECK(sigv4::Sha256Hex(canonical) == "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(sigv4::Authorization(r, "AKIAIOSFODNN7EXAMPLE", kDocSecret, "us-east-1", "s3") ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// S3 API Reference, "Example: GET Bucket (List Objects)": query parameters sorted before signing.
TEST_CASE("SigV4 matches AWS's S3 list objects example") {
  sigv4::Request r{"GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}, {}, kEmptySha};
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-content-sha256", kEmptySha},
               {"x-amz-date", "20130524T000000Z"}};
  CHECK(sigv4::CanonicalRequest(r).find("\n/\nmax-keys=2&prefix=J\n") != std::string::npos);
  CHECK(sigv4::Authorization(r, "AKIAIOSFODNN7EXAMPLE", kDocSecret, "us-east-1", "s3")
            .ends_with("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
}

// S3 API Reference, "Example: PUT Object": a signed payload and a '$' in the key.
TEST_CASE("SigV4 matches AWS's S3 PUT Object example") {
  sigv4::Request r{"PUT", "/test$file.text", {}, {}, sigv4::Sha256Hex("Welcome to Amazon S3.")};
  CHECK(r.payload_hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  r.headers = {{"date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-content-sha256", r.payload_hash},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  CHECK(sigv4::CanonicalRequest(r).starts_with("PUT\n/test%24file.text\n\n"));
  CHECK(sigv4::Authorization(r, "AKIAIOSFODNN7EXAMPLE", kDocSecret, "us-east-1", "s3")
            .ends_with("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"));
}

TEST_CASE("SigV4 encodes paths segment by segment and query values whole") {
  CHECK(sigv4::UriEncode("a b/c~d*é", true) == "a%20b/c~d%2A%C3%A9");
  CHECK(sigv4::UriEncode("a/b+c=", false) == "a%2Fb%2Bc%3D");
  sigv4::Request r{"GET", "/bucket", {{"prefix", "t/x"}, {"list-type", "2"}}, {{"host", "h"}}, kEmptySha};
  CHECK(sigv4::CanonicalRequest(r).find("\n/bucket\nlist-type=2&prefix=t%2Fx\n") != std::string::npos);
}

TEST_CASE("S3 addressing: path style and virtual host") {
  auto path = s3::Address("127.0.0.1", 4568, "quorate", "boot/token/sealed", true);
  CHECK(path.host == "127.0.0.1:4568");
  CHECK(path.path == "/quorate/boot/token/sealed");
  CHECK(s3::Address("127.0.0.1", 4568, "quorate", "", true).path == "/quorate");
  auto vhost = s3::Address("s3.eu-west-1.amazonaws.com", 0, "quorate", "boot/sealed", false);
  CHECK(vhost.host == "quorate.s3.eu-west-1.amazonaws.com");
  CHECK(vhost.path == "/boot/sealed");
  CHECK(s3::Address("s3.amazonaws.com", 0, "quorate", "", false).path == "/");
}

TEST_CASE("ListObjectsV2 pages: keys unescaped, the continuation token read") {
  auto first = s3::ParseListPage(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>quorate</Name><Prefix>boot/</Prefix>
<KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>
<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&amp;x</NextContinuationToken>
<Contents><Key>boot/a&amp;b&lt;c&gt;&quot;d&apos;</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
<ETag>&quot;abc&quot;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>boot/cr&#13;lf&#x0A;e&#xe9;</Key><Size>1</Size></Contents></ListBucketResult>)");
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  CHECK(first->keys == std::vector<std::string>{"boot/a&b<c>\"d'", "boot/cr\rlf\ne\xc3\xa9"});
  CHECK(first->truncated);
  CHECK(first->next_token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=&x");

  auto last = s3::ParseListPage(
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>boot/z</Key></Contents></ListBucketResult>");
  REQUIRE(last.ok());
  CHECK(last->keys == std::vector<std::string>{"boot/z"});
  CHECK_FALSE(last->truncated);

  auto empty = s3::ParseListPage(
      "<ListBucketResult><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>");
  REQUIRE(empty.ok());
  CHECK(empty->keys.empty());
}

TEST_CASE("ListObjectsV2 answers that cannot be trusted are DataLoss") {
  // The continuation token goes back into the next request: no CR LF, NUL or space in it.
  for (const char* token : {"abc&#13;&#10;Host: evil", "a b", "ab&#x85;"}) {
    CAPTURE(token);
    auto page = s3::ParseListPage(fmt::format(
        "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>{}</NextContinuationToken>"
        "</ListBucketResult>",
        token));
    CHECK(page.status().code() == Status::Code::kDataLoss);
    CHECK_MESSAGE(page.status().message().find("holds a space, a control byte") != std::string::npos,
                  page.status().message());
    CHECK(page.status().message().find("evil") == std::string::npos);
  }
  CHECK(s3::ParseListPage("<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>" +
                          std::string(1025, 'a') + "</NextContinuationToken></ListBucketResult>")
            .status()
            .code() == Status::Code::kDataLoss);
  CHECK(s3::ParseListPage("<html>gateway</html>").status().code() == Status::Code::kDataLoss);
  CHECK(s3::ParseListPage("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>").status().code() ==
        Status::Code::kDataLoss);
  CHECK(s3::ParseListPage("<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>").status().code() ==
        Status::Code::kDataLoss);
}

TEST_CASE("S3 error bodies") {
  auto e = s3::ParseErrorBody(R"(<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>
<BucketName>nosuch</BucketName><RequestId>4442587FB7D0A2F9</RequestId></Error>)");
  CHECK(e.code == "NoSuchBucket");
  CHECK(e.message == "The specified bucket does not exist");
  CHECK(s3::ParseErrorBody("<Error><Code>A&amp;B</Code></Error>").code == "A&B");
  CHECK(s3::ParseErrorBody("").code.empty());
  CHECK(s3::ParseErrorBody("<html>Bad Gateway</html>").message.empty());
}

TEST_CASE("S3 store URLs are checked, naming the part and the fix") {
  ScopedEnv key("AWS_ACCESS_KEY_ID", "k"), secret("AWS_SECRET_ACCESS_KEY", "s");
  CHECK(OpenS3Vfs("s3://bucket/prefix?endpoint=http://127.0.0.1:9000").ok());
  CHECK(OpenS3Vfs("s3://bucket").ok());
  CHECK(OpenS3Vfs("s3://bucket/a/b/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=eu-west-1&path_style=false"
                  "&conditional_put=true&timeout=500ms&page_size=2")
            .ok());
  auto vfs = OpenS3Vfs("s3://bucket/a/b/?conditional_put=true");
  REQUIRE(vfs.ok());
  CHECK((*vfs)->Describe() == "s3://bucket/a/b");
  CHECK((*vfs)->exclusive_create());
  CHECK_FALSE((*OpenS3Vfs("s3://bucket/p"))->exclusive_create());

  auto bad = [](const std::string& url, const std::string& mention) {
    auto r = OpenS3Vfs(url);
    CHECK_MESSAGE(r.status().IsInvalidArgument(), url);
    CHECK_MESSAGE(Mentions(r.status(), mention), r.status().message());
  };
  bad("s3://Bad_Bucket/p", "'Bad_Bucket' is not an S3 bucket name");
  bad("s3://b/p", "'b' is not an S3 bucket name");
  bad("s3:///p", "bucket ''");
  bad("s3://bucket/../x", "starting with '.'");
  bad("s3://bucket/p?colour=blue", "'colour=blue' is not one of endpoint=");
  bad("s3://bucket/p?timeout=5s&timeout=6s", "timeout= is given twice");
  bad("s3://bucket/p?endpoint=127.0.0.1:9000", "has no scheme");
  bad("s3://bucket/p?endpoint=ftp://h:1", "not http or https");
  bad("s3://bucket/p?endpoint=http://h:99999", "bad port");
  bad("s3://bucket/p?endpoint=http://h:1/path", "has a path");
  bad("s3://bucket/p?path_style=yes", "path_style=yes: want true or false");
  bad("s3://bucket/p?timeout=soon", "'soon' is not a duration");
  bad("s3://bucket/p?page_size=0", "page_size=0");
  {
    ScopedEnv no_secret("AWS_SECRET_ACCESS_KEY", nullptr);
    bad("s3://bucket/p", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: an access key and a secret go together");
  }
}

TEST_CASE("the s3 provider checks its keys before touching the store") {
  ScopedEnv key("AWS_ACCESS_KEY_ID", "k"), secret("AWS_SECRET_ACCESS_KEY", "s");
  ProviderContext context;
  context.self = {"n1", {"http://127.0.0.1:2380"}, {"http://127.0.0.1:2379"}};
  context.cluster_size = 3;
  auto create = [&](const std::string& text) {
    auto spec = ParseDiscoverySpec(text);
    REQUIRE(spec.ok());
    return ProviderRegistry::Get().Create(*spec, context);
  };
  auto ok = create(
      "provider=s3 bucket=quorate prefix=boot endpoint=http://127.0.0.1:9000 region=eu-west-1 "
      "path_style=true conditional_put=true timeout=2s page_size=10");
  CHECK_MESSAGE(ok.ok(), ok.status().message());

  auto no_bucket = create("provider=s3 prefix=boot");
  CHECK(no_bucket.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(no_bucket.status(), "bucket"), no_bucket.status().message());
  auto typo = create("provider=s3 bucket=quorate endpiont=http://127.0.0.1:9000");
  CHECK(typo.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(typo.status(), "'endpiont'"), typo.status().message());
  CHECK_MESSAGE(Mentions(typo.status(), "path_style"), typo.status().message());
  auto bad_flag = create("provider=s3 bucket=quorate conditional_put=maybe");
  CHECK_MESSAGE(Mentions(bad_flag.status(), "conditional_put=maybe: want true or false"), bad_flag.status().message());
  ScopedEnv no_key("AWS_ACCESS_KEY_ID", nullptr);
  auto no_credentials = create("provider=s3 bucket=quorate");
  CHECK(no_credentials.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(no_credentials.status(), "--discovery provider=s3"), no_credentials.status().message());
  CHECK(Mentions(no_credentials.status(), "AWS_ACCESS_KEY_ID"));
}

// A stand-in S3 on 127.0.0.1 for what s3rver cannot show: conditional PUT, retries of 5xx, the
// headers every request carries.
TEST_CASE("S3 store against a scripted server: conditional create, retries, refusals") {
  ScopedEnv key("AWS_ACCESS_KEY_ID", "AKID"), secret("AWS_SECRET_ACCESS_KEY", "secret"),
      token("AWS_SESSION_TOKEN", "session");
  httplib::Server server;
  std::atomic<int> failures_left{0};
  std::atomic<int> requests{0};
  std::set<std::string> stored;
  std::mutex mu;
  server.Put(".*", [&](const httplib::Request& req, httplib::Response& res) {
    ++requests;
    CHECK(req.get_header_value("Authorization").starts_with("AWS4-HMAC-SHA256 Credential=AKID/"));
    CHECK(req.get_header_value("x-amz-security-token") == "session");
    CHECK(req.get_header_value("x-amz-content-sha256") == sigv4::Sha256Hex(req.body));
    if (failures_left > 0) {
      --failures_left;
      res.status = 503;
      res.set_content("<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>",
                      "application/xml");
      return;
    }
    if (req.path.starts_with("/denied/")) {
      res.status = 403;
      res.set_content(
          "<Error><Code>SignatureDoesNotMatch</Code><Message>The signature does not match</Message></Error>",
          "application/xml");
      return;
    }
    if (req.path.starts_with("/gone/")) {
      res.status = 404;
      res.set_content("<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>",
                      "application/xml");
      return;
    }
    std::lock_guard lock(mu);
    if (req.get_header_value("If-None-Match") == "*" && !stored.insert(req.path).second) {
      res.status = 412;
      res.set_content("<Error><Code>PreconditionFailed</Code></Error>", "application/xml");
      return;
    }
    stored.insert(req.path);
    res.status = 200;
  });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  auto open = [&](const std::string& bucket, const std::string& extra = "") {
    auto vfs =
        OpenS3Vfs(fmt::format("s3://{}/p?endpoint=http://127.0.0.1:{}&conditional_put=true{}", bucket, port, extra));
    REQUIRE(vfs.ok());
    return std::move(*vfs);
  };

  auto vfs = open("quorate");
  CHECK(*vfs->CreateIfAbsent("k", "one") == true);
  CHECK(*vfs->CreateIfAbsent("k", "two") == false);
  CHECK(stored.count("/quorate/p/k") == 1);

  failures_left = 2;
  requests = 0;
  CHECK(vfs->Write("retried", "x").ok());
  CHECK(requests == 3);

  failures_left = 3;
  auto unavailable = vfs->Write("down", "x");
  CHECK(unavailable.IsUnavailable());
  CHECK_MESSAGE(Mentions(unavailable, "failed 3 times"), unavailable.message());
  CHECK_MESSAGE(Mentions(unavailable, "SlowDown"), unavailable.message());
  failures_left = 0;

  auto denied = open("denied")->Write("k", "x");
  CHECK(denied.IsInvalidArgument());
  CHECK_MESSAGE(Mentions(denied, "credentials rejected"), denied.message());
  CHECK_MESSAGE(Mentions(denied, "HTTP 403 SignatureDoesNotMatch"), denied.message());

  auto gone = open("gone")->CreateIfAbsent("k", "x");
  CHECK(gone.status().IsInvalidArgument());
  CHECK_MESSAGE(Mentions(gone.status(), "bucket 'gone' does not exist"), gone.status().message());
  CHECK_MESSAGE(Mentions(gone.status(), "s3://gone/p/k"), gone.status().message());

  server.stop();
  serving.join();
}

TEST_CASE("S3 store: listed keys with a '..' segment or CR LF are left out, never followed") {
  ScopedEnv key("AWS_ACCESS_KEY_ID", "AKID"), secret("AWS_SECRET_ACCESS_KEY", "secret");
  httplib::Server server;
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    CHECK(req.get_param_value("prefix") == "p/boot/");
    res.set_content(R"(<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>p/boot/members/n1</Key></Contents>
<Contents><Key>p/boot/../../../other/members/n2</Key></Contents>
<Contents><Key>p/boot/members/n3&#13;&#10;Host: evil</Key></Contents>
<Contents><Key>p/boot/members/..</Key></Contents></ListBucketResult>)",
                    "application/xml");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  auto vfs = OpenS3Vfs(fmt::format("s3://quorate/p?endpoint=http://127.0.0.1:{}", port));
  REQUIRE(vfs.ok());
  auto keys = (*vfs)->List("boot");
  REQUIRE_MESSAGE(keys.ok(), keys.status().message());
  CHECK(*keys == std::vector<std::string>{"boot/members/n1"});
  server.stop();
  serving.join();
}

TEST_CASE("S3 store: uploads never committed are listed page by page and aborted, the recent ones kept") {
  ScopedEnv key("AWS_ACCESS_KEY_ID", "AKID"), secret("AWS_SECRET_ACCESS_KEY", "secret");
  httplib::Server server;
  std::mutex mu;
  std::vector<std::string> markers, aborted;
  // AWS's documented ListMultipartUploadsResult, in two pages.
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    CHECK(req.has_param("uploads"));
    CHECK(req.get_param_value("prefix") == "p/backups/etcd/main/");
    markers.push_back(req.get_param_value("key-marker") + "|" + req.get_param_value("upload-id-marker"));
    const bool first = !req.has_param("key-marker");
    std::string body = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>quorate</Bucket>)";
    if (first) {
      body += R"(<Upload><Key>p/backups/etcd/main/2026-11-24T10:00:00Z/etcd.backup.gz</Key><UploadId>old&amp;1</UploadId>
<Initiated>2026-11-24T10:00:01.000Z</Initiated></Upload>
<Upload><Key>p/backups/etcd/main/../../../other/etcd.backup.gz</Key><UploadId>out</UploadId>
<Initiated>2026-11-24T10:00:01.000Z</Initiated></Upload>
<Upload><Key>p/backups/etcd/main/x&#13;&#10;Host: evil/etcd.backup.gz</Key><UploadId>crlf</UploadId>
<Initiated>2026-11-24T10:00:01.000Z</Initiated></Upload>
<NextKeyMarker>p/backups/etcd/main/2026-11-24T10:00:00Z/etcd.backup.gz</NextKeyMarker>
<NextUploadIdMarker>old&amp;1</NextUploadIdMarker><IsTruncated>true</IsTruncated>)";
    } else {
      body += R"(<Upload><Key>p/backups/etcd/main/2026-11-24T13:30:00Z/etcd.backup.gz</Key><UploadId>recent</UploadId>
<Initiated>2026-11-24T13:30:00.000Z</Initiated></Upload><IsTruncated>false</IsTruncated>)";
    }
    res.set_content(body + "</ListMultipartUploadsResult>", "application/xml");
  });
  server.Delete(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    aborted.push_back(req.path + "?" + req.get_param_value("uploadId"));
    res.status = 204;
  });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { server.listen_after_bind(); });
  auto vfs = OpenS3Vfs(fmt::format("s3://quorate/p?endpoint=http://127.0.0.1:{}", port));
  REQUIRE(vfs.ok());
  auto removed = (*vfs)->RemoveAbandonedUploads("backups/etcd/main", std::chrono::system_clock::from_time_t(
                                                                          1795525200));  // 2026-11-24T13:00:00Z
  REQUIRE_MESSAGE(removed.ok(), removed.status().message());
  // Only ours: keys with a '..' segment or CR LF are never aborted, so never followed out of the store.
  CHECK(*removed == 1);
  CHECK(markers == std::vector<std::string>{"|", "p/backups/etcd/main/2026-11-24T10:00:00Z/etcd.backup.gz|old&1"});
  CHECK(aborted == std::vector<std::string>{"/quorate/p/backups/etcd/main/2026-11-24T10:00:00Z/etcd.backup.gz?old&1"});
  server.stop();
  serving.join();

  CHECK(s3::ParseMultipartUploads("<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
                                  "<Initiated>yesterday</Initiated></Upload></ListMultipartUploadsResult>")
            .status()
            .code() == Status::Code::kDataLoss);
  CHECK(s3::ParseMultipartUploads("<ListBucketResult/>").status().code() == Status::Code::kDataLoss);
  // A year past 2262 would overflow system_clock's nanoseconds (found by the fuzz target).
  CHECK(s3::ParseMultipartUploads("<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
                                  "<Initiated>4522-11-24T10:00:01.000Z</Initiated></Upload></ListMultipartUploadsResult>")
            .status()
            .code() == Status::Code::kDataLoss);
}

}  // namespace quorate
