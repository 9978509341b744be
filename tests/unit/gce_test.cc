// The gce provider's keys, requests, JWT and answers (discovery/gce/gce.h), and the provider itself
// against an in-process server playing the Compute API, the metadata server and the token endpoint;
// the provider against the emulator with real etcd is tests/integration/gce_test.py.
#include <doctest/doctest.h>

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "../../discovery/gce/gce.h"

namespace quorate::gce {
namespace {

Result<Options> OptionsOf(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE(spec.ok());
  ProviderParams params(*spec);
  return TakeOptions(params);
}

// A fresh RSA key as PEM (PKCS#8, as Google's key files carry it), encrypted when a passphrase is given.
std::string NewPrivateKeyPem(const std::string& passphrase = "") {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_RSA_gen(2048), EVP_PKEY_free);
  REQUIRE(key);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PrivateKey(bio.get(), key.get(), passphrase.empty() ? nullptr : EVP_aes_256_cbc(),
                                   reinterpret_cast<const unsigned char*>(passphrase.data()),
                                   static_cast<int>(passphrase.size()), nullptr, nullptr) == 1);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string KeyFileJson(const std::string& pem, const std::string& token_uri) {
  return nlohmann::json{{"type", "service_account"},
                        {"project_id", "key-project"},
                        {"private_key_id", "kid-1"},
                        {"private_key", pem},
                        {"client_email", "etcd@key-project.iam.gserviceaccount.com"},
                        {"client_id", "1234"},
                        {"token_uri", token_uri}}
      .dump();
}

std::string FromBase64Url(std::string text) {
  for (char& c : text) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  const size_t pad = (4 - text.size() % 4) % 4;
  text.append(pad, '=');
  std::string out(text.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  REQUIRE(n >= 0);
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/quorate-gce-" +
                           std::to_string(::getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kAggregated = R"({
  "kind": "compute#instanceAggregatedList",
  "id": "projects/p/aggregated/instances",
  "items": {
    "zones/us-central1-a": {"instances": [
      {"kind": "compute#instance", "name": "etcd-a1", "status": "RUNNING",
       "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
       "networkInterfaces": [{"networkIP": "10.0.0.1", "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "natIP": "34.0.0.1"}]}],
       "labels": {"member": "first"}, "tags": {"items": ["etcd"]},
       "metadata": {"items": [{"key": "startup-script", "value": "echo"},
                              {"key": "created-by", "value": "projects/123/zones/us-central1-a/instanceGroupManagers/etcd"}]}},
      {"kind": "compute#instance", "name": "etcd-a2", "status": "STAGING",
       "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
       "networkInterfaces": [{"networkIP": "10.0.0.2"}]}
    ]},
    "zones/us-central1-b": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "There are no results",
                                        "data": [{"key": "scope", "value": "zones/us-central1-b"}]}},
    "zones/us-central1-c": {"instances": [
      {"name": "etcd-c1", "status": "TERMINATED", "networkInterfaces": [{"networkIP": "10.0.0.3"}]}
    ]}
  },
  "nextPageToken": "page-2",
  "unreachables": ["zones/europe-west1-b"]
})";

}  // namespace

TEST_CASE("gce: keys as go-discover spells them, the environment for what they leave out, bad input named") {
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  unsetenv("GCE_METADATA_HOST");
  auto o = OptionsOf("provider=gce tag_value=etcd");
  REQUIRE_MESSAGE(o.ok(), o.status().message());
  CHECK(o->endpoint == "https://compute.googleapis.com");
  CHECK(o->credentials->metadata_endpoint() == "http://169.254.169.254");
  CHECK(o->project.empty());  // asked of the metadata server when discovering
  CHECK(o->credentials->Source() == "the metadata server at http://169.254.169.254");
  CHECK(o->peer_port == 2380);
  CHECK(o->page_size == 500);

  setenv("GCE_METADATA_HOST", "127.0.0.1:8999", 1);
  auto mig = OptionsOf("provider=gce project_name=my-proj mig=etcd mig_region=us-central1 addr_type=public_v4 "
                       "endpoint=http://127.0.0.1:9000/ name_tag=member peer_port=12380 scheme=https page_size=100");
  REQUIRE_MESSAGE(mig.ok(), mig.status().message());
  CHECK(mig->credentials->metadata_endpoint() == "http://127.0.0.1:8999");
  CHECK(mig->endpoint == "http://127.0.0.1:9000");
  CHECK(mig->mig_region == "us-central1");
  CHECK(mig->peer_port == 12380);
  CHECK(mig->page_size == 100);
  auto md = OptionsOf("provider=gce mig=auto metadata_endpoint=http://127.0.0.1:7000");
  REQUIRE_MESSAGE(md.ok(), md.status().message());
  CHECK(md->credentials->metadata_endpoint() == "http://127.0.0.1:7000");
  unsetenv("GCE_METADATA_HOST");

  const std::string key_path = TempFile("key.json", KeyFileJson(NewPrivateKeyPem(), "https://oauth2.googleapis.com/token"));
  auto keyed = OptionsOf("provider=gce label_key=role label_value=etcd credentials_file=" + key_path);
  REQUIRE_MESSAGE(keyed.ok(), keyed.status().message());
  CHECK(keyed->project == "key-project");  // the key file's project_id
  CHECK(keyed->credentials->Source() == "the service account etcd@key-project.iam.gserviceaccount.com");
  setenv("GOOGLE_APPLICATION_CREDENTIALS", key_path.c_str(), 1);
  auto adc = OptionsOf("provider=gce tag_value=etcd project_name=other");
  REQUIRE_MESSAGE(adc.ok(), adc.status().message());
  CHECK(adc->credentials->Source() == "the service account etcd@key-project.iam.gserviceaccount.com");
  CHECK(adc->project == "other");
  setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json", 1);
  CHECK(OptionsOf("provider=gce tag_value=etcd").status().IsInvalidArgument());
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");

  const std::string user_creds = TempFile("user.json", R"({"type":"authorized_user","client_id":"x","refresh_token":"y"})");
  const std::string bad_pem = TempFile("badpem.json", KeyFileJson("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                                                                 "https://oauth2.googleapis.com/token"));
  for (const std::string& bad : std::vector<std::string>{"provider=gce", "provider=gce tag_value=etcd tag_valeu=x",
                                "provider=gce tag_value=Etcd", "provider=gce label_value=etcd",
                                "provider=gce label_key=9role", "provider=gce tag_value=etcd addr_type=public_v6",
                                "provider=gce tag_value=etcd zone_pattern=us-(central",
                                "provider=gce mig=etcd", "provider=gce mig=etcd mig_zone=a mig_region=b",
                                "provider=gce mig=auto mig_zone=us-central1-a", "provider=gce mig=etcd mig_zone=a tag_value=x",
                                "provider=gce mig=etcd mig_zone=a zone_pattern=.*", "provider=gce tag_value=e mig_zone=a",
                                "provider=gce mig=Etcd_1 mig_zone=a", "provider=gce tag_value=etcd peer_port=0",
                                "provider=gce tag_value=etcd page_size=501", "provider=gce tag_value=etcd page_size=0",
                                "provider=gce tag_value=etcd scheme=ftp", "provider=gce tag_value=etcd endpoint=127.0.0.1:80",
                                "provider=gce tag_value=etcd endpoint=http://h/compute/v1",
                                "provider=gce tag_value=etcd project_name=My_Project",
                                "provider=gce tag_value=etcd credentials_file=/nonexistent/key.json",
                                "provider=gce tag_value=etcd credentials_file=" + user_creds,
                                "provider=gce tag_value=etcd credentials_file=" + bad_pem}) {
    CAPTURE(bad);
    auto r = OptionsOf(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
    CHECK(r.status().message().find("PRIVATE KEY") == std::string::npos);
  }
  setenv("GCE_METADATA_HOST", "http://x/y", 1);
  CHECK(OptionsOf("provider=gce tag_value=etcd").status().IsInvalidArgument());
  unsetenv("GCE_METADATA_HOST");
  std::remove(key_path.c_str());
  std::remove(user_creds.c_str());
  std::remove(bad_pem.c_str());
}

TEST_CASE("gce: aggregated/instances asks for the label in its filter (a tag is matched on the answer), page by page") {
  Options o;
  o.project = "my-proj";
  o.tag_value = "etcd";
  CHECK(InstancesFilter(o) == "");
  o.label_key = "role";
  CHECK(InstancesFilter(o) == "labels.role:*");
  o.label_value = "etcd";
  CHECK(InstancesFilter(o) == "labels.role = \"etcd\"");
  CHECK(AggregatedInstancesTarget(o, "") ==
        "/compute/v1/projects/my-proj/aggregated/instances?maxResults=500&returnPartialSuccess=true&filter="
        "labels.role%20%3D%20%22etcd%22");
  o.tag_value.clear();
  o.label_key.clear();
  CHECK(AggregatedInstancesTarget(o, "a+b/c=") ==
        "/compute/v1/projects/my-proj/aggregated/instances?maxResults=500&returnPartialSuccess=true&pageToken=a%2Bb%2Fc%3D");
  CHECK(GroupTarget("my-proj", {"us-central1-a", "", "etcd"}) ==
        "/compute/v1/projects/my-proj/zones/us-central1-a/instanceGroupManagers/etcd");
  CHECK(GroupTarget("my-proj", {"", "us-central1", "etcd"}) ==
        "/compute/v1/projects/my-proj/regions/us-central1/instanceGroupManagers/etcd");
}

TEST_CASE("gce: instances of every zone become members by the address type asked; stopped ones do not count") {
  auto page = ParseAggregatedInstances(kAggregated);
  REQUIRE_MESSAGE(page.ok(), page.status().message());
  REQUIRE(page->instances.size() == 3);
  CHECK(page->next_page_token == "page-2");
  CHECK(page->unreachables == std::vector<std::string>{"zones/europe-west1-b"});
  const Instance& a1 = page->instances[0];
  CHECK(a1.zone == "us-central1-a");
  CHECK(a1.nat_ip == "34.0.0.1");
  CHECK(a1.created_by == "projects/123/zones/us-central1-a/instanceGroupManagers/etcd");
  CHECK(page->instances[2].zone == "us-central1-c");  // from the scope when the instance names none

  for (const char* counts : {"PROVISIONING", "STAGING", "RUNNING"}) CHECK(Counts(counts));
  for (const char* gone : {"STOPPING", "STOPPED", "SUSPENDING", "SUSPENDED", "TERMINATED", "REPAIRING", ""}) {
    CHECK_FALSE(Counts(gone));
  }

  Options o;
  auto m = MemberOf(o, a1);
  REQUIRE(m.ok());
  REQUIRE(m->has_value());
  CHECK(**m == Member{"etcd-a1", {"http://10.0.0.1:2380"}, {"http://10.0.0.1:2379"}});
  o.addr_type = "public_v4";
  o.name_tag = "member";
  o.scheme = "https";
  m = MemberOf(o, a1);
  REQUIRE(m.ok());
  CHECK(**m == Member{"first", {"https://34.0.0.1:2380"}, {"https://34.0.0.1:2379"}});
  // No external address yet: not a member (yet), not an error.
  m = MemberOf(o, page->instances[1]);
  REQUIRE(m.ok());
  CHECK_FALSE(m->has_value());
  // A name or address etcd would refuse is the answer's fault: Unavailable, retried.
  Instance odd = a1;
  odd.labels["member"] = "a=b";
  CHECK(MemberOf(o, odd).status().IsUnavailable());
  odd = a1;
  odd.nat_ip = "evil.example.com:1/x";
  CHECK(MemberOf(o, odd).status().IsUnavailable());
}

TEST_CASE("gce: the group from created-by, its targetSize, and which unreachable zones matter") {
  auto ref = ParseCreatedBy("projects/123456/zones/us-central1-a/instanceGroupManagers/etcd");
  REQUIRE(ref.ok());
  CHECK(ref->zone == "us-central1-a");
  CHECK(ref->region.empty());
  CHECK(ref->name == "etcd");
  auto regional = ParseCreatedBy("https://www.googleapis.com/compute/v1/projects/p/regions/us-east1/instanceGroupManagers/e");
  REQUIRE(regional.ok());
  CHECK(regional->region == "us-east1");
  for (const char* bad : {"", "etcd", "projects/p/zones/z/instanceGroups/etcd", "projects/p/zones/z/instanceGroupManagers/E$",
                          "projects/p/zones/z/instanceGroupManagers/etcd/extra"}) {
    CAPTURE(bad);
    CHECK(ParseCreatedBy(bad).status().IsUnavailable());
  }
  Instance i;
  i.created_by = "projects/my-proj/zones/us-central1-a/instanceGroupManagers/etcd";
  CHECK(CreatedBy(i, *ref));  // the project by ID or number alike
  CHECK_FALSE(CreatedBy(i, {"us-central1-b", "", "etcd"}));
  CHECK_FALSE(CreatedBy(i, {"us-central1-a", "", "etcd2"}));
  i.created_by.clear();
  CHECK_FALSE(CreatedBy(i, *ref));

  auto g = ParseInstanceGroupManager(R"({"kind":"compute#instanceGroupManager","name":"etcd","targetSize":3,
      "zone":"https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a","status":{"isStable":true}})");
  REQUIRE_MESSAGE(g.ok(), g.status().message());
  CHECK(g->target_size == 3);
  CHECK(g->name == "etcd");
  for (const char* bad : {R"({"name":"etcd"})", R"({"name":"etcd","targetSize":-1})", R"({"name":"etcd","targetSize":"3"})",
                          R"({"kind":"compute#instance","targetSize":3})", "<html>proxy</html>", "[]"}) {
    CAPTURE(bad);
    CHECK(ParseInstanceGroupManager(bad).status().IsUnavailable());
  }

  Options o;
  CHECK(ScopeMatters(o, std::nullopt, "zones/europe-west1-b"));
  o.zone_pattern = "us-central1-[ab]";
  CHECK(ScopeMatters(o, std::nullopt, "zones/us-central1-a"));
  CHECK_FALSE(ScopeMatters(o, std::nullopt, "zones/us-central1-c"));
  CHECK_FALSE(ScopeMatters(o, std::nullopt, "zones/xus-central1-a"));  // anchored
  CHECK(ScopeMatters(o, GroupRef{"us-east1-b", "", "etcd"}, "zones/us-east1-b"));
  CHECK_FALSE(ScopeMatters(o, GroupRef{"us-east1-b", "", "etcd"}, "zones/us-east1-c"));
  CHECK(ScopeMatters(o, GroupRef{"", "us-east1", "etcd"}, "zones/us-east1-c"));
  CHECK_FALSE(ScopeMatters(o, GroupRef{"", "us-east1", "etcd"}, "zones/us-east4-c"));
  CHECK(ScopeMatters(o, GroupRef{"", "us-east1", "etcd"}, "regions/us-east1"));
}

TEST_CASE("gce: error bodies, token answers, and answers that are not theirs") {
  auto e = cloud::ParseGoogleError(R"({"error":{"code":403,"message":"Required 'compute.instances.list' permission for 'projects/p'",
      "errors":[{"message":"Required","domain":"global","reason":"forbidden"}],"status":"PERMISSION_DENIED"}})");
  CHECK(e.status == "PERMISSION_DENIED");
  CHECK(e.reason == "forbidden");
  CHECK(e.message.find("compute.instances.list") != std::string::npos);
  auto oauth = cloud::ParseGoogleError(R"({"error":"invalid_grant","error_description":"Invalid JWT Signature."})");
  CHECK(oauth.status == "invalid_grant");
  CHECK(oauth.message == "Invalid JWT Signature.");
  CHECK(cloud::ParseGoogleError("<html>").status.empty());
  CHECK(cloud::ParseGoogleError(R"({"error":42})").status.empty());

  auto t = cloud::ParseGoogleToken(R"({"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"})");
  REQUIRE(t.ok());
  CHECK(t->access_token == "ya29.abc");
  CHECK(t->expires_in == std::chrono::seconds(3599));
  for (const char* bad : {R"({"access_token":"","expires_in":3599})", R"({"access_token":"x","expires_in":0})",
                          R"({"access_token":"x","expires_in":"3599"})", R"({"access_token":"x","expires_in":10,"token_type":"MAC"})",
                          R"({"access_token":"a\nb","expires_in":10})", "not json"}) {
    CAPTURE(bad);
    auto r = cloud::ParseGoogleToken(bad);
    REQUIRE(r.status().IsUnavailable());
    CHECK(r.status().message().find("abc") == std::string::npos);
  }
  CHECK(ParseAggregatedInstances("<html>proxy</html>").status().IsUnavailable());
  CHECK(ParseAggregatedInstances(R"({"kind":"compute#instanceList","items":[]})").status().IsUnavailable());
  CHECK(ParseAggregatedInstances(R"({"items":{"zones/a":{"instances":[{"status":"RUNNING"}]}}})").status().IsUnavailable());
  CHECK(ParseAggregatedInstances(R"({"items":{"zones/a":{"instances":{}}}})").status().IsUnavailable());
  CHECK(ParseAggregatedInstances(R"({"items":[]})").status().IsUnavailable());
  auto empty = ParseAggregatedInstances(R"({"kind":"compute#instanceAggregatedList","items":{}})");
  REQUIRE(empty.ok());
  CHECK(empty->instances.empty());
  CHECK(empty->next_page_token.empty());
}

TEST_CASE("gce: the service account's JWT is RS256 over the documented claims, and verifies with the public key") {
  const std::string pem = NewPrivateKeyPem();
  auto key = cloud::ParseServiceAccountKey(KeyFileJson(pem, "https://oauth2.googleapis.com/token"));
  REQUIRE_MESSAGE(key.ok(), key.status().message());
  const auto now = std::chrono::system_clock::from_time_t(1795550400);
  auto jwt = cloud::SignedJwt(*key, cloud::kComputeReadOnly, now);
  REQUIRE_MESSAGE(jwt.ok(), jwt.status().message());
  const size_t dot1 = jwt->find('.');
  const size_t dot2 = jwt->find('.', dot1 + 1);
  REQUIRE(dot2 != std::string::npos);
  CHECK(jwt->find_first_of("+/= ") == std::string::npos);  // base64url, unpadded
  auto header = nlohmann::json::parse(FromBase64Url(jwt->substr(0, dot1)));
  auto claims = nlohmann::json::parse(FromBase64Url(jwt->substr(dot1 + 1, dot2 - dot1 - 1)));
  CHECK(header == nlohmann::json{{"alg", "RS256"}, {"typ", "JWT"}, {"kid", "kid-1"}});
  CHECK(claims["iss"] == "etcd@key-project.iam.gserviceaccount.com");
  CHECK(claims["aud"] == "https://oauth2.googleapis.com/token");
  CHECK(claims["scope"] == cloud::kComputeReadOnly);
  CHECK(claims["iat"] == 1795550400);
  CHECK(claims["exp"] == 1795550400 + 3600);

  // The signature, checked as Google's token endpoint checks it: RSASSA-PKCS1-v1_5 with SHA-256.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr),
                                                           EVP_PKEY_free);
  REQUIRE(pkey);
  // Only the public half, as the verifier has it.
  std::unique_ptr<BIO, decltype(&BIO_free)> pub_bio(BIO_new(BIO_s_mem()), BIO_free);
  REQUIRE(PEM_write_bio_PUBKEY(pub_bio.get(), pkey.get()) == 1);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pub(PEM_read_bio_PUBKEY(pub_bio.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  REQUIRE(pub);
  const std::string input = jwt->substr(0, dot2);
  auto verify = [&](const std::string& signed_text) {
    const std::string signature = FromBase64Url(jwt->substr(dot2 + 1));
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    REQUIRE(EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pub.get()) == 1);
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                            reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size()) == 1;
  };
  CHECK(verify(input));
  CHECK_FALSE(verify(input + "x"));

  CHECK(cloud::ParseServiceAccountKey(KeyFileJson(pem, "ftp://x/token")).status().IsInvalidArgument());
  // An encrypted key is refused at once: no passphrase prompt on a terminal.
  CHECK(cloud::ParseServiceAccountKey(KeyFileJson(NewPrivateKeyPem("secret"), "https://oauth2.googleapis.com/token"))
            .status()
            .IsInvalidArgument());
  CHECK(cloud::ParseServiceAccountKey("{\"type\":\"service_account\"}").status().IsInvalidArgument());
  CHECK(cloud::ParseServiceAccountKey("not json").status().IsInvalidArgument());
}

namespace {

// The Compute API, the metadata server and the token endpoint on one in-process server, with the
// faults a test asks for.
struct FakeGoogle {
  httplib::Server server;
  std::mutex mu;
  std::vector<std::string> asked;
  int token_fetches = 0;
  int expires_in = 3600;
  int throttles = 0;  // the next N Compute calls answer 429 rateLimitExceeded
  bool deny_list = false;
  bool unreachable = false;
  bool flavorless = false;  // the metadata server's answers lack Metadata-Flavor
  int target_size = 3;
  std::string token = "ya29.first";
  std::string hostile_page;  // when set, the instance list's answer, as it is
  std::thread serving;
  int port = 0;

  static std::string Instance(const std::string& name, const std::string& ip, const std::string& status,
                              const std::string& mig) {
    return nlohmann::json{{"name", name},
                          {"status", status},
                          {"zone", "https://www.googleapis.com/compute/v1/projects/proj/zones/us-central1-a"},
                          {"networkInterfaces", {{{"networkIP", ip}}}},
                          // The group's instances carry the network tag etcd; the other one does not.
                          {"tags", {{"items", {mig == "etcd" ? "etcd" : "web", "ssh"}}}},
                          {"metadata",
                           {{"items",
                             {{{"key", "created-by"},
                               {"value", "projects/99/zones/us-central1-a/instanceGroupManagers/" + mig}}}}}}}
        .dump();
  }

  FakeGoogle() {
    server.Get("/computeMetadata/v1/instance/service-accounts/default/token",
               [this](const httplib::Request& req, httplib::Response& res) {
                 std::lock_guard lock(mu);
                 asked.push_back("metadata token flavor=" + req.get_header_value("Metadata-Flavor"));
                 ++token_fetches;
                 if (!flavorless) res.set_header("Metadata-Flavor", "Google");
                 res.set_content(nlohmann::json{{"access_token", token}, {"expires_in", expires_in}, {"token_type", "Bearer"}}.dump(),
                                 "application/json");
               });
    server.Get("/computeMetadata/v1/project/project-id", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu);
      asked.push_back("metadata project-id");
      if (!flavorless) res.set_header("Metadata-Flavor", "Google");
      res.set_content("proj\n", "application/text");  // a line break after the value is not part of it
    });
    server.Get("/computeMetadata/v1/instance/attributes/created-by", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu);
      asked.push_back("metadata created-by");
      res.set_header("Metadata-Flavor", "Google");
      res.set_content("projects/99/zones/us-central1-a/instanceGroupManagers/etcd", "application/text");
    });
    server.Post("/oauth2/token", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      ++token_fetches;
      const bool grant = req.get_param_value("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer";
      const std::string assertion = req.get_param_value("assertion");
      asked.push_back(std::string("token grant=") + (grant ? "jwt-bearer" : "other") +
                      " dots=" + std::to_string(std::count(assertion.begin(), assertion.end(), '.')));
      res.set_content(nlohmann::json{{"access_token", token}, {"expires_in", expires_in}, {"token_type", "Bearer"}}.dump(),
                      "application/json");
    });
    server.Get("/compute/v1/projects/proj/zones/us-central1-a/instanceGroupManagers/etcd",
               [this](const httplib::Request& req, httplib::Response& res) {
                 std::lock_guard lock(mu);
                 asked.push_back("igm " + req.get_header_value("Authorization"));
                 res.set_content(nlohmann::json{{"kind", "compute#instanceGroupManager"}, {"name", "etcd"},
                                                {"targetSize", target_size}}
                                     .dump(),
                                 "application/json");
               });
    server.Get("/compute/v1/projects/proj/aggregated/instances", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      const std::string page = req.get_param_value("pageToken");
      const std::string filter = req.get_param_value("filter");
      asked.push_back("list page=" + page + (filter.empty() ? "" : " filter=" + filter) + " " +
                      req.get_header_value("Authorization"));
      if (throttles > 0) {
        --throttles;
        res.status = 429;
        res.set_header("Retry-After", "0");
        res.set_content(R"({"error":{"code":429,"message":"Quota exceeded","errors":[{"reason":"rateLimitExceeded"}],)"
                        R"("status":"RESOURCE_EXHAUSTED"}})",
                        "application/json");
        return;
      }
      if (deny_list) {
        res.status = 403;
        res.set_content(R"({"error":{"code":403,"message":"Required 'compute.instances.list' permission for 'projects/proj'",)"
                        R"("errors":[{"reason":"forbidden"}],"status":"PERMISSION_DENIED"}})",
                        "application/json");
        return;
      }
      if (req.get_header_value("Authorization") != "Bearer " + token) {
        res.status = 401;
        res.set_content(R"({"error":{"code":401,"message":"Invalid Credentials","status":"UNAUTHENTICATED"}})",
                        "application/json");
        return;
      }
      std::string body;
      if (!hostile_page.empty()) {
        body = hostile_page;
      } else if (page.empty()) {
        body = R"({"kind":"compute#instanceAggregatedList","items":{"zones/us-central1-a":{"instances":[)" +
               Instance("etcd-1", "10.0.0.1", "RUNNING", "etcd") + "," + Instance("etcd-2", "10.0.0.2", "STOPPED", "etcd") +
               R"(]},"zones/us-central1-b":{"warning":{"code":"NO_RESULTS_ON_PAGE"}}},"nextPageToken":"p2")";
        body += unreachable ? R"(,"unreachables":["zones/us-central1-a"]})" : "}";
      } else {
        body = R"({"kind":"compute#instanceAggregatedList","items":{"zones/us-central1-a":{"instances":[)" +
               Instance("etcd-3", "10.0.0.3", "PROVISIONING", "etcd") + "," +
               Instance("other-1", "10.0.0.9", "RUNNING", "other") + "]}}}";
      }
      res.set_content(body, "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    serving = std::thread([this] { server.listen_after_bind(); });
  }
  ~FakeGoogle() {
    server.stop();
    serving.join();
  }
  std::string Base() const { return "http://127.0.0.1:" + std::to_string(port); }
  std::vector<std::string> Asked() {
    std::lock_guard lock(mu);
    auto out = asked;
    asked.clear();
    return out;
  }
};

Result<std::unique_ptr<DiscoveryProvider>> ProviderOf(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE(spec.ok());
  ProviderContext context;
  context.deadline = Clock::TimePoint(std::chrono::steady_clock::now() + std::chrono::seconds(20));
  return ProviderRegistry::Get().Create(*spec, context);
}

std::vector<std::string> Names(const std::vector<Member>& members) {
  std::vector<std::string> out;
  for (const auto& m : members) out.push_back(m.name);
  return out;
}

}  // namespace

TEST_CASE("gce: the provider reads the group's size and every page with the metadata server's token, kept until it runs out") {
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  unsetenv("GCE_METADATA_HOST");
  FakeGoogle g;
  auto p = ProviderOf("provider=gce mig=auto endpoint=" + g.Base() + " metadata_endpoint=" + g.Base());
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  auto members = (*p)->Discover();
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  // The stopped instance and the other group's are left out; the provisioning one counts.
  CHECK(Names(*members) == std::vector<std::string>{"etcd-1", "etcd-3"});
  CHECK((*members)[1].peer_urls == std::vector<std::string>{"http://10.0.0.3:2380"});
  CHECK((*p)->ImpliedSize() == std::optional<size_t>(3));
  CHECK((*p)->ListsWholeGroup());
  CHECK((*p)->Describe() == "gce managed instance group etcd in us-central1-a of project proj");
  CHECK(g.Asked() == std::vector<std::string>{"metadata project-id", "metadata created-by", "metadata token flavor=Google",
                                               "igm Bearer ya29.first", "list page= Bearer ya29.first",
                                               "list page=p2 Bearer ya29.first"});
  // The token is kept while it holds.
  REQUIRE((*p)->Discover().ok());
  CHECK(g.token_fetches == 1);

  // A token with less left than the margin is fetched again before each use.
  g.expires_in = 30;
  g.token = "ya29.second";
  auto short_lived = ProviderOf("provider=gce mig=etcd mig_zone=us-central1-a project_name=proj endpoint=" + g.Base() +
                                " metadata_endpoint=" + g.Base());
  REQUIRE(short_lived.ok());
  REQUIRE((*short_lived)->Discover().ok());
  REQUIRE((*short_lived)->Discover().ok());
  CHECK(g.token_fetches == 3);

  // Throttles are waited out; the answer then is whole.
  g.Asked();
  g.throttles = 2;
  auto throttled = (*short_lived)->Discover();
  REQUIRE_MESSAGE(throttled.ok(), throttled.status().message());
  CHECK(throttled->size() == 2);
  CHECK((*short_lived)->ListsWholeGroup());

  // A zone of the group that did not answer: a partial list, never taken as the group.
  g.unreachable = true;
  auto partial = (*short_lived)->Discover();
  REQUIRE_FALSE(partial.ok());
  CHECK(partial.status().IsUnavailable());
  CHECK(partial.status().message().find("could not reach zones/us-central1-a") != std::string::npos);
  CHECK_FALSE((*short_lived)->ListsWholeGroup());
  g.unreachable = false;

  // A refusal names the permission; no token shows in the message.
  g.deny_list = true;
  auto denied = (*short_lived)->Discover();
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.status().IsUnavailable());
  CHECK(denied.status().message().find("compute.instances.list") != std::string::npos);
  CHECK(denied.status().message().find("ya29") == std::string::npos);
  CHECK_FALSE((*short_lived)->ListsWholeGroup());
  g.deny_list = false;

  // A token the API no longer takes is dropped, and the next Discover fetches another.
  g.expires_in = 3600;
  auto fresh = ProviderOf("provider=gce tag_value=etcd project_name=proj endpoint=" + g.Base() + " metadata_endpoint=" + g.Base());
  REQUIRE(fresh.ok());
  REQUIRE((*fresh)->Discover().ok());
  CHECK_FALSE((*fresh)->ListsWholeGroup());  // tags are not a group the platform keeps
  CHECK((*fresh)->ImpliedSize() == std::nullopt);
  g.token = "ya29.third";
  auto refused = (*fresh)->Discover();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("HTTP 401") != std::string::npos);
  auto again = (*fresh)->Discover();
  REQUIRE_MESSAGE(again.ok(), again.status().message());
  // Matched on the instances listed: the API's filter holds no tag term.
  CHECK(Names(*again) == std::vector<std::string>{"etcd-1", "etcd-3"});
  for (const std::string& asked : g.Asked()) CHECK(asked.find("filter=") == std::string::npos);

  // An answer without Metadata-Flavor: Google is not from a metadata server.
  g.flavorless = true;
  auto impostor = ProviderOf("provider=gce tag_value=etcd endpoint=" + g.Base() + " metadata_endpoint=" + g.Base());
  REQUIRE(impostor.ok());
  auto fooled = (*impostor)->Discover();
  REQUIRE_FALSE(fooled.ok());
  CHECK(fooled.status().IsUnavailable());
  CHECK(fooled.status().message().find("Metadata-Flavor") != std::string::npos);
}

TEST_CASE("gce: with a service-account key, a signed JWT is traded at the key's token_uri") {
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  FakeGoogle g;
  const std::string pem = NewPrivateKeyPem();
  const std::string key_path = TempFile("sa.json", KeyFileJson(pem, g.Base() + "/oauth2/token"));
  auto p = ProviderOf("provider=gce mig=etcd mig_zone=us-central1-a project_name=proj credentials_file=" + key_path +
                      " endpoint=" + g.Base() + " metadata_endpoint=http://127.0.0.1:1");
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  auto members = (*p)->Discover();
  std::remove(key_path.c_str());
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  CHECK(members->size() == 2);
  CHECK(g.Asked() == std::vector<std::string>{"token grant=jwt-bearer dots=2", "igm Bearer ya29.first",
                                               "list page= Bearer ya29.first", "list page=p2 Bearer ya29.first"});
}

TEST_CASE("gce: hostile answers: a huge zone, a page token or access token with CR LF or NUL, addresses no member has") {
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  FakeGoogle g;
  auto page_of = [](const std::string& zone, const std::string& ip) {
    return nlohmann::json{{"kind", "compute#instanceAggregatedList"},
                          {"items",
                           {{"zones/us-central1-a",
                             {{"instances",
                               {{{"name", "etcd-1"}, {"status", "RUNNING"}, {"zone", zone},
                                 {"networkInterfaces", {{{"networkIP", ip}}}},
                                 {"tags", {{"items", {"etcd"}}}}}}}}}}}}
        .dump();
  };
  auto discover = [&](const std::string& keys) {
    auto p = ProviderOf("provider=gce project_name=proj tag_value=etcd endpoint=" + g.Base() + " metadata_endpoint=" +
                        g.Base() + " " + keys);
    REQUIRE_MESSAGE(p.ok(), p.status().message());
    return (*p)->Discover();
  };
  // 30,000 bytes of zone name overflowed std::regex's stack (SIGSEGV); it is refused, unmatched.
  g.hostile_page = page_of("zones/us-" + std::string(30000, 'a'), "10.0.0.1");
  auto huge = discover("zone_pattern=us-.*");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().IsUnavailable());
  CHECK(huge.status().message().find("30003 bytes") != std::string::npos);
  CHECK(huge.status().message().size() < 400);
  g.hostile_page = page_of("zones/us-central1-a", "10.0.0.1");
  auto matched = discover("zone_pattern=us-central1-.*");
  REQUIRE_MESSAGE(matched.ok(), matched.status().message());
  CHECK(matched->size() == 1);

  // A nextPageToken that would break the request line is not sent back.
  for (const std::string& token : {std::string("p2\\r\\nX-Smuggled: 1"), std::string("p2\\u0000x"), std::string("p 2")}) {
    std::string page = page_of("zones/us-central1-a", "10.0.0.1");
    page.insert(page.size() - 1, ",\"nextPageToken\":\"" + token + "\"");
    g.hostile_page = page;
    auto listed = discover("");
    CAPTURE(token);
    REQUIRE_FALSE(listed.ok());
    CHECK(listed.status().IsUnavailable());
    CHECK(listed.status().message().find("nextPageToken") != std::string::npos);
  }

  // Addresses no member has, and an empty group, are answers: Unavailable, retried.
  for (const char* ip : {"0.0.0.0", "255.255.255.255", "300.1.1.1", "224.0.0.5", "etcd.internal", "10.0.0.1\r\n"}) {
    g.hostile_page = page_of("zones/us-central1-a", ip);
    CAPTURE(ip);
    auto bad = discover("");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().IsUnavailable());
  }
  g.hostile_page = R"({"kind":"compute#instanceAggregatedList","items":{}})";
  auto empty = discover("");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().IsUnavailable());
  CHECK(empty.status().message().find("no instances") != std::string::npos);

  // A group of 10,000 is no cluster's size.
  CHECK(ParseInstanceGroupManager(R"({"name":"etcd","targetSize":10000})").status().IsUnavailable());
  CHECK(ParseInstanceGroupManager(R"({"name":"etcd","targetSize":99})").ok());

  // A garbled token answer is described, never shown, not even its start.
  for (const std::string& answer : {std::string("ya29.secret-token not json"),
                                   std::string(R"({"access_token":"ya29.secret\r\nX: 1","expires_in":3600})"),
                                   std::string(R"({"access_token":"ya29.secret\u0000","expires_in":3600})")}) {
    auto token = cloud::ParseGoogleToken(answer);
    CAPTURE(answer);
    REQUIRE_FALSE(token.ok());
    CHECK(token.status().message().find("secret") == std::string::npos);
    CHECK(token.status().message().find("ya29") == std::string::npos);
  }
}

}  // namespace quorate::gce
