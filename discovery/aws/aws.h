// The aws provider's logic without the network: its keys, the EC2 and Auto Scaling Query API requests
// it makes, and how their XML answers become members, checked. The provider ("aws" in the registry)
// sends these requests signed with SigV4; the unit tests and the fuzz target run the parsers on text.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  // Static credentials (the keys, else AWS_ACCESS_KEY_ID...); empty: fetched at run time, from a
  // web identity (web_identity_token_file and role_arn set) or else the instance role (IMDSv2).
  std::string access_key, secret, session_token;
  std::string web_identity_token_file, role_arn, role_session_name;
  std::string imds_endpoint;  // AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254:80
  std::string endpoint;  // the endpoint key: one base URL for every API; empty: AWS's own per region
  std::string ec2_endpoint, autoscaling_endpoint, sts_endpoint;  // base URLs, set with the region
  // An Auto Scaling group's name; "auto": the group of the instance quorate runs on (IMDS's
  // instance-id, then DescribeAutoScalingInstances); empty: tags only.
  std::string asg;
  std::string name_tag;                            // the tag naming the member; empty: the instance ID
  std::string scheme = "http";
  int peer_port = 2380;
  int client_port = 2379;
  int page_size = 1000;  // DescribeInstances' MaxResults, 5-1000
};

// Sets the region and the API endpoints that follow from it (or the endpoint key's).
void SetRegion(Options& o, const std::string& region);

// Reads the keys; for what they leave out, the environment as AWS's SDKs read it (AWS_REGION,
// AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME, AWS_EC2_METADATA_SERVICE_ENDPOINT).
// InvalidArgument naming the key or variable at fault and the fix.
Result<Options> TakeOptions(ProviderParams& params);

// IMDSv2: a session token (PUT /latest/api/token), then each GET of `paths` carrying it; the answers
// in order. Unavailable naming the path and what IMDS answered.
Result<std::vector<std::string>> ImdsGet(const std::string& endpoint, const std::vector<std::string>& paths,
                                         Clock::TimePoint deadline);
// The instance's own region and ID as IMDS serves them, checked: Unavailable for what AWS would
// never hand out.
Result<std::string> CheckRegion(const std::string& text);
Result<std::string> CheckInstanceId(const std::string& text);

// Credentials fetched at run time, and until when they hold.
struct Credentials {
  std::string access_key, secret, session_token;
  std::chrono::system_clock::time_point expiration;
};
// STS's AssumeRoleWithWebIdentityResponse (XML); Unavailable when it is not one or lacks a part.
Result<Credentials> ParseAssumeRoleWithWebIdentity(const std::string& xml);
// The instance role's credentials as IMDS serves them (JSON with AccessKeyId, SecretAccessKey,
// Token, Expiration); Unavailable when it is not that.
Result<Credentials> ParseImdsCredentials(const std::string& json);
// The web identity exchanged at STS (AssumeRoleWithWebIdentity, unsigned: the token is the proof),
// or else the instance role from IMDSv2 (a PUT for a session token, then GETs carrying it).
// Unavailable naming the call and what it answered.
Result<Credentials> FetchCredentials(const Options& o, Clock::TimePoint deadline);

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

// The group a DescribeAutoScalingInstances answer puts `instance_id` in; NotFound when the instance
// is in none.
Result<std::string> ParseAutoScalingInstanceGroup(const std::string& xml, const std::string& instance_id);

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
