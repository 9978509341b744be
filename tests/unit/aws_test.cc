// The aws provider's keys, requests and answers, without the network (discovery/aws/aws.h); the
// provider against moto's EC2 and Auto Scaling is tests/integration/aws_test.py.
#include <doctest/doctest.h>

#include <cstdlib>

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
  CHECK(o->access_key == "AKID");
  CHECK(o->peer_port == 2380);
  auto tagged = OptionsOf("provider=aws tag_key=role tag_value=etcd region=us-east-1 endpoint=http://127.0.0.1:5000 "
                          "addr_type=private_dns peer_port=12380 name_tag=Name");
  REQUIRE_MESSAGE(tagged.ok(), tagged.status().message());
  CHECK(tagged->ec2_endpoint == "http://127.0.0.1:5000");
  CHECK(tagged->autoscaling_endpoint == "http://127.0.0.1:5000");
  CHECK(tagged->peer_port == 12380);

  for (const char* bad : {"provider=aws asg=etcd", "provider=aws region=us-east-1",
                          "provider=aws asg=etcd region=us-east-1 tag_kye=x",
                          "provider=aws asg=etcd region=us-east-1 addr_type=public",
                          "provider=aws asg=auto region=us-east-1",
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
  auto none = OptionsOf("provider=aws asg=etcd region=us-east-1");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("no credentials") != std::string::npos);
  unsetenv("AWS_SECRET_ACCESS_KEY");
}

TEST_CASE("aws: DescribeInstances asks for the group's pending and running instances, page by page") {
  Options o;
  o.asg = "etcd";
  o.tag_key = "role";
  o.tag_value = "etcd";
  auto q = DescribeInstancesQuery(o, "page2");
  CHECK(q.at("Action") == "DescribeInstances");
  CHECK(q.at("Filter.1.Name") == "instance-state-name");
  CHECK(q.at("Filter.1.Value.1") == "pending");
  CHECK(q.at("Filter.1.Value.2") == "running");
  CHECK(q.at("Filter.2.Name") == "tag:aws:autoscaling:groupName");
  CHECK(q.at("Filter.2.Value.1") == "etcd");
  CHECK(q.at("Filter.3.Name") == "tag:role");
  CHECK(q.at("NextToken") == "page2");
  CHECK(q.at("MaxResults") == "1000");
  o.tag_value.clear();
  CHECK(DescribeInstancesQuery(o, "").at("Filter.3.Name") == "tag-key");
  CHECK(DescribeInstancesQuery(o, "").count("NextToken") == 0);
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
  CHECK(ParseAutoScalingGroup(groups, "other").status().IsNotFound());

  auto ec2 = ParseError("<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not "
                        "authorized</Message></Error></Errors><RequestID>x</RequestID></Response>");
  CHECK(ec2.code == "UnauthorizedOperation");
  auto asg = ParseError("<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded"
                        "</Message></Error></ErrorResponse>");
  CHECK(asg.code == "Throttling");
  CHECK(ParseError("not xml").code.empty());

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

}  // namespace quorate::aws
