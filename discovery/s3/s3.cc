// The `s3` provider: the rendezvous in an S3 bucket (or any S3-compatible store). Keys: `bucket`,
// `prefix`, `endpoint` (for a non-AWS store), `region`, `conditional_put` (true where the store
// honours If-None-Match: *), and the shared `token` and `size`. Credentials come from the AWS_*
// environment variables.
#include <fmt/format.h>

#include "quorate/provider.h"
#include "quorate/rendezvous.h"
#include "quorate/s3.h"

namespace quorate {
namespace {

Result<std::unique_ptr<DiscoveryProvider>> CreateS3(ProviderParams& params) {
  auto bucket = params.TakeRequired("bucket");
  if (!bucket.ok()) return bucket.status();
  std::string prefix = params.Take("prefix").value_or("");
  std::string url = fmt::format("s3://{}/{}?", *bucket, prefix);
  for (const char* key : {"endpoint", "region", "conditional_put", "timeout", "page_size"}) {
    if (auto value = params.Take(key)) url += fmt::format("{}={}&", key, *value);
  }
  url.pop_back();
  auto config = TakeRendezvousConfig(params);
  if (!config.ok()) return config.status();
  if (Status s = params.CheckAllTaken({"bucket", "prefix", "endpoint", "region", "conditional_put", "timeout", "page_size",
                                       "token", "size"});
      !s.ok()) {
    return s;
  }
  auto vfs = OpenS3Vfs(url);
  if (!vfs.ok()) return vfs.status().Prefixed("--discovery provider=s3");
  return MakeRendezvousProvider("s3", std::move(*vfs), std::move(*config));
}

const RegisterProvider kRegistration("s3", CreateS3);

}  // namespace
}  // namespace quorate
