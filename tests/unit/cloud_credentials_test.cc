// The clouds' credentials below the store and the providers (src/net/cloud/): AWS's chain in the
// SDKs' order, against in-process servers playing STS, the container endpoint and IMDSv2, with
// refresh on a fake clock.
#include <doctest/doctest.h>

#include <httplib.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "net/cloud/aws_credentials.h"
#include "../support/iso8601.h"
#include "../support/scoped_env.h"
#include "testing/fake_clock.h"

namespace quorate::cloud {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/quorate-creds-" +
         std::to_string(::getpid()) + "-" + name;
}

// Every variable the chain reads, unset (or pointed at no file) for one test case.
struct CleanAwsEnv {
  ScopedEnv vars[15] = {{"AWS_ACCESS_KEY_ID", nullptr},
                        {"AWS_SECRET_ACCESS_KEY", nullptr},
                        {"AWS_SESSION_TOKEN", nullptr},
                        {"AWS_PROFILE", nullptr},
                        {"AWS_DEFAULT_PROFILE", nullptr},
                        {"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"},
                        {"AWS_CONFIG_FILE", "/nonexistent/config"},
                        {"AWS_WEB_IDENTITY_TOKEN_FILE", nullptr},
                        {"AWS_ROLE_ARN", nullptr},
                        {"AWS_ROLE_SESSION_NAME", nullptr},
                        {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", nullptr},
                        {"AWS_CONTAINER_CREDENTIALS_FULL_URI", nullptr},
                        {"AWS_CONTAINER_AUTHORIZATION_TOKEN", nullptr},
                        {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", nullptr},
                        {"AWS_EC2_METADATA_DISABLED", nullptr}};
};

// STS, a container credentials endpoint and IMDSv2 on one loopback server; each answer's key names
// its source and a count, so a test sees which source was asked and how often.
struct FakeAws {
  httplib::Server server;
  std::mutex mu;
  int fetches = 0;
  std::chrono::seconds lifetime{3600};
  std::vector<std::string> asked;
  std::thread serving;
  int port = 0;

  std::string Json(const std::string& source) {
    return fmt::format(R"({{"AccessKeyId":"ASIA{}{}","SecretAccessKey":"s","Token":"t","Expiration":"{}"}})", source,
                       ++fetches, Iso8601(std::chrono::system_clock::now() + lifetime));
  }

  FakeAws() {
    server.Post("/", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      asked.push_back("sts " + req.get_param_value("RoleArn") + " " + req.get_param_value("WebIdentityToken"));
      res.set_content(fmt::format("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                                  "<AccessKeyId>ASIASTS{}</AccessKeyId><SecretAccessKey>s</SecretAccessKey>"
                                  "<SessionToken>t</SessionToken><Expiration>{}</Expiration></Credentials>"
                                  "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                                  ++fetches, Iso8601(std::chrono::system_clock::now() + lifetime)),
                      "text/xml");
    });
    server.Get("/v2/credentials", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      asked.push_back("container " + req.get_header_value("Authorization"));
      res.set_content(Json("CONTAINER"), "application/json");
    });
    server.Put("/latest/api/token", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("imds-session", "text/plain");
    });
    server.Get("/latest/meta-data/iam/security-credentials/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("role", "text/plain");
    });
    server.Get("/latest/meta-data/iam/security-credentials/role", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu);
      asked.push_back("imds");
      res.set_content(Json("ROLE"), "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    serving = std::thread([this] { server.listen_after_bind(); });
  }
  ~FakeAws() {
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

}  // namespace

TEST_CASE("aws credentials: each partition's endpoints") {
  CHECK(AwsEndpoint("ec2", "eu-west-1") == "https://ec2.eu-west-1.amazonaws.com:443");
  CHECK(AwsEndpoint("sts", "cn-north-1") == "https://sts.cn-north-1.amazonaws.com.cn:443");
  CHECK(AwsEndpoint("s3", "cn-northwest-1") == "https://s3.cn-northwest-1.amazonaws.com.cn:443");
  CHECK(AwsEndpoint("autoscaling", "us-gov-west-1") == "https://autoscaling.us-gov-west-1.amazonaws.com:443");
  CHECK(AwsEndpoint("ec2", "us-iso-east-1") == "https://ec2.us-iso-east-1.c2s.ic.gov:443");
}

TEST_CASE("aws credentials: the chain in the SDKs' order: keys, AWS_PROFILE, environment, web identity, files, "
          "container, instance role") {
  CleanAwsEnv clean;
  FakeAws aws;
  FakeClock clock;
  AwsSettings settings;
  settings.sts_endpoint = aws.Base();
  settings.imds_endpoint = aws.Base();
  settings.clock = &clock;
  auto first = [&]() -> std::string {
    auto chain = AwsCredentialChain::Create(settings);
    REQUIRE_MESSAGE(chain.ok(), chain.status().message());
    auto creds = (*chain)->Get(Clock::kNever);
    REQUIRE_MESSAGE(creds.ok(), creds.status().message());
    return creds->access_key;
  };

  // Nothing set: the instance role.
  CHECK(first() == "ASIAROLE1");

  // Container credentials (ECS, EKS Pod Identity): the token file is read at each fetch.
  const std::string token_file = TempPath("container-token");
  std::ofstream(token_file) << "pod-identity-token\n";
  ScopedEnv full("AWS_CONTAINER_CREDENTIALS_FULL_URI", (aws.Base() + "/v2/credentials").c_str());
  ScopedEnv token("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token_file.c_str());
  CHECK(first() == "ASIACONTAINER2");
  CHECK(aws.Asked() == std::vector<std::string>{"imds", "container pod-identity-token"});

  // The default profile of the shared files comes before the container.
  const std::string credentials = TempPath("credentials");
  const std::string config = TempPath("config");
  std::ofstream(credentials) << "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d\n"
                             << "[prod]\naws_access_key_id=AKIAPROD\naws_secret_access_key=p\n";
  std::ofstream(config) << "[profile eks]\nrole_arn = arn:aws:iam::1:role/etcd\nweb_identity_token_file = " << token_file
                        << "\n[profile sso]\nsso_session = corp\n";
  ScopedEnv credentials_file("AWS_SHARED_CREDENTIALS_FILE", credentials.c_str());
  ScopedEnv config_file("AWS_CONFIG_FILE", config.c_str());
  CHECK(first() == "AKIADEFAULT");

  // A web identity from the environment comes before the files.
  {
    ScopedEnv file("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.c_str());
    ScopedEnv role("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa");
    CHECK(first() == "ASIASTS3");
    CHECK(aws.Asked() == std::vector<std::string>{"sts arn:aws:iam::1:role/irsa pod-identity-token"});
    // Keys in the environment before that.
    ScopedEnv id("AWS_ACCESS_KEY_ID", "AKIAENV");
    ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "e");
    CHECK(first() == "AKIAENV");
    // A profile named by AWS_PROFILE before those: keys, or a role with a web identity.
    ScopedEnv profile("AWS_PROFILE", "prod");
    CHECK(first() == "AKIAPROD");
    ScopedEnv eks("AWS_PROFILE", "eks");
    CHECK(first() == "ASIASTS4");
    CHECK(aws.Asked() == std::vector<std::string>{"sts arn:aws:iam::1:role/etcd pod-identity-token"});
    // Keys given win over all.
    settings.access_key = "AKIAGIVEN";
    settings.secret = "g";
    CHECK(first() == "AKIAGIVEN");
    settings.access_key.clear();
    settings.secret.clear();
  }

  // What the operator set wrong is bad input, named, its secrets never shown.
  auto refused = [&]() {
    auto chain = AwsCredentialChain::Create(settings);
    REQUIRE_FALSE(chain.ok());
    CHECK(chain.status().IsInvalidArgument());
    CHECK(chain.status().message().find("hunter2") == std::string::npos);
    return chain.status().message();
  };
  {
    ScopedEnv profile("AWS_PROFILE", "nosuch");
    CHECK(refused().find("AWS_PROFILE 'nosuch'") != std::string::npos);
  }
  {
    ScopedEnv profile("AWS_PROFILE", "sso");
    CHECK(refused().find("profile sso") != std::string::npos);
  }
  {
    ScopedEnv id("AWS_ACCESS_KEY_ID", "AKIA");
    CHECK(refused().find("go together") != std::string::npos);
    ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "hunter2\r\nX-Smuggled: 1");
    CHECK(refused().find("secret") != std::string::npos);
  }
  {
    ScopedEnv credentials_none("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials");
    ScopedEnv other("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.169.254/steal");
    CHECK(refused().find("AWS_CONTAINER_CREDENTIALS_FULL_URI") != std::string::npos);
    ScopedEnv full_off("AWS_CONTAINER_CREDENTIALS_FULL_URI", nullptr);
    ScopedEnv off("AWS_EC2_METADATA_DISABLED", "true");
    CHECK(refused().find("no AWS credentials") != std::string::npos);
  }
  std::remove(token_file.c_str());
  std::remove(credentials.c_str());
  std::remove(config.c_str());
}

TEST_CASE("aws credentials: fetched ones are kept until 5 minutes before they expire, on the clock given") {
  CleanAwsEnv clean;
  FakeAws aws;
  FakeClock clock;
  AwsSettings settings;
  settings.imds_endpoint = aws.Base();
  settings.clock = &clock;
  auto chain = AwsCredentialChain::Create(settings);
  REQUIRE(chain.ok());
  CHECK((*chain)->Source() == "the instance role from IMDS at " + aws.Base());
  REQUIRE((*chain)->Get(Clock::kNever).ok());
  clock.Advance(std::chrono::minutes(54));
  CHECK((*chain)->Get(Clock::kNever)->access_key == "ASIAROLE1");
  clock.Advance(std::chrono::minutes(2));  // 4 minutes left of the hour: fetched again
  CHECK((*chain)->Get(Clock::kNever)->access_key == "ASIAROLE2");
  (*chain)->Drop();
  CHECK((*chain)->Get(Clock::kNever)->access_key == "ASIAROLE3");
  CHECK(aws.fetches == 3);
}

}  // namespace quorate::cloud
