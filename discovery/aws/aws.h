// The aws provider's logic without the network: its keys, the EC2 and Auto Scaling Query API requests
// it makes, and how their XML answers become members, checked. The provider ("aws" in the registry)
// sends these requests signed with SigV4; the unit tests and the fuzz target run the parsers on text.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::aws {

// go-discover's keys, plus the Auto Scaling group, the member name and the etcd ports.
struct Options {
  std::string region;
  std::string tag_key, tag_value;
  std::string addr_type = "private_v4";  // private_v4, public_v4, public_v6, private_dns
  std::string access_key, secret, session_token;
  std::string ec2_endpoint, autoscaling_endpoint;  // base URLs, scheme://host[:port]
  std::string asg;                                 // an Auto Scaling group's name; empty: tags only
  std::string name_tag;                            // the tag naming the member; empty: the instance ID
  std::string scheme = "http";
  int peer_port = 2380;
  int client_port = 2379;
  int page_size = 1000;  // DescribeInstances' MaxResults, 5-1000
};

// Reads the keys; for what they leave out, the environment as AWS's SDKs read it (AWS_REGION,
// AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). InvalidArgument
// naming the key or variable at fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// One instance of a DescribeInstances answer, as far as the provider reads it.
struct Instance {
  std::string id;
  std::string state;  // pending, running, shutting-down, terminated, stopping, stopped
  std::string private_ip, public_ip, private_dns, ipv6;
  std::map<std::string, std::string> tags;
};
struct InstancePage {
  std::vector<Instance> instances;
  std::string next_token;  // empty on the last page
};
// Unavailable when the answer is not a DescribeInstancesResponse or an instance lacks its ID.
Result<InstancePage> ParseDescribeInstances(const std::string& xml);

struct Group {
  int desired = 0;
  std::vector<std::string> instance_ids;
};
// The group named `name` in a DescribeAutoScalingGroups answer; NotFound when it lists no such group.
Result<Group> ParseAutoScalingGroup(const std::string& xml, const std::string& name);

// An error answer of either API (EC2's <Response><Errors><Error>, Auto Scaling's <ErrorResponse>).
struct ApiError {
  std::string code, message;
};
ApiError ParseError(const std::string& xml);

// Pending and running instances are the group's (one launched with the others has its address
// already); stopping, stopped, shutting-down and terminated ones are not.
bool Counts(const std::string& state);

// The member an instance stands for, its URLs from the address `addr_type` names; nullopt when the
// instance has no such address (yet). Unavailable for a name or address etcd would refuse.
Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance);

// The Query API parameters of one DescribeInstances page: the group's tag, the operator's tag and
// the states that count, as filters.
std::map<std::string, std::string> DescribeInstancesQuery(const Options& o, const std::string& next_token);

}  // namespace quorate::aws
