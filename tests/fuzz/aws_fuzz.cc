// EC2's, Auto Scaling's and STS's XML answers and IMDS's credentials JSON, region and instance ID as any server or proxy on
// the way might send them: parsed without crashing, credentials whole or refused, and every member
// made of an instance has a name and URLs etcd accepts.
#include "../../discovery/aws/aws.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorate;
  const std::string xml(fuzz::Text(data, size));
  cloud::ParseAwsError(xml);
  for (const auto& creds : {cloud::ParseAssumeRoleWithWebIdentity(xml), cloud::ParseCredentialsJson(xml, "fuzz")}) {
    fuzz::CheckMessage(creds.status());
    if (creds.ok() && (creds->access_key.empty() || creds->secret.empty())) std::abort();
  }
  auto own = aws::ParseAutoScalingInstanceGroup(xml, "i-0a1");
  fuzz::CheckMessage(own.status());
  if (own.ok() && own->empty()) std::abort();
  fuzz::CheckMessage(cloud::CheckAwsRegion(xml).status());
  fuzz::CheckMessage(aws::CheckInstanceId(xml).status());
  auto group = aws::ParseAutoScalingGroup(xml, "etcd");
  fuzz::CheckMessage(group.status());
  if (group.ok() && group->desired < 0) std::abort();
  auto page = aws::ParseDescribeInstances(xml);
  fuzz::CheckMessage(page.status());
  if (!page.ok()) return 0;
  for (const char* addr : {"private_v4", "public_v4", "public_v6", "private_dns"}) {
    aws::Options o;
    o.addr_type = addr;
    o.name_tag = "Name";
    for (const auto& instance : page->instances) {
      auto member = aws::MemberOf(o, instance);
      fuzz::CheckMessage(member.status());
      if (!member.ok() || !*member) continue;
      if (!CheckMemberName((*member)->name, "fuzz").ok() || !ParseUrl((*member)->peer_urls[0]).ok() ||
          !ParseUrl((*member)->client_urls[0]).ok()) {
        std::abort();
      }
    }
  }
  return 0;
}
