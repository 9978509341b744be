// `quorate run` (docs/DESIGN.md §5): init, then etcd as a supervised child, with the agent and the status
// endpoints serving for as long as it runs, and the member's own upkeep (learner promotion, peer
// URL updates) done in the background; or that upkeep alone, beside an etcd started by others.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "quorate/status.h"

namespace quorate {

// `extra_etcd_args` are the words after `--`, appended to etcd's command line.
Status RunNode(const Config& config, const std::vector<std::string>& extra_etcd_args);

// `quorate upkeep`: the member's upkeep and the status endpoints beside an etcd that quorate does
// not run (a plain etcd container after `quorate init`), until SIGTERM or SIGINT. The member is
// --name in the bucket init wrote to --state-dir.
Status UpkeepNode(const Config& config);

}  // namespace quorate
