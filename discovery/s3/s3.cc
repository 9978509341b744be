// The `s3` provider: the rendezvous in an S3 bucket (or any S3-compatible store). Keys: `bucket`,
// `prefix`, `endpoint` (for a non-AWS store), `region`, `path_style`, `conditional_put` (true where
// the store honours If-None-Match: *), `timeout`, `page_size` (see OpenS3Vfs), and the shared `token`
// and `size`. Credentials come from the AWS_* environment variables.
#include "quorate/s3.h"

#include <fmt/format.h>

#include "quorate/provider.h"
#include "quorate/rendezvous.h"

namespace quorate {
namespace {

// Passed through to the store URL as they are: OpenS3Vfs checks them and names the bad one.
const std::vector<std::string> kStoreKeys = {"endpoint",        "region",  "path_style",
                                             "conditional_put", "timeout", "page_size"};

Result<std::unique_ptr<DiscoveryProvider>> CreateS3(ProviderParams& params) {
  auto bucket = params.TakeRequired("bucket");
  if (!bucket.ok()) return bucket.status();
  std::string url = fmt::format("s3://{}/{}", *bucket, params.Take("prefix").value_or(""));
  char separator = '?';
  for (const auto& key : kStoreKeys) {
    if (auto value = params.Take(key)) {
      url += fmt::format("{}{}={}", separator, key, *value);
      separator = '&';
    }
  }
  auto config = TakeRendezvousConfig(params);
  if (!config.ok()) return config.status();
  std::vector<std::string> known = {"bucket", "prefix", "token", "size"};
  known.insert(known.end(), kStoreKeys.begin(), kStoreKeys.end());
  if (Status s = params.CheckAllTaken(known); !s.ok()) return s;
  auto vfs = OpenS3Vfs(url, params.context().deadline);
  if (!vfs.ok()) return vfs.status().Prefixed("--discovery provider=s3");
  return MakeRendezvousProvider("s3", std::move(*vfs), std::move(*config));
}

const RegisterProvider kRegistration("s3", CreateS3);

}  // namespace
}  // namespace quorate
