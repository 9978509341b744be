// The version of the etcd binary quorate will run, from `etcd --version`: the fact the upgrade
// rules (docs/DESIGN.md §4 rule 6) and the flag spellings (etcd/etcd_version.h) start from.
#pragma once

#include <chrono>
#include <optional>
#include <vector>
#include <string>

#include "core/config.h"
#include "core/etcd_version.h"
#include "quorate/member.h"
#include "quorate/tls.h"
#include "quorate/status.h"

namespace quorate {

// Runs `<etcd_path> --version` without a shell and reads at most 4 KiB of its output within 5 s.
// NotFound when it cannot be started; InvalidArgument when it does not say a version as etcd does.
// The answer is kept for the file it came from (path, inode, size, modification time): asked again,
// the same file is not run again, a replaced one is; asked while an ask of the same file is under
// way (on another thread), it waits for that one's answer.
Result<EtcdVersion> EtcdBinaryVersion(const std::string& etcd_path);

// GET /version of each member, on its peer URLs (the first that answers as etcd), all at once within
// `timeout`; nullopt for a member where none does. In the members' order.
std::vector<std::optional<VersionAnswer>> AskVersions(const std::vector<Member>& members, const TlsFiles& peer_tls,
                                                      std::chrono::milliseconds timeout);

// The cluster's version as `quorate version` shows it: the highest GET /version of the members in
// this node's member bucket (--state-dir) says, each asked on its peer URLs within 1 s, else the one
// the bucket recorded. `source` says where it came from, or why it is unknown.
struct ClusterVersionSeen {
  std::optional<EtcdVersion> version;
  std::string source;
};
ClusterVersionSeen SeeClusterVersion(const Config& config);

}  // namespace quorate
