// The way back from a lost majority (docs/DESIGN.md §4 rules 7 and 8), made safe:
//  - `quorate run --restore-from URL` with a new --initial-cluster-token on every node: the backup
//    is read whole and checked (hash, key) before anything moves; member/ is moved aside, never
//    deleted; etcd's own `snapshot restore` (etcdutl beside the etcd binary, else etcdctl, as 3.4
//    has) writes the new member; a marker, written before the first step and again after the last,
//    records the restore, so a node killed at any step and started again with the same flags
//    converges, and one already restored just starts;
//  - `quorate recover --from-member NAME` on the survivor: etcd (the --etcd binary) replays the
//    survivor's WAL on a private copy of its data dir, alone and on loopback, and that etcd's
//    snapshot becomes a backup in --backup-to, which the nodes then restore from.
// Both refuse while the old cluster still has a live quorum, unless --force.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "backup/backup.h"
#include "core/config.h"
#include "etcd/etcd_client.h"
#include "node/peers.h"
#include "quorate/clock.h"
#include "quorate/status.h"
#include "quorate/vfs.h"

namespace quorate {

// What a restore does to the world beyond its own files, each a seam so the simulator (tests/sim)
// runs the real restore against its modelled store and etcd; null means the real one.
struct RestoreSeams {
  // Discovery's waits.
  Clock* clock = nullptr;
  // Rule 7c's look for a live old quorum: the peers' GET /members, then their members' status.
  Peers* peers = nullptr;
  EtcdClientFactory etcd_clients;
  // Opens the store of --restore-from (its store URL, the backup's folder cut off); null: OpenVfs.
  std::function<Result<std::unique_ptr<Vfs>>(const std::string& store_url)> open_store;
  // etcd's own `snapshot restore`, run with these arguments (after the tool's name), its output to
  // `log_path`; null: etcdutl beside --etcd, else etcdctl, looked for before anything is written.
  std::function<Status(const std::vector<std::string>& args, const std::string& log_path)> restore_tool;
};

// Before init, when --restore-from is given. OK once this node holds the restored data and its
// member bucket (then init restarts etcd on it, rule 1); InvalidArgument for a token that is not new
// or a key that does not fit; FailedPrecondition while the old cluster has a live quorum, or for a
// backup larger than the free space; what the store or the restore tool met otherwise. Nothing is
// moved unless the backup checked out, and a failed restore removes its copies of the snapshot.
Status RestoreNode(const Config& config, RestoreSeams seams = {});

// Rule 8's etcd on the private copy of the survivor's data, its log committed to its last entry:
// serving, it has replayed every entry the copy's WAL holds as committed. The backup is its
// snapshot. It is stopped when it goes; the copy is recover's to remove.
class ReplayedEtcd {
 public:
  virtual ~ReplayedEtcd() = default;
  virtual Result<SnapshotHeader> Snapshot(const SnapshotSink& sink) = 0;
};

// What recover reaches beyond its own files; each null one is the real thing.
struct RecoverSeams {
  // The look for a live old quorum (as rule 7c's): the peers' GET /members, then their members' status.
  Peers* peers = nullptr;
  EtcdClientFactory etcd_clients;
  // Opens --backup-to's store; null: OpenVfs.
  std::function<Result<std::unique_ptr<Vfs>>(const std::string& store_url)> open_store;
  // Stops an etcd still on the data dir; null: StopStrayEtcd.
  std::function<Status(const std::string& data_dir)> stop_stray_etcd;
  // etcd started on the prepared copy (<dir>/data), serving; null: the --etcd binary, looked for
  // before anything is done, with --force-new-cluster on free loopback ports.
  std::function<Result<std::unique_ptr<ReplayedEtcd>>(const std::string& dir)> replay;
  // The backup's time; null: the system clock.
  std::function<std::chrono::system_clock::time_point()> now;
};

// `quorate recover --from-member NAME` on NAME: stops a stray etcd on its data dir, refuses while
// the old cluster has a live quorum (unless --force), and stores, as a backup in --backup-to, the
// snapshot of an etcd started on a private copy of the data dir (every write its WAL holds as
// committed, at its real revision); the copy is removed whatever happens. The returned backup is
// what every node then gives --restore-from.
Result<BackupMeta> RecoverFromMember(const Config& config, RecoverSeams seams = {});

// Called with the step's name after each of the restore's file steps and renames. Unset in quorate
// itself; a test build's hook kills the process there (tests/integration/quorate_faults.cc), to show
// that a restore killed after any step converges.
using RestoreStepHook = std::function<void(std::string_view step)>;
void SetRestoreStepHookForTest(RestoreStepHook hook);

}  // namespace quorate
