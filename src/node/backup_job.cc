#include "node/backup_job.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "quorate/log.h"
#include "status/status_server.h"
#include "quorate/text.h"

namespace quorate {

Result<BackupSettings> BackupSettingsOf(const Config& config) {
  if (config.backup_to.empty()) {
    return Status::InvalidArgument(std::string("--backup-to is required: the backup store, ") + kStoreForms);
  }
  BackupSettings s;
  s.store_url = config.backup_to;
  s.cluster = config.backup_cluster;
  auto compression = ParseCompression(config.backup_compression);
  if (!compression.ok()) return compression.status();
  s.compression = *compression;
  auto keys = LoadBackupKeys(config.backup_key_files);
  if (!keys.ok()) return keys.status();
  s.keys = std::move(*keys);
  s.retention.hourly = std::chrono::hours(24 * config.backup_keep_hourly_days);
  s.retention.daily = std::chrono::hours(24 * config.backup_keep_daily_days);
  s.timeout = config.backup_timeout;
  return s;
}

SnapshotSourceFactory RealSnapshotSources(const TlsFiles& tls, std::chrono::milliseconds timeout) {
  return [tls, timeout](const std::string& endpoint) -> SnapshotSource {
    return [tls, timeout, endpoint](const SnapshotSink& sink) {
      return StreamSnapshot({{endpoint}, tls, timeout}, endpoint, sink);
    };
  };
}

Result<BackupMeta> TakeBackup(const BackupSettings& settings, Vfs& store, EtcdClient& client,
                              const std::vector<std::string>& endpoints, const SnapshotSourceFactory& sources,
                              SystemTime now, std::function<Status()> before_commit) {
  auto listing = client.MemberList();
  if (!listing.ok()) return listing.status();
  std::vector<std::string> why;
  for (const std::string& endpoint : endpoints) {
    auto status = client.EndpointStatusOf(endpoint);
    if (!status.ok()) {
      why.push_back(status.status().message());
      continue;
    }
    if (status->leader == 0) {
      why.push_back(endpoint + ": knows no leader");
      continue;
    }
    SaveOptions options;
    options.cluster = settings.cluster;
    options.compression = settings.compression;
    if (!settings.keys.empty()) options.key = settings.keys.front();
    options.member_count = static_cast<int>(listing->members.size());
    options.now = now;
    options.before_commit = std::move(before_commit);
    return SaveBackup(store, settings.store_url, sources(endpoint), options);
  }
  return Status::Unavailable(
      fmt::format("no endpoint to take a snapshot from: {}", fmt::join(why, "; ")));
}

Result<std::optional<BackupMeta>> BackupBeforeChange(const Config& config, EtcdClient& client,
                                                     const std::vector<std::string>& endpoints,
                                                     const SnapshotSourceFactory& sources, Clock::TimePoint deadline) {
  if (config.backup_to.empty()) return std::optional<BackupMeta>();
  auto settings = BackupSettingsOf(config);
  if (!settings.ok()) return settings.status();
  auto store = OpenVfs(settings->store_url, std::min(RealClock().Now() + settings->timeout, deadline));
  if (!store.ok()) return store.status().Prefixed("--backup-to");
  auto meta = TakeBackup(*settings, **store, client, endpoints, sources, std::chrono::system_clock::now());
  if (!meta.ok()) return meta.status();
  return std::optional<BackupMeta>(std::move(*meta));
}

Result<std::vector<BackupMeta>> PruneBackups(const BackupSettings& settings, Vfs& store, SystemTime now) {
  auto listed = ListBackups(store, settings.store_url, settings.cluster);
  if (!listed.ok()) return listed.status();
  // Only quorate's own: in a store shared with etcd-manager, its backups are its retention's to keep.
  std::vector<BackupMeta> ours;
  std::copy_if(listed->begin(), listed->end(), std::back_inserter(ours), [](const BackupMeta& b) { return b.quorate; });
  std::vector<SystemTime> created;
  for (const BackupMeta& b : ours) created.push_back(b.created);
  std::vector<BackupMeta> removed;
  for (size_t i : BackupsToRemove(created, now, settings.retention)) {
    if (Status s = RemoveBackup(store, ours[i]); !s.ok()) return s;
    removed.push_back(ours[i]);
  }
  return removed;
}

Result<AbandonedBackups> SweepAbandonedBackups(const BackupSettings& settings, Vfs& store, SystemTime now) {
  const auto age = std::max<std::chrono::milliseconds>(2 * settings.timeout, std::chrono::hours(1));
  return RemoveAbandonedBackups(store, settings.cluster, now - age);
}

BackupSchedule::BackupSchedule(const Config& config, BackupSettings settings, std::unique_ptr<Vfs> store,
                               BackupScheduleOptions options)
    : config_(config),
      settings_(std::move(settings)),
      store_(std::move(store)),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : RealClock()) {
  if (!options_.wall_clock) options_.wall_clock = [] { return std::chrono::system_clock::now(); };
  if (!options_.etcd_clients) options_.etcd_clients = MakeEtcdClient;
}

BackupSchedule::~BackupSchedule() { Stop(); }

void BackupSchedule::SetSelf(const std::vector<std::string>& client_urls) {
  std::lock_guard lock(mu_);
  endpoints_ = client_urls;
}

void BackupSchedule::SetClientTls(std::function<TlsFiles()> client_tls) {
  std::lock_guard lock(mu_);
  client_tls_ = std::move(client_tls);
}

Result<bool> BackupSchedule::Leads(EtcdClient& client, const std::string& endpoint) {
  auto status = client.EndpointStatusOf(endpoint);
  if (!status.ok()) return status.status();
  return status->leader != 0 && status->leader == status->member_id;
}

namespace {

// The reason label of a failed round: what kind of trouble, never the message (unbounded labels).
const char* FailureReason(const Status& s) {
  switch (s.code()) {
    case Status::Code::kUnavailable:
    case Status::Code::kDeadlineExceeded:
      return "unavailable";
    case Status::Code::kDataLoss:
      return "damaged_snapshot";
    case Status::Code::kFailedPrecondition:
      return "lost_leadership";
    case Status::Code::kInvalidArgument:
      return "store_refused";
    default:
      return "other";
  }
}

double Seconds(SystemTime t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

}  // namespace

Result<std::optional<BackupMeta>> BackupSchedule::Tick() {
  const Clock::TimePoint start = clock_.Now();
  auto round = Round();
  {
    std::lock_guard lock(mu_);
    if (!round.ok()) {
      ++stats_.failures[FailureReason(round.status())];
    } else if (round->has_value()) {
      stats_.last_success = (*round)->created;
      stats_.last_stored_bytes = (*round)->stored_bytes;
      stats_.last_duration_seconds = std::chrono::duration<double>(clock_.Now() - start).count();
    }
  }
  LookAtStore();
  return round;
}

void BackupSchedule::LookAtStore() {
  auto backups = ListBackups(*store_, settings_.store_url, settings_.cluster);
  if (!backups.ok()) return;
  std::optional<SystemTime> newest;
  if (!backups->empty()) newest = backups->back().created;
  const auto now = options_.wall_clock();
  const bool stale = config_.backup_schedule.count() > 0 &&
                     (!newest || now - *newest > 2 * config_.backup_schedule);
  std::lock_guard lock(mu_);
  if (stale && !stats_.stale) {
    spdlog::warn("backup: the newest backup in {} is {}, older than twice --backup-schedule ({} s)",
                 settings_.store_url, newest ? BackupTimeName(*newest) : "none",
                 std::chrono::duration_cast<std::chrono::seconds>(config_.backup_schedule).count());
  }
  stats_.newest_in_store = newest;
  stats_.stale = stale;
}

std::string BackupSchedule::RenderMetrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  AppendFamily(out, "quorate_backup_last_success_timestamp_seconds", "gauge",
               "Unix time of the last backup this node took and committed; 0 when none.");
  out += fmt::format("quorate_backup_last_success_timestamp_seconds {:.3f}\n",
                     stats_.last_success ? Seconds(*stats_.last_success) : 0.0);
  AppendFamily(out, "quorate_backup_last_size_bytes", "gauge", "Bytes stored by the last good backup this node took.");
  out += fmt::format("quorate_backup_last_size_bytes {}\n", stats_.last_stored_bytes);
  AppendFamily(out, "quorate_backup_last_duration_seconds", "gauge",
               "How long the last good backup this node took lasted.");
  out += fmt::format("quorate_backup_last_duration_seconds {:.3f}\n", stats_.last_duration_seconds);
  AppendFamily(out, "quorate_backup_failures_total", "counter", "Scheduled backups that failed, by reason.");
  for (const auto& [reason, count] : stats_.failures) {
    out += fmt::format("quorate_backup_failures_total{{reason=\"{}\"}} {}\n", EscapeLabelValue(reason), count);
  }
  AppendFamily(out, "quorate_backup_newest_timestamp_seconds", "gauge",
               "Unix time of the newest backup in the store, whoever took it; 0 when none.");
  out += fmt::format("quorate_backup_newest_timestamp_seconds {:.3f}\n",
                     stats_.newest_in_store ? Seconds(*stats_.newest_in_store) : 0.0);
  AppendFamily(out, "quorate_backup_stale", "gauge", "1 when the newest backup is older than twice --backup-schedule.");
  out += fmt::format("quorate_backup_stale {}\n", stats_.stale ? 1 : 0);
  return out;
}

Result<std::optional<BackupMeta>> BackupSchedule::Round() {
  std::vector<std::string> endpoints;
  TlsFiles tls = config_.client_tls;
  {
    std::lock_guard lock(mu_);
    endpoints = endpoints_;
    if (client_tls_) tls = client_tls_();
  }
  if (endpoints.empty()) return std::optional<BackupMeta>();
  auto client = options_.etcd_clients({endpoints, tls, std::chrono::seconds(5)});
  const SnapshotSourceFactory sources = options_.sources ? options_.sources : RealSnapshotSources(tls, settings_.timeout);
  const std::string& own = endpoints.front();
  auto leads = Leads(*client, own);
  if (!leads.ok()) return leads.status();
  if (!*leads) return std::optional<BackupMeta>();
  spdlog::info("backup: this member leads: taking a snapshot of {} into {}", own, settings_.store_url);
  auto taken = TakeBackup(settings_, *store_, *client, {own}, sources, options_.wall_clock(), [&]() -> Status {
    auto still = Leads(*client, own);
    if (!still.ok()) return still.status().Prefixed("checking leadership before committing the backup");
    if (!*still) return Status::FailedPrecondition("this member lost its leadership during the backup; dropped");
    return Status::Ok();
  });
  if (!taken.ok()) return taken.status();
  spdlog::info("backup: {} taken at revision {} ({} bytes of database, {} stored)", taken->url, taken->revision,
               taken->db_bytes, taken->stored_bytes);
  auto removed = PruneBackups(settings_, *store_, options_.wall_clock());
  if (!removed.ok()) {
    spdlog::warn("backup retention: {}", removed.status().message());
  } else {
    for (const BackupMeta& b : *removed) spdlog::info("backup retention: removed {} (policy)", b.url);
  }
  auto swept = SweepAbandonedBackups(settings_, *store_, options_.wall_clock());
  if (!swept.ok()) {
    spdlog::warn("backup retention: what saves cut short left behind stays for now: {}", swept.status().message());
  } else if (!swept->folders.empty() || swept->uploads > 0) {
    spdlog::info("backup retention: removed what saves cut short left behind: {} folder(s) without metadata ({}), {} "
                 "upload(s) never committed",
                 swept->folders.size(), fmt::join(swept->folders, ", "), swept->uploads);
  }
  return std::optional<BackupMeta>(std::move(*taken));
}

void BackupSchedule::Start() {
  if (config_.backup_schedule.count() == 0) return;
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    spdlog::error("backup schedule not started: {}", Status::FromErrno(errno, "eventfd").message());
    return;
  }
  thread_ = std::thread([this] {
    while (true) {
      pollfd stop{stop_fd_, POLLIN, 0};
      auto woken = clock_.Poll(std::span<pollfd>(&stop, 1), clock_.Now() + config_.backup_schedule);
      if (!woken.ok() || *woken > 0) return;
      auto round = Tick();
      if (!round.ok()) spdlog::warn("backup: none this round: {}", round.status().message());
    }
  });
}

void BackupSchedule::Stop() {
  if (stop_fd_ < 0) return;
  uint64_t one = 1;
  (void)::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
  stop_fd_ = -1;
}

}  // namespace quorate
