// The `s3` provider: the rendezvous in an S3 bucket (or any S3-compatible store), through the s3://
// store (its keys, in the table below, are that store's URL parameters) with AWS's credential chain.
#include <fmt/format.h>

#include "quorate/limits.h"
#include "quorate/provider.h"
#include "quorate/rendezvous.h"
#include "quorate/vfs.h"

namespace quorate {
namespace {

// Passed through to the store URL as they are: the S3 store checks them and names the bad one.
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
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  auto vfs = OpenVfs(url, params.context().deadline);
  if (!vfs.ok()) return vfs.status().Prefixed("--discovery provider=s3");
  return MakeRendezvousProvider("s3", std::move(*vfs), std::move(*config));
}

const RegisterProvider kRegistration(
    "s3",
    {{.name = "bucket", .help = "the bucket", .required = true},
     {.name = "prefix", .help = "the key prefix of the rendezvous's records"},
     {.name = "endpoint", .help = "a non-AWS store's base URL; default https://s3.REGION.amazonaws.com",
      .values = "a base URL"},
     {.name = "region", .help = "the bucket's region; else AWS_REGION, AWS_DEFAULT_REGION, else us-east-1"},
     {.name = "path_style", .help = "endpoint/bucket/key rather than bucket.endpoint/key; default with an endpoint",
      .choices = {"true", "false"}},
     {.name = "conditional_put", .help = "the store honours If-None-Match: * (an exclusive create)",
      .fallback = "false", .choices = {"true", "false"}},
     {.name = "timeout", .help = "the longest one store call takes, retries included", .fallback = "5s",
      .values = "a duration"},
     {.name = "page_size", .help = "the keys a listing page asks for (max-keys)", .fallback = "1000", .lo = 1,
      .hi = 1000, .values = "a page size"},
     {.name = "token", .help = "the rendezvous's name; default --initial-cluster-token, else etcd-cluster"},
     {.name = "size", .help = "the members sealed; default --cluster-size", .lo = 1, .hi = kMaxClusterSize,
      .values = "a cluster size"}},
    CreateS3);

}  // namespace
}  // namespace quorate
