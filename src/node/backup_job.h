// Backups as jobs: one now (`quorate backup save`, a backup before a membership change), and the
// schedule of `quorate run`, where only the quorate beside the current leader takes them, so N
// nodes do not write N copies. Retention runs after each scheduled backup. The clock, the etcd
// client factory and the snapshot stream are seams, so the schedule is tested in fake time.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backup/backup.h"
#include "backup/retention.h"
#include "core/config.h"
#include "etcd/etcd_client.h"
#include "quorate/clock.h"
#include "quorate/vfs.h"

namespace quorate {

struct BackupSettings {
  std::string store_url;
  std::string cluster;
  Compression compression = Compression::kGzip;
  std::vector<BackupKey> keys;  // keys[0] encrypts; empty: backups are not encrypted
  RetentionPolicy retention;
  std::chrono::milliseconds timeout{};
};

// From the options: InvalidArgument for a missing --backup-to or an unreadable or malformed key file.
Result<BackupSettings> BackupSettingsOf(const Config& config);

// The snapshot of one endpoint, streamed: StreamSnapshot with the client's TLS and the settings' timeout.
using SnapshotSourceFactory = std::function<SnapshotSource(const std::string& endpoint)>;
SnapshotSourceFactory RealSnapshotSources(const TlsFiles& tls, std::chrono::milliseconds timeout);

// One backup of the cluster `client` reaches: from the first of `endpoints` whose member knows a
// leader, with the member count of its MemberList. `before_commit` as SaveOptions has it.
Result<BackupMeta> TakeBackup(const BackupSettings& settings, Vfs& store, EtcdClient& client,
                              const std::vector<std::string>& endpoints, const SnapshotSourceFactory& sources,
                              SystemTime now, std::function<Status()> before_commit = {});

// The backup quorate takes before a membership change it makes (rule 4's replace, rule 9's removal,
// `member remove`) when --backup-to is given: the member set and data as they were, should the
// change go wrong. nullopt without --backup-to. Bad backup options are InvalidArgument. The store's
// calls end by `deadline` (the change's own), so a store that is down holds the change that long at most.
Result<std::optional<BackupMeta>> BackupBeforeChange(const Config& config, EtcdClient& client,
                                                     const std::vector<std::string>& endpoints,
                                                     const SnapshotSourceFactory& sources,
                                                     Clock::TimePoint deadline = Clock::kNever);

// Removes the backups the retention policy no longer keeps, among quorate's own (those with its
// metadata: another tool's backups in a shared store are never removed); returns them.
Result<std::vector<BackupMeta>> PruneBackups(const BackupSettings& settings, Vfs& store, SystemTime now);

// Removes what saves cut short left behind (RemoveAbandonedBackups) that began longer ago than
// twice the backup timeout, and at least an hour: a save still running is never among them.
Result<AbandonedBackups> SweepAbandonedBackups(const BackupSettings& settings, Vfs& store, SystemTime now);

struct BackupScheduleOptions {
  Clock* clock = nullptr;  // null: the real one
  // Wall time for the backups' names and retention; null: the system clock.
  std::function<SystemTime()> wall_clock;
  EtcdClientFactory etcd_clients;  // null: MakeEtcdClient
  SnapshotSourceFactory sources;   // null: RealSnapshotSources
};

// `quorate run`'s schedule: every interval, when this member is the leader, one backup of its own
// etcd, then retention. Checked again before the commit: a leader that lost its place mid-way drops
// its backup, and the next leader takes the next one.
class BackupSchedule {
 public:
  BackupSchedule(const Config& config, BackupSettings settings, std::unique_ptr<Vfs> store,
                 BackupScheduleOptions options = {});
  ~BackupSchedule();
  BackupSchedule(const BackupSchedule&) = delete;
  BackupSchedule& operator=(const BackupSchedule&) = delete;

  // This member's client URLs, where its etcd answers.
  void SetSelf(const std::vector<std::string>& client_urls);
  // Where each round takes the TLS files its client uses; unset: the ones given to quorate. A CA
  // rotation of the client side (DESIGN §14) changes them from phase to phase: etcd refuses the
  // operator's leaf once it trusts the new CA only.
  void SetClientTls(std::function<TlsFiles()> client_tls);
  // One round: a backup and retention when this member leads; OK (and nothing done) when it does not.
  // Either way the newest backup in the store is looked up, and logged when older than twice the
  // schedule: a follower sees the leader's backups stop too.
  Result<std::optional<BackupMeta>> Tick();
  // The quorate_backup_* families for /metrics: the last good backup this node took (time, size,
  // duration), failures by reason, the newest backup in the store and whether it is stale.
  std::string RenderMetrics() const;
  void Start();
  void Stop();

 private:
  Result<bool> Leads(EtcdClient& client, const std::string& endpoint);
  Result<std::optional<BackupMeta>> Round();
  void LookAtStore();

  struct Stats {
    std::optional<SystemTime> last_success;
    uint64_t last_stored_bytes = 0;
    double last_duration_seconds = 0;
    std::map<std::string, long long> failures;  // by reason
    std::optional<SystemTime> newest_in_store;
    bool stale = false;
  };

  const Config& config_;
  BackupSettings settings_;
  std::unique_ptr<Vfs> store_;
  BackupScheduleOptions options_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::vector<std::string> endpoints_;
  std::function<TlsFiles()> client_tls_;
  Stats stats_;
  int stop_fd_ = -1;
  std::thread thread_;
};

}  // namespace quorate
