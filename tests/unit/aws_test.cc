// The aws provider's keys, requests and answers, without the network (discovery/aws/aws.h); the
// provider against moto's EC2 and Auto Scaling is tests/integration/aws_test.py.
#include <doctest/doctest.h>

#include <httplib.h>

#include <cstdlib>
#include <ctime>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "../support/iso8601.h"

#include "../../discovery/aws/aws.h"

namespace quorate::aws {
namespace {

Result<Options> OptionsOf(const std::string& text) {
  auto spec = ParseDiscoverySpec(text);
  REQUIRE(spec.ok());
  ProviderParams params(*spec);
  return TakeOptions(params);
}

const char* kInstances = R"(<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>
  <reservationSet><item><reservationId>r-1</reservationId><instancesSet>
    <item><instanceId>i-1</instanceId><instanceState><code>16</code><name>running</name></instanceState>
      <privateDnsName>ip-10-0-0-1.ec2.internal</privateDnsName><privateIpAddress>10.0.0.1</privateIpAddress>
      <ipAddress>54.0.0.1</ipAddress>
      <networkInterfaceSet><item><ipv6AddressesSet><item><ipv6Address>2600:1f18::1</ipv6Address></item></ipv6AddressesSet></item></networkInterfaceSet>
      <tagSet><item><key>Name</key><value>etcd-a</value></item><item><key>aws:autoscaling:groupName</key><value>etcd</value></item></tagSet>
    </item>
    <item><instanceId>i-2</instanceId><instanceState><code>0</code><name>pending</name></instanceState>
      <privateIpAddress>10.0.0.2</privateIpAddress></item>
    <item><instanceId>i-3</instanceId><instanceState><code>80</code><name>stopped</name></instanceState>
      <privateIpAddress>10.0.0.3</privateIpAddress></item>
  </instancesSet></item></reservationSet>
  <nextToken>page2</nextToken>
</DescribeInstancesResponse>)";

}  // namespace

TEST_CASE("aws: keys as go-discover spells them, the environment for what they leave out, bad input named") {
  setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("AWS_REGION");
  unsetenv("AWS_DEFAULT_REGION");
  auto o = OptionsOf("provider=aws asg=etcd region=eu-west-1");
  REQUIRE_MESSAGE(o.ok(), o.status().message());
  CHECK(o->ec2_endpoint == "https://ec2.eu-west-1.amazonaws.com:443");
  CHECK(o->autoscaling_endpoint == "https://autoscaling.eu-west-1.amazonaws.com:443");
  CHECK(o->credentials->Source() == "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  CHECK(o->peer_port == 2380);
  auto tagged = OptionsOf("provider=aws tag_key=role tag_value=etcd region=us-east-1 endpoint=http://127.0.0.1:5000 "
                          "addr_type=private_dns peer_port=12380 name_tag=Name");
  REQUIRE_MESSAGE(tagged.ok(), tagged.status().message());
  CHECK(tagged->ec2_endpoint == "http://127.0.0.1:5000");
  CHECK(tagged->autoscaling_endpoint == "http://127.0.0.1:5000");
  CHECK(tagged->peer_port == 12380);

  // No region: the instance's own, asked of IMDS at the first Discover (not bad input).
  auto unplaced = OptionsOf("provider=aws asg=auto page_size=5");
  REQUIRE_MESSAGE(unplaced.ok(), unplaced.status().message());
  CHECK(unplaced->region.empty());
  CHECK(unplaced->asg == "auto");
  CHECK(unplaced->page_size == 5);
  SetRegion(*unplaced, "ap-south-1");
  CHECK(unplaced->sts_endpoint == "https://sts.ap-south-1.amazonaws.com:443");

  for (const char* bad : {"provider=aws region=us-east-1", "provider=aws asg=etcd page_size=4",
                          "provider=aws asg=etcd page_size=1001", "provider=aws asg=etcd page_size=ten",
                          "provider=aws asg=etcd region=us-east-1 tag_kye=x",
                          "provider=aws asg=etcd region=us-east-1 addr_type=public",
                          "provider=aws asg=etcd region=us-east-1 peer_port=70000",
                          "provider=aws asg=etcd region=us-east-1 access_key_id=AKID",
                          "provider=aws tag_value=etcd region=us-east-1",
                          "provider=aws asg=etcd region=us-east-1 endpoint=http://127.0.0.1:5000/path",
                          "provider=aws asg=etcd region=eu_west_1"}) {
    CAPTURE(bad);
    auto r = OptionsOf(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
  }
  unsetenv("AWS_ACCESS_KEY_ID");
  CHECK(OptionsOf("provider=aws asg=etcd region=us-east-1").status().IsInvalidArgument());  // half a key pair
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/eks.amazonaws.com/serviceaccount/token", 1);
  CHECK(OptionsOf("provider=aws asg=etcd region=us-east-1").status().IsInvalidArgument());  // no AWS_ROLE_ARN
  setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/etcd", 1);
  auto web = OptionsOf("provider=aws asg=etcd region=us-east-1");
  REQUIRE_MESSAGE(web.ok(), web.status().message());
  CHECK(web->credentials->Source() ==
        "web identity arn:aws:iam::123456789012:role/etcd (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN)");
  CHECK(web->sts_endpoint == "https://sts.us-east-1.amazonaws.com:443");
  unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
  unsetenv("AWS_ROLE_ARN");
  // Nothing given: the instance role, from IMDS at its link-local address.
  auto role = OptionsOf("provider=aws asg=etcd region=us-east-1");
  REQUIRE_MESSAGE(role.ok(), role.status().message());
  CHECK(role->credentials->imds_endpoint() == "http://169.254.169.254:80");
  CHECK(role->credentials->Source() == "the instance role from IMDS at http://169.254.169.254:80");
  CHECK(cloud::CheckAwsRegion("eu-central-1").ok());
  CHECK(cloud::CheckAwsRegion("<html>").status().IsUnavailable());
  CHECK(CheckInstanceId("i-0abc123def").ok());
  for (const char* bad : {"", "i-", "i-XYZ", "vm-1", "i-0abc\n"}) CHECK(CheckInstanceId(bad).status().IsUnavailable());
}

TEST_CASE("aws: DescribeInstances asks for the group's own pending and running instances, page by page") {
  Options o;
  o.asg = "etcd";
  o.tag_key = "role";
  o.tag_value = "etcd";
  const std::vector<std::string> ids = {"i-1", "i-2"};
  auto q = DescribeInstancesQuery(o, &ids, "page2");
  CHECK(q.at("Action") == "DescribeInstances");
  CHECK(q.at("Filter.1.Name") == "instance-state-name");
  CHECK(q.at("Filter.1.Value.1") == "pending");
  CHECK(q.at("Filter.1.Value.2") == "running");
  // The instances the group lists, not the group-name tag (which an attached instance lacks).
  CHECK(q.at("Filter.2.Name") == "instance-id");
  CHECK(q.at("Filter.2.Value.1") == "i-1");
  CHECK(q.at("Filter.2.Value.2") == "i-2");
  CHECK(q.at("Filter.3.Name") == "tag:role");
  CHECK(q.at("NextToken") == "page2");
  CHECK(q.at("MaxResults") == "1000");
  o.tag_value.clear();
  CHECK(DescribeInstancesQuery(o, &ids, "").at("Filter.3.Name") == "tag-key");
  CHECK(DescribeInstancesQuery(o, &ids, "").count("NextToken") == 0);
  CHECK(DescribeInstancesQuery(o, nullptr, "").at("Filter.2.Name") == "tag-key");
}

TEST_CASE("aws: instances become members by the address type asked; stopped ones do not count") {
  auto page = ParseDescribeInstances(kInstances);
  REQUIRE_MESSAGE(page.ok(), page.status().message());
  REQUIRE(page->instances.size() == 3);
  CHECK(page->next_token == "page2");
  CHECK(page->instances[0].tags.at("Name") == "etcd-a");
  CHECK(Counts("running"));
  CHECK(Counts("pending"));
  for (const char* gone : {"stopping", "stopped", "shutting-down", "terminated"}) CHECK_FALSE(Counts(gone));

  Options o;
  auto m = MemberOf(o, page->instances[0]);
  REQUIRE(m.ok());
  REQUIRE(m->has_value());
  CHECK((*m)->name == "i-1");
  CHECK((*m)->peer_urls == std::vector<std::string>{"http://10.0.0.1:2380"});
  CHECK((*m)->client_urls == std::vector<std::string>{"http://10.0.0.1:2379"});
  o.name_tag = "Name";
  o.addr_type = "public_v6";
  o.scheme = "https";
  m = MemberOf(o, page->instances[0]);
  REQUIRE(m.ok());
  CHECK((*m)->name == "etcd-a");
  CHECK((*m)->peer_urls == std::vector<std::string>{"https://[2600:1f18::1]:2380"});
  // No address of that type yet: not a member (yet), not an error.
  m = MemberOf(o, page->instances[1]);
  REQUIRE(m.ok());
  CHECK_FALSE(m->has_value());
  // A name etcd would refuse is the answer's fault: Unavailable, retried.
  Instance odd = page->instances[0];
  odd.tags["Name"] = "a=b";
  m = MemberOf(o, odd);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().IsUnavailable());
}

TEST_CASE("aws: the group's desired size, the error bodies of both APIs, and answers that are not theirs") {
  const char* groups = R"(<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/">
<DescribeAutoScalingGroupsResult><AutoScalingGroups><member><AutoScalingGroupName>etcd</AutoScalingGroupName>
<DesiredCapacity>3</DesiredCapacity><Instances><member><InstanceId>i-1</InstanceId><LifecycleState>InService</LifecycleState></member>
</Instances></member></AutoScalingGroups></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>)";
  auto g = ParseAutoScalingGroup(groups, "etcd");
  REQUIRE(g.ok());
  CHECK(g->desired == 3);
  CHECK(g->instance_ids == std::vector<std::string>{"i-1"});
  // The group's own view of its instances: InService and Pending count, the rest do not.
  std::string states;
  const std::vector<std::string> lifecycle = {"InService", "Pending", "Pending:Wait", "Pending:Proceed", "Standby",
                                              "EnteringStandby", "Terminating", "Terminating:Wait", "Detaching",
                                              "Detached", "Quarantined", "Warmed:Running", "Warmed:Pending"};
  for (size_t i = 0; i < lifecycle.size(); ++i) {
    states += fmt::format("<member><InstanceId>i-{}</InstanceId><LifecycleState>{}</LifecycleState></member>", i + 1,
                          lifecycle[i]);
  }
  auto mixed = ParseAutoScalingGroup(
      "<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult><AutoScalingGroups><member>"
      "<AutoScalingGroupName>etcd</AutoScalingGroupName><DesiredCapacity>4</DesiredCapacity><Instances>" +
          states + "</Instances></member></AutoScalingGroups></DescribeAutoScalingGroupsResult>"
                   "</DescribeAutoScalingGroupsResponse>",
      "etcd");
  REQUIRE_MESSAGE(mixed.ok(), mixed.status().message());
  CHECK(mixed->instance_ids == std::vector<std::string>{"i-1", "i-2", "i-3", "i-4"});
  CHECK(ParseAutoScalingGroup("<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult><AutoScalingGroups>"
                              "<member><AutoScalingGroupName>etcd</AutoScalingGroupName><DesiredCapacity>1"
                              "</DesiredCapacity><Instances><member><InstanceId>i-1&#13;&#10;x</InstanceId>"
                              "<LifecycleState>InService</LifecycleState></member></Instances></member>"
                              "</AutoScalingGroups></DescribeAutoScalingGroupsResult>"
                              "</DescribeAutoScalingGroupsResponse>",
                              "etcd")
            .status()
            .IsUnavailable());
  CHECK(ParseAutoScalingGroup(groups, "other").status().IsNotFound());

  auto ec2 = cloud::ParseAwsError("<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not "
                        "authorized</Message></Error></Errors><RequestID>x</RequestID></Response>");
  CHECK(ec2.code == "UnauthorizedOperation");
  auto asg = cloud::ParseAwsError("<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded"
                        "</Message></Error></ErrorResponse>");
  CHECK(asg.code == "Throttling");
  CHECK(cloud::ParseAwsError("not xml").code.empty());

  CHECK(ParseDescribeInstances("<html>proxy</html>").status().IsUnavailable());
  CHECK(ParseDescribeInstances("<DescribeInstancesResponse><reservationSet><item><instancesSet><item>"
                               "</item></instancesSet></item></reservationSet></DescribeInstancesResponse>")
            .status()
            .IsUnavailable());
  CHECK(ParseAutoScalingGroup("<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult>"
                              "<AutoScalingGroups><member><AutoScalingGroupName>etcd</AutoScalingGroupName>"
                              "<DesiredCapacity>-1</DesiredCapacity></member></AutoScalingGroups>"
                              "</DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>",
                              "etcd")
            .status()
            .IsUnavailable());
}

TEST_CASE("aws: the instance role's credentials from IMDSv2: a session token first, then GETs that carry it") {
  httplib::Server imds;
  std::mutex mu;
  std::vector<std::string> asked;
  imds.Put("/latest/api/token", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    asked.push_back("PUT token ttl=" + req.get_header_value("X-aws-ec2-metadata-token-ttl-seconds"));
    res.set_content("imds-session", "text/plain");
  });
  imds.Get(R"(/latest/meta-data/iam/security-credentials/(.*))", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    asked.push_back("GET " + req.path + " token=" + req.get_header_value("X-aws-ec2-metadata-token"));
    if (req.get_header_value("X-aws-ec2-metadata-token") != "imds-session") {
      res.status = 401;
      return;
    }
    if (req.matches[1].str().empty()) {
      res.set_content("etcd-role\n", "text/plain");
    } else {
      res.set_content(R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAROLE","SecretAccessKey":"role-secret",)"
                      R"("Token":"role-token","Expiration":"2026-11-24T20:00:00Z"})",
                      "application/json");
    }
  });
  int port = imds.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { imds.listen_after_bind(); });
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                           "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"}) {
    unsetenv(name);
  }
  setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
  setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
  cloud::AwsSettings settings;
  settings.imds_endpoint = "http://127.0.0.1:" + std::to_string(port);
  auto chain = cloud::AwsCredentialChain::Create(settings);
  REQUIRE_MESSAGE(chain.ok(), chain.status().message());
  auto creds = (*chain)->Get(Clock::kNever);
  imds.stop();
  serving.join();
  REQUIRE_MESSAGE(creds.ok(), creds.status().message());
  CHECK(creds->access_key == "ASIAROLE");
  CHECK(creds->secret == "role-secret");
  CHECK(creds->session_token == "role-token");
  CHECK(creds->expiration == std::chrono::system_clock::from_time_t(1795550400));  // 2026-11-24T20:00:00Z
  CHECK(asked == std::vector<std::string>{"PUT token ttl=21600",
                                          "GET /latest/meta-data/iam/security-credentials/ token=imds-session",
                                          "GET /latest/meta-data/iam/security-credentials/etcd-role token=imds-session"});
}

TEST_CASE("aws: STS's web identity answer and IMDS's credentials, and answers that are not them") {
  auto sts = cloud::ParseAssumeRoleWithWebIdentity(
      R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><SessionToken>tok</SessionToken><SecretAccessKey>sec</SecretAccessKey>
<Expiration>2026-11-24T20:00:00.000Z</Expiration><AccessKeyId>ASIA1</AccessKeyId></Credentials>
</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>)");
  REQUIRE_MESSAGE(sts.ok(), sts.status().message());
  CHECK(sts->access_key == "ASIA1");
  CHECK(sts->session_token == "tok");
  CHECK(cloud::ParseAssumeRoleWithWebIdentity("<ErrorResponse/>").status().IsUnavailable());
  CHECK(cloud::ParseCredentialsJson(R"({"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"tomorrow"})").status().IsUnavailable());
  CHECK(cloud::ParseCredentialsJson("<html>captive portal</html>").status().IsUnavailable());
  CHECK(cloud::ParseCredentialsJson(R"({"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"4522-11-24T20:00:00Z"})")
            .status()
            .IsUnavailable());
}

TEST_CASE("aws: on an instance: region and group from IMDSv2, rotating role credentials, every page read") {
  // One local server plays IMDSv2 (a GET without the session token of a PUT is refused, as AWS does
  // when IMDSv1 is off) and the EC2 and Auto Scaling Query APIs (by Action).
  httplib::Server aws;
  std::mutex mu;
  int tokens = 0, credential_sets = 0;
  std::vector<std::string> actions, keys_used;
  aws.Put("/latest/api/token", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    if (req.get_header_value("X-aws-ec2-metadata-token-ttl-seconds").empty()) {
      res.status = 400;
      return;
    }
    res.set_content("session-" + std::to_string(++tokens), "text/plain");
  });
  auto imds = [&](const std::string& path, const std::function<std::string()>& answer) {
    aws.Get(path, [&, answer](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu);
      const std::string token = req.get_header_value("X-aws-ec2-metadata-token");
      if (token.rfind("session-", 0) != 0 || std::stoi(token.substr(8)) > tokens) {
        res.status = 401;
        return;
      }
      res.set_content(answer(), "text/plain");
    });
  };
  imds("/latest/meta-data/placement/region", [] { return std::string("eu-north-1"); });
  imds("/latest/meta-data/instance-id", [] { return std::string("i-0a1"); });
  imds("/latest/meta-data/iam/security-credentials/", [] { return std::string("etcd-role"); });
  // Each set expires within the 5 minutes before which the provider refreshes: every Discover
  // fetches the next set, as a long-running node does every few hours.
  imds("/latest/meta-data/iam/security-credentials/etcd-role", [&] {
    ++credential_sets;
    return fmt::format(R"({{"AccessKeyId":"ASIAROLE{}","SecretAccessKey":"s","Token":"t","Expiration":"{}"}})",
                       credential_sets, Iso8601(std::chrono::system_clock::now() + std::chrono::minutes(4)))
        ;
  });
  aws.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu);
    const std::string action = req.get_param_value("Action");
    actions.push_back(action + (req.has_param("NextToken") ? "+" + req.get_param_value("NextToken") : ""));
    const std::string auth = req.get_header_value("Authorization");
    keys_used.push_back(auth.substr(auth.find("Credential=") + 11, 9));
    if (action == "DescribeAutoScalingInstances") {
      CHECK(req.get_param_value("InstanceIds.member.1") == "i-0a1");
      res.set_content("<DescribeAutoScalingInstancesResponse><DescribeAutoScalingInstancesResult><AutoScalingInstances>"
                      "<member><InstanceId>i-0a1</InstanceId><AutoScalingGroupName>etcd-asg</AutoScalingGroupName>"
                      "</member></AutoScalingInstances></DescribeAutoScalingInstancesResult>"
                      "</DescribeAutoScalingInstancesResponse>",
                      "text/xml");
    } else if (action == "DescribeAutoScalingGroups") {
      CHECK(req.get_param_value("AutoScalingGroupNames.member.1") == "etcd-asg");
      res.set_content("<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult><AutoScalingGroups><member>"
                      "<AutoScalingGroupName>etcd-asg</AutoScalingGroupName><DesiredCapacity>3</DesiredCapacity>"
                      "<Instances><member><InstanceId>i-0a1</InstanceId><LifecycleState>InService</LifecycleState>"
                      "</member><member><InstanceId>i-0a2</InstanceId><LifecycleState>Pending</LifecycleState>"
                      "</member><member><InstanceId>i-0a3</InstanceId><LifecycleState>Standby</LifecycleState>"
                      "</member></Instances></member></AutoScalingGroups></DescribeAutoScalingGroupsResult>"
                      "</DescribeAutoScalingGroupsResponse>",
                      "text/xml");
    } else {
      CHECK(req.get_param_value("MaxResults") == "5");
      // Asked by the group's own instances that count: the one in Standby is not.
      CHECK(req.get_param_value("Filter.2.Name") == "instance-id");
      CHECK(req.get_param_value("Filter.2.Value.2") == "i-0a2");
      CHECK_FALSE(req.has_param("Filter.2.Value.3"));
      const bool first = !req.has_param("NextToken");
      const std::string id = first ? "i-0a1" : "i-0a2";
      res.set_content(fmt::format("<DescribeInstancesResponse><reservationSet><item><instancesSet><item>"
                                  "<instanceId>{}</instanceId><instanceState><name>running</name></instanceState>"
                                  "<privateIpAddress>127.0.0.{}</privateIpAddress></item></instancesSet></item>"
                                  "</reservationSet>{}</DescribeInstancesResponse>",
                                  id, first ? 1 : 2, first ? "<nextToken>p2</nextToken>" : ""),
                      "text/xml");
    }
  });
  int port = aws.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { aws.listen_after_bind(); });
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port);
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                           "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"}) {
    unsetenv(name);
  }
  setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint.c_str(), 1);
  auto spec = ParseDiscoverySpec("provider=aws asg=auto page_size=5 endpoint=" + endpoint);
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec, ProviderContext{{}, "t", std::nullopt, Clock::kNever});
  REQUIRE_MESSAGE(provider.ok(), provider.status().message());
  auto first = (*provider)->Discover();
  auto second = (*provider)->Discover();
  aws.stop();
  serving.join();
  unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  REQUIRE_MESSAGE(first.ok(), first.status().message());
  REQUIRE_MESSAGE(second.ok(), second.status().message());
  REQUIRE(first->size() == 2);
  CHECK((*first)[1].peer_urls == std::vector<std::string>{"http://127.0.0.2:2380"});
  CHECK((*provider)->ImpliedSize() == std::optional<size_t>(3));
  CHECK((*provider)->ListsWholeGroup());
  CHECK((*provider)->Describe() == "aws Auto Scaling group etcd-asg in eu-north-1");
  // The group is asked for once; the region and instance ID too (one IMDS session for both, then
  // one per credential fetch).
  CHECK(actions == std::vector<std::string>{"DescribeAutoScalingInstances", "DescribeAutoScalingGroups",
                                            "DescribeInstances", "DescribeInstances+p2", "DescribeAutoScalingGroups",
                                            "DescribeInstances", "DescribeInstances+p2"});
  CHECK(credential_sets == 2);
  CHECK(keys_used == std::vector<std::string>{"ASIAROLE1", "ASIAROLE1", "ASIAROLE1", "ASIAROLE1", "ASIAROLE2",
                                              "ASIAROLE2", "ASIAROLE2"});
  CHECK(tokens == 3);
}

TEST_CASE("aws: hostile answers: garbled credentials never shown, bad addresses, NextToken with CR LF, a group too big") {
  // A garbled credential answer is described by its size, never shown, not even its start.
  for (const std::string& answer : {std::string("AccessKeyId=ASIASECRET SecretAccessKey=hunter2value"),
                                   std::string(R"({"AccessKeyId":"ASIASECRET","SecretAccessKey":"hunter2\r\nvalue",)"
                                               R"("Token":"t","Expiration":"2026-11-24T20:00:00Z"})"),
                                   std::string(R"({"AccessKeyId":"ASIASECRET","SecretAccessKey":"hunter2value",)"
                                               R"("Token":"t\u0000","Expiration":"2026-11-24T20:00:00Z"})")}) {
    auto creds = cloud::ParseCredentialsJson(answer);
    CAPTURE(answer);
    REQUIRE_FALSE(creds.ok());
    CHECK(creds.status().IsUnavailable());
    CHECK(creds.status().message().find("ASIASECRET") == std::string::npos);
    CHECK(creds.status().message().find("hunter2") == std::string::npos);
  }
  auto sts = cloud::ParseAssumeRoleWithWebIdentity("<AssumeRoleWithWebIdentityResponse>ASIASECRET hunter2value");
  REQUIRE_FALSE(sts.ok());
  CHECK(sts.status().message().find("ASIASECRET") == std::string::npos);
  CHECK(sts.status().message().find("hunter2") == std::string::npos);

  // Only a unicast address of the family asked is a member's; a private DNS name must be a host name.
  Options o;
  for (const char* ip : {"0.0.0.0", "255.255.255.255", "300.1.1.1", "224.0.0.1", "etcd.internal", "10.0.0.1\r\n"}) {
    CAPTURE(ip);
    Instance i{"i-1", "running", ip, "", "", "", {}};
    CHECK(MemberOf(o, i).status().IsUnavailable());
  }
  o.addr_type = "public_v6";
  CHECK(MemberOf(o, Instance{"i-1", "running", "", "", "", "ff02::1", {}}).status().IsUnavailable());
  CHECK(MemberOf(o, Instance{"i-1", "running", "", "", "", "10.0.0.1", {}}).status().IsUnavailable());
  REQUIRE(MemberOf(o, Instance{"i-1", "running", "", "", "", "2600:1f18::1", {}}).ok());
  o.addr_type = "private_dns";
  CHECK(MemberOf(o, Instance{"i-1", "running", "", "", "ip-10.ec2.internal\r\nX: 1", "", {}}).status().IsUnavailable());

  CHECK(ParseAutoScalingGroup("<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult>"
                              "<AutoScalingGroups><member><AutoScalingGroupName>etcd</AutoScalingGroupName>"
                              "<DesiredCapacity>10000</DesiredCapacity></member></AutoScalingGroups>"
                              "</DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>",
                              "etcd")
            .status()
            .IsUnavailable());

  // A NextToken that would break the request, two instances of one address and a group with none
  // are answers: Unavailable, retried within --timeout.
  httplib::Server ec2;
  std::mutex mu;
  std::string answer;
  ec2.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(mu);
    res.set_content(answer, "text/xml");
  });
  int port = ec2.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread serving([&] { ec2.listen_after_bind(); });
  auto spec = ParseDiscoverySpec("provider=aws tag_key=role region=eu-west-1 access_key_id=AKIA secret_access_key=s "
                                 "endpoint=http://127.0.0.1:" + std::to_string(port));
  REQUIRE(spec.ok());
  auto provider = ProviderRegistry::Get().Create(*spec, ProviderContext{});
  REQUIRE_MESSAGE(provider.ok(), provider.status().message());
  auto page = [](const std::string& ips, const std::string& next) {
    std::string items;
    int n = 0;
    for (size_t from = 0; from < ips.size();) {
      const size_t comma = std::min(ips.find(',', from), ips.size());
      items += fmt::format("<item><instanceId>i-{}</instanceId><instanceState><name>running</name></instanceState>"
                           "<privateIpAddress>{}</privateIpAddress></item>",
                           ++n, ips.substr(from, comma - from));
      from = comma + 1;
    }
    return fmt::format("<DescribeInstancesResponse><reservationSet><item><instancesSet>{}</instancesSet></item>"
                       "</reservationSet>{}</DescribeInstancesResponse>",
                       items, next.empty() ? "" : "<nextToken>" + next + "</nextToken>");
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {page("10.0.0.1", "p2&#13;&#10;X-Smuggled: 1"), "NextToken"},
      {page("10.0.0.1", "p2&#0;"), ""},
      {page("10.0.0.1,10.0.0.1", ""), "both have the peer URL"},
      {page("", ""), "no instances"},
  };
  for (const auto& c : cases) {
    // Not a structured binding: clang 14 (the sanitizer build) lets no lambda, CAPTURE's, name one.
    const auto& [text, expected] = c;
    {
      std::lock_guard lock(mu);
      answer = text;
    }
    auto members = (*provider)->Discover();
    CAPTURE(c.first);
    REQUIRE_FALSE(members.ok());
    CHECK(members.status().IsUnavailable());
    CHECK(members.status().message().find(expected) != std::string::npos);
  }
  ec2.stop();
  serving.join();
}

}  // namespace quorate::aws
