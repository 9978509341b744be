#include "node/tls_renew.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "quorate/duration.h"
#include "quorate/fs.h"
#include "quorate/log.h"
#include "status/status_server.h"

namespace quorate {
namespace {

// "3d 4h", "5h 12m", "40s": how far off an expiry is, for people.
std::string Span(std::chrono::seconds s) {
  const bool past = s.count() < 0;
  auto a = std::chrono::abs(s);
  auto d = std::chrono::duration_cast<std::chrono::days>(a);
  auto h = std::chrono::duration_cast<std::chrono::hours>(a - d);
  auto m = std::chrono::duration_cast<std::chrono::minutes>(a - d - h);
  std::string text = d.count() > 0   ? fmt::format("{}d {}h", d.count(), h.count())
                     : h.count() > 0 ? fmt::format("{}h {}m", h.count(), m.count())
                     : m.count() > 0 ? fmt::format("{}m {}s", m.count(), (a - h - m).count())
                                     : fmt::format("{}s", a.count());
  return past ? text + " ago" : "in " + text;
}

std::chrono::seconds Until(WallTime t, WallTime now) {
  return std::chrono::duration_cast<std::chrono::seconds>(t - now);
}

constexpr const char* kKinds[] = {"peer", "client"};

}  // namespace

WallTime RenewalTime(const CertInfo& cert) { return cert.not_before + (cert.not_after - cert.not_before) * 2 / 3; }

LeafDecision DecideLeaf(const LeafFacts& f, WallTime now) {
  LeafDecision d;
  if (!f.cert) {
    d = {LeafAction::kRenew, "T2", f.problem};
    return d;
  }
  const CertInfo& c = *f.cert;
  if (now >= c.not_after) {
    d = {LeafAction::kRenew, "T2", fmt::format("it expired at {}", FormatUtcTime(c.not_after))};
    return d;
  }
  if (!f.names.ok()) {
    d = {LeafAction::kRenew, "T3", f.names.message()};
    return d;
  }
  d.renew_at = RenewalTime(c);
  if (now >= d.renew_at) {
    d.action = LeafAction::kRenew;
    d.rule = "T1";
    d.reason = fmt::format("two thirds of its life passed (valid from {} to {})", FormatUtcTime(c.not_before),
                           FormatUtcTime(c.not_after));
    return d;
  }
  d.rule = "T1";
  d.reason = fmt::format("valid until {}, renewed from {}", FormatUtcTime(c.not_after), FormatUtcTime(d.renew_at));
  return d;
}

TlsRenewer::TlsRenewer(const Config& config, Clock& clock, WallClock wall)
    : clock_(clock),
      wall_(wall ? std::move(wall) : WallClock([] { return std::chrono::system_clock::now(); })),
      extra_names_(config.tls_extra_names),
      lifetime_(config.tls_leaf_lifetime),
      warning_(config.tls_expiry_warning),
      name_(config.name) {}

Result<std::unique_ptr<TlsRenewer>> TlsRenewer::Create(const Config& c, Clock& clock, WallClock wall) {
  std::unique_ptr<TlsRenewer> r(new TlsRenewer(c, clock, std::move(wall)));
  auto issued = [&](const char* kind) {
    return std::find(c.tls_leaves.begin(), c.tls_leaves.end(), kind) != c.tls_leaves.end();
  };
  auto urls = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  auto add = [&](WatchedCert w) {
    if (w.cert_file.empty()) return;
    for (const auto& seen : r->watched_) {
      if (seen.cert_file == w.cert_file) return;  // one CA file for both sides: one series
    }
    r->watched_.push_back(std::move(w));
  };
  add({"peer", c.peer_tls.cert_file, c.peer_tls.key_file, issued("peer"),
       urls(c.initial_advertise_peer_urls, c.listen_peer_urls)});
  add({"client", c.client_tls.cert_file, c.client_tls.key_file, issued("client"),
       urls(c.advertise_client_urls, c.listen_client_urls)});
  add({"peer-ca", c.peer_tls.trusted_ca_file, "", false, {}});
  add({"client-ca", c.client_tls.trusted_ca_file, "", false, {}});
  add({"issuing-ca", c.tls_ca.cert_file, "", false, {}});
  if (r->watched_.empty()) return std::unique_ptr<TlsRenewer>();
  if (!c.tls_ca.key_file.empty()) {
    auto ca = LoadCa(c.tls_ca.cert_file, c.tls_ca.key_file);
    if (!ca.ok()) return ca.status().Prefixed("--tls-ca-cert-file, --tls-ca-key-file");
    r->ca_ = std::move(*ca);
  }
  return r;
}

LeafFacts TlsRenewer::Read(const WatchedCert& w) const {
  LeafFacts f;
  auto cert = ReadCertFile(w.cert_file);
  if (!cert.ok()) {
    f.problem = cert.status().IsNotFound() ? fmt::format("{} does not exist", w.cert_file) : cert.status().message();
    return f;
  }
  f.cert = *cert;
  f.names = CheckNames(*cert, w.urls, w.cert_file);
  // A key that is gone or does not parse is no leaf etcd can use.
  if (w.issued && !ReadFile(w.key_file).ok()) {
    f.cert.reset();
    f.problem = fmt::format("its key {} cannot be read", w.key_file);
  }
  return f;
}

void TlsRenewer::SayOnce(const std::string& file, const std::string& line, bool warn) {
  if (said_[file] == line) return;
  said_[file] = line;
  if (warn) {
    spdlog::warn("{}", line);
  } else {
    spdlog::info("{}", line);
  }
}

Status TlsRenewer::Look(const WatchedCert& w) {
  const WallTime now = wall_();
  if (w.key_file.empty()) {  // a CA file: its expiry only
    Report(w, EarliestNotAfter(w.cert_file));
    return Status::Ok();
  }
  LeafFacts facts = Read(w);
  LeafDecision d = DecideLeaf(facts, now);
  if (d.action == LeafAction::kKeep) {
    earliest_due_ = std::min(earliest_due_, d.renew_at);
    SayOnce(w.cert_file, fmt::format("tls: {} certificate {}: keep (rule {}): {}", w.kind, w.cert_file, d.rule, d.reason),
            false);
  } else if (!w.issued) {
    // cert-manager's (or the operator's) file: reported, never written (rule T6).
    SayOnce(w.cert_file,
            fmt::format("tls: {} certificate {} needs renewal (rule {}): {}; quorate does not write it (no "
                        "--tls-ca-key-file): its issuer must",
                        w.kind, w.cert_file, d.rule, d.reason),
            true);
  } else {
    Status s = Renew(w, d);
    if (!s.ok()) return s;
    facts = Read(w);
  }
  Report(w, facts.cert ? Result<WallTime>(facts.cert->not_after) : Result<WallTime>(Status::NotFound(facts.problem)));
  return Status::Ok();
}

Status TlsRenewer::Renew(const WatchedCert& w, const LeafDecision& d) {
  const WallTime now = wall_();
  auto fail = [&](const Status& s) {
    {
      std::lock_guard lock(mu_);
      ++failed_[w.kind];
    }
    Status failed = Status::FailedPrecondition(fmt::format(
        "tls: renewing the {} certificate {} (rule {}: {}) failed, nothing written: {}", w.kind, w.cert_file, d.rule,
        d.reason, s.message()));
    SayOnce(w.cert_file, failed.message(), true);
    return failed;
  };
  // The key is kept while it is there and parses, so the swap is the certificate's one rename.
  auto key = ReadFile(w.key_file);
  LeafRequest request{name_, HostsOf(w.urls), lifetime_, now, key.ok() ? *key : ""};
  for (const auto& host : extra_names_) {
    if (std::find(request.hosts.begin(), request.hosts.end(), host) == request.hosts.end()) {
      request.hosts.push_back(host);
    }
  }
  auto leaf = IssueLeaf(*ca_, request);
  if (!leaf.ok() && !request.key_pem.empty()) {
    request.key_pem.clear();
    leaf = IssueLeaf(*ca_, request);
  }
  if (!leaf.ok()) return fail(leaf.status());
  // Rule T4: what etcd and its peers will check, checked before the swap.
  if (Status s = CheckLeaf(*leaf, *ca_, now); !s.ok()) return fail(s);
  if (Status s = CheckNames(leaf->info, w.urls, "the new leaf"); !s.ok()) return fail(s);
  if (Status s = WriteLeaf(*leaf, w.cert_file, w.key_file); !s.ok()) return fail(s);
  {
    std::lock_guard lock(mu_);
    ++renewed_[w.kind];
    ++generation_;
  }
  SayOnce(w.cert_file,
          fmt::format("tls: renewed the {} certificate {} (rule {}: {}): serial {}, valid until {}, names IP [{}] DNS "
                      "[{}], {} key; etcd takes it at its next handshake",
                      w.kind, w.cert_file, d.rule, d.reason, leaf->info.serial, FormatUtcTime(leaf->info.not_after),
                      fmt::join(leaf->info.ips, ", "), fmt::join(leaf->info.dns_names, ", "),
                      request.key_pem.empty() ? "a new" : "the same"),
          false);
  earliest_due_ = std::min(earliest_due_, RenewalTime(leaf->info));
  return Status::Ok();
}

void TlsRenewer::Report(const WatchedCert& w, const Result<WallTime>& not_after) {
  const WallTime now = wall_();
  std::string warning;
  if (!not_after.ok()) {
    warning = fmt::format("{} certificate {} cannot be read: {}", w.kind, w.cert_file, not_after.status().message());
  } else if (Until(*not_after, now) < warning_) {
    warning = fmt::format("{} certificate {} expires {} ({})", w.kind, w.cert_file, Span(Until(*not_after, now)),
                          FormatUtcTime(*not_after));
  }
  bool changed;
  {
    std::lock_guard lock(mu_);
    expiry_[w.cert_file] = {w.kind, not_after.ok() ? std::optional<WallTime>(*not_after) : std::nullopt};
    auto it = warnings_.find(w.cert_file);
    // The warning's words change with every second that passes; a warning appearing or going is news.
    changed = (it == warnings_.end()) != warning.empty();
    if (warning.empty()) {
      warnings_.erase(w.cert_file);
    } else {
      warnings_[w.cert_file] = warning;
    }
  }
  if (!changed) return;
  if (warning.empty()) {
    spdlog::info("tls: {} certificate {} is no longer within --tls-expiry-warning of its expiry", w.kind, w.cert_file);
  } else {
    spdlog::warn("tls: {} (--tls-expiry-warning {}s)", warning, warning_.count());
  }
}

Status TlsRenewer::BeforeStart() {
  std::lock_guard lock(round_mu_);
  for (const auto& w : watched_) {
    if (Status s = Look(w); !s.ok() && w.issued) return s;
  }
  return Status::Ok();
}

void TlsRenewer::Round() {
  std::lock_guard lock(round_mu_);
  const Clock::TimePoint now = clock_.Now();
  if (now < next_round_) return;
  earliest_due_ = WallTime::max();
  for (const auto& w : watched_) (void)Look(w);  // a failure is logged and tried again next round
  Clock::Duration wait = kEvery;
  if (earliest_due_ != WallTime::max()) {
    wait = std::clamp<Clock::Duration>(
        std::chrono::duration_cast<Clock::Duration>(earliest_due_ - wall_()), Clock::Duration::zero(), kEvery);
  }
  next_round_ = now + wait;
}

std::string TlsRenewer::RenderMetrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  AppendFamily(out, "quorate_tls_not_after_seconds", "gauge",
               "When each certificate file etcd is given expires (a bundle: its first to expire), in seconds since "
               "the epoch; none for a file that cannot be read (docs/DESIGN.md §13).");
  for (const auto& [file, entry] : expiry_) {
    if (!entry.second) continue;
    out += fmt::format("quorate_tls_not_after_seconds{{file=\"{}\",kind=\"{}\"}} {}\n", EscapeLabelValue(file),
                       entry.first, std::chrono::duration_cast<std::chrono::seconds>(entry.second->time_since_epoch()).count());
  }
  if (!ca_) return out;
  AppendFamily(out, "quorate_tls_renewals_total", "counter", "Leaves quorate issued and swapped in, by kind.");
  for (const char* k : kKinds) {
    auto it = renewed_.find(k);
    out += fmt::format("quorate_tls_renewals_total{{kind=\"{}\"}} {}\n", k, it == renewed_.end() ? 0 : it->second);
  }
  AppendFamily(out, "quorate_tls_renewal_failures_total", "counter",
               "Renewals that wrote nothing (the new leaf failed its check, or could not be written), by kind.");
  for (const char* k : kKinds) {
    auto it = failed_.find(k);
    out += fmt::format("quorate_tls_renewal_failures_total{{kind=\"{}\"}} {}\n", k, it == failed_.end() ? 0 : it->second);
  }
  return out;
}

std::string TlsRenewer::Warnings() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [file, line] : warnings_) out += "warning: " + line + "\n";
  return out;
}

}  // namespace quorate
