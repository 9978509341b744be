// What differs between the etcd versions quorate runs (3.4 to 3.7), in one table: the spelling of
// etcd's flags and how strict MemberAdd is. The rest of quorate asks here and never compares
// version numbers itself; the upgrade rules over versions are the planner's (core/etcd_version.h),
// and a peer's GET /version is read by the peer probe (peer_probe.h).
#pragma once

#include <string>
#include <vector>

#include "core/etcd_version.h"
#include "quorate/status.h"

namespace quorate {

// What quorate acts on. Health is not here: quorate asks etcd's gRPC status (upkeep), and the
// manifests probe etcd's /health, which every version from 3.4 to 3.7 serves (/livez and /readyz
// only from 3.4.29 and 3.5.11, CHANGELOG-3.4 #17128, CHANGELOG-3.5 #17039).
struct EtcdFeatures {
  // MemberAdd (learners too) is refused unless the leader has been connected to every voter for
  // 5 s, so one voter that is down blocks every add until it is removed. Relaxed to "quorum still
  // holds" in 3.5.30 (#21669) and 3.6.11 (#21667); never in 3.4.
  bool member_add_needs_every_voter = false;
};

EtcdFeatures FeaturesOf(const EtcdVersion& version);

// The words of an etcd command line (flags quorate passes, and the operator's after `--`) in the
// spelling `version` accepts. 3.6 renamed every --experimental-* flag (deprecated there, removed in
// 3.7): a value flag lost its prefix (--experimental-compaction-batch-limit →
// --compaction-batch-limit), a boolean became a feature gate (--experimental-initial-corrupt-check
// → --feature-gates=InitialCorruptCheck=true). Before 3.6 the new spellings become the old ones
// again, so one manifest serves every version during an upgrade. Words it does not know pass as
// they are; gates it cannot spell as 3.5 flags stay a --feature-gates, for etcd to refuse.
std::vector<std::string> SpellEtcdArgs(const std::vector<std::string>& args, const EtcdVersion& version);

// The version line of `etcd --version` ("etcd Version: 3.5.30"), checked; `source` names the binary.
Result<EtcdVersion> ParseEtcdVersionOutput(const std::string& output, const std::string& source);

}  // namespace quorate
