// The `file` provider: a rendezvous in a shared directory (NFS, hostPath), the embedded default
// that needs no server. The directory's exclusive create (link(2)) decides who seals; keys:
// `path` (the directory), and the shared `token` and `size`. The CLI passes its --name, peer and
// client URLs, --initial-cluster-token and --cluster-size through ProviderContext.
#include "quorate/limits.h"
#include "quorate/provider.h"
#include "quorate/rendezvous.h"
#include "quorate/vfs.h"

namespace quorate {
namespace {

Result<std::unique_ptr<DiscoveryProvider>> CreateFile(ProviderParams& params) {
  auto path = params.TakeRequired("path");
  if (!path.ok()) return path.status();
  auto config = TakeRendezvousConfig(params);
  if (!config.ok()) return config.status();
  if (Status s = params.CheckAllTaken(); !s.ok()) return s;
  if (path->rfind("s3://", 0) == 0) {
    return Status::InvalidArgument("--discovery: provider 'file' has an s3:// path: use provider=s3 for a bucket");
  }
  auto vfs = OpenVfs(*path);
  if (!vfs.ok()) return vfs.status().Prefixed("--discovery path");
  return MakeRendezvousProvider("file", std::move(*vfs), std::move(*config));
}

const RegisterProvider kRegistration(
    "file",
    {{.name = "path", .help = "the shared directory (NFS, hostPath)", .required = true, .values = "a directory"},
     {.name = "token", .help = "the rendezvous's name; default --initial-cluster-token, else etcd-cluster"},
     {.name = "size", .help = "the members sealed; default --cluster-size", .lo = 1, .hi = kMaxClusterSize,
      .values = "a cluster size"}},
    CreateFile);

}  // namespace
}  // namespace quorate
