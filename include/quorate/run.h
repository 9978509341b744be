// `quorate run` (DESIGN §5): init, then etcd as a supervised child, with the agent and the status
// endpoints serving for as long as it runs, and the member's own upkeep (learner promotion, peer
// URL updates) done in the background.
#pragma once

#include <string>
#include <vector>

#include "quorate/config.h"
#include "quorate/status.h"

namespace quorate {

// `extra_etcd_args` are the words after `--`, appended to etcd's command line.
Status RunNode(const Config& config, const std::vector<std::string>& extra_etcd_args);

}  // namespace quorate
