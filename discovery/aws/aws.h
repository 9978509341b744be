// The aws provider's logic without the network: its keys, the EC2 and Auto Scaling Query API requests
// it makes, and how their XML answers become members, checked. The provider ("aws" in the registry)
// sends these requests signed with SigV4; the unit tests and the fuzz target run the parsers on text.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/cloud/aws_credentials.h"
#include "quorate/clock.h"
#include "quorate/member.h"
#include "quorate/provider.h"
#include "quorate/status.h"

namespace quorate::aws {

// go-discover's keys, plus the Auto Scaling group, the member name and the etcd ports.
struct Options {
  std::string region;  // empty: the instance's own, from IMDS at the first Discover
  std::string tag_key, tag_value;
  std::string addr_type = "private_v4";  // private_v4, public_v4, public_v6, private_dns
  // The keys given (access_key_id...); empty: AWS's chain (src/net/cloud/aws_credentials.h).
  std::string access_key, secret, session_token;
  // The credentials the calls are signed with, the chain's; TakeOptions sets it.
  std::shared_ptr<cloud::AwsCredentialChain> credentials;
  std::string endpoint;  // the endpoint key: one base URL for every API; empty: AWS's own per region
  // Base URLs, set with the region unless given (ec2_endpoint=, autoscaling_endpoint=, sts_endpoint=).
  std::string ec2_endpoint, autoscaling_endpoint, sts_endpoint;
  bool ec2_given = false, autoscaling_given = false, sts_given = false;
  // An Auto Scaling group's name; "auto": the group of the instance quorate runs on (IMDS's
  // instance-id, then DescribeAutoScalingInstances); empty: tags only.
  std::string asg;
  std::string name_tag;                            // the tag naming the member; empty: the instance ID
  std::string scheme = "http";
  int peer_port = 2380;
  int client_port = 2379;
  int page_size = 1000;  // DescribeInstances' MaxResults, 5-1000
};

// Sets the region and the API endpoints that follow from it (or the endpoint keys'), in the region's
// partition (amazonaws.com.cn in China).
void SetRegion(Options& o, const std::string& region);

// Reads the keys; for what they leave out, the environment as AWS's SDKs read it (AWS_REGION,
// AWS_DEFAULT_REGION, and the credential chain's: AWS_ACCESS_KEY_ID, AWS_PROFILE...).
// InvalidArgument naming the key or variable at fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// The instance's own ID as IMDS serves it, checked: Unavailable for what AWS would never hand out.
Result<std::string> CheckInstanceId(const std::string& text);

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
  // The group's own instances that count (GroupCounts), as the group lists them.
  std::vector<std::string> instance_ids;
};
// The group named `name` in a DescribeAutoScalingGroups answer; NotFound when it lists no such group.
// Unavailable for an instance ID that is not one.
Result<Group> ParseAutoScalingGroup(const std::string& xml, const std::string& name);

// The group a DescribeAutoScalingInstances answer puts `instance_id` in; NotFound when the instance
// is in none.
Result<std::string> ParseAutoScalingInstanceGroup(const std::string& xml, const std::string& instance_id);

// Pending and running instances are the group's (one launched with the others has its address
// already); stopping, stopped, shutting-down and terminated ones are not.
bool Counts(const std::string& state);
// As the group sees its instances: InService and Pending ones (Pending:Wait and Pending:Proceed, in
// a lifecycle hook, too) count; Standby, Terminating, Detaching, Detached, Quarantined and warm-pool
// (Warmed:*) ones do not, whatever EC2 says of them.
bool GroupCounts(const std::string& lifecycle_state);

// The member an instance stands for, its URLs from the address `addr_type` names; nullopt when the
// instance has no such address (yet). Unavailable for a name or address etcd would refuse.
Result<std::optional<Member>> MemberOf(const Options& o, const Instance& instance);

// The Query API parameters of one DescribeInstances page: the states that count, the group's own
// instances that count (`group_ids`, when a group is named) and the operator's tag, as filters.
std::map<std::string, std::string> DescribeInstancesQuery(const Options& o, const std::vector<std::string>* group_ids,
                                                          const std::string& next_token);

}  // namespace quorate::aws
