#include "core/rolling.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace quorate {

std::string RollingPlan::PhaseName(int phase) const {
  if (phase <= 0) return initial;
  if (phase > last()) return fmt::format("phase {}", phase);
  return phases[phase - 1].name;
}

const char* RollingActionName(RollingAction action) {
  switch (action) {
    case RollingAction::kNone:
      return "none";
    case RollingAction::kWait:
      return "wait";
    case RollingAction::kApply:
      return "apply";
    case RollingAction::kRestart:
      return "restart";
    case RollingAction::kReport:
      return "report";
  }
  return "none";
}

namespace {

RollingDecision Decide(RollingAction action, int phase, const char* rule, std::string reason) {
  return RollingDecision{action, phase, rule, std::move(reason)};
}

// Why `m` is not a healthy, caught-up member now; empty when it is.
std::string Unhealthy(const RollingMember& m, uint64_t highest, uint64_t max_lag) {
  if (!m.answered) return "does not answer";
  if (!m.has_leader) return "knows no leader";
  if (m.alarmed) return "has an alarm raised";
  if (m.applied_index + max_lag < highest) {
    return fmt::format("is {} entries behind", highest - m.applied_index);
  }
  return "";
}

}  // namespace

RollingDecision DecideRolling(const RollingPlan& plan, const RollingFacts& f) {
  const int local = std::clamp(f.local, 0, plan.last());
  // R1: nothing is asked. A node keeps the phase it is at: undoing half a rotation would be a
  // rolling change of its own, and the operator's to ask.
  if (!f.intent) return Decide(RollingAction::kNone, local, "R1", plan.change + " not asked");

  auto self = std::find_if(f.members.begin(), f.members.end(), [&](const auto& m) { return m.name == f.self; });
  // R2: only a started member takes part; its etcd must be in the membership to be counted.
  if (self == f.members.end()) {
    return Decide(RollingAction::kWait, local, "R2", fmt::format("{} is not a started member yet", f.self));
  }
  uint64_t highest = 0;
  for (const auto& m : f.members) highest = std::max(highest, m.raft_index);

  // R3: what the others read of this node is what its etcd runs now: a phase reached is said once
  // its etcd serves there (healthy, caught up, after a restart); a record ahead of the node's own
  // (its state lost) is said back down at once, so no one counts on a phase it is not at.
  if (self->reported != local) {
    bool restarted = local > 0 && plan.phases[local - 1].needs_restart;
    std::string why = Unhealthy(*self, highest, plan.max_lag);
    if (self->reported < local && restarted && (!why.empty() || self->is_learner)) {
      return Decide(RollingAction::kWait, local, "R3",
                    fmt::format("{} runs at phase {} but its etcd {}", f.self, plan.PhaseName(local),
                                self->is_learner ? "is a learner" : why));
    }
    return Decide(RollingAction::kReport, local, "R3",
                  fmt::format("{} is at phase {}{}", f.self, plan.PhaseName(local),
                              restarted && self->reported < local ? " and its etcd healthy there" : ""));
  }
  // R4: done here, whatever files the operator has moved since.
  if (local == plan.last()) {
    std::vector<std::string> behind;
    for (const auto& m : f.members) {
      if (m.reported < plan.last()) behind.push_back(m.name.empty() ? IdToHex(m.id) : m.name);
    }
    if (behind.empty()) return Decide(RollingAction::kNone, local, "R4", plan.change + " done on every member");
    return Decide(RollingAction::kNone, local, "R4",
                  fmt::format("{} done on {}; still to finish: {}", plan.change, f.self, fmt::join(behind, ", ")));
  }
  // R5: the node's own material for the next phase must be there before it moves.
  if (!f.material_problem.empty()) return Decide(RollingAction::kWait, local, "R5", f.material_problem);
  const int next = local + 1;
  const RollingPhase& phase = plan.phases[local];
  // R6: no node moves to the next phase while a member lags behind its own: a leaf from a new CA
  // served to a peer that does not trust it yet, or a trust dropped while a peer still serves a leaf
  // of the old CA, would cut that peer off.
  std::vector<std::string> lagging;
  for (const auto& m : f.members) {
    if (m.name.empty()) {
      lagging.push_back(IdToHex(m.id) + " (not started)");
    } else if (m.reported < local) {
      lagging.push_back(fmt::format("{} (at {})", m.name, plan.PhaseName(m.reported)));
    }
  }
  if (!lagging.empty()) {
    return Decide(RollingAction::kWait, local, "R6",
                  fmt::format("phase {} waits until every member is at {}: {}", phase.name, plan.PhaseName(local),
                              fmt::join(lagging, ", ")));
  }
  // R7: a phase etcd picks up live is taken at once by every node.
  if (!phase.needs_restart) {
    return Decide(RollingAction::kApply, next, "R7",
                  fmt::format("every member is at {}; {} needs no restart", plan.PhaseName(local), phase.name));
  }
  // R8: a restart only one member at a time, in name order, and only while every other voter is
  // healthy and caught up: the cluster then keeps its quorum without this member, and the member
  // before it has come back and said so.
  for (const auto& m : f.members) {
    if (m.name < f.self && m.reported < next) {
      return Decide(RollingAction::kWait, local, "R8",
                    fmt::format("{} restarts for phase {} after {}, which is at {}", f.self, phase.name, m.name,
                                plan.PhaseName(m.reported)));
    }
  }
  for (const auto& m : f.members) {
    if (m.name == f.self || m.is_learner) continue;
    if (std::string why = Unhealthy(m, highest, plan.max_lag); !why.empty()) {
      return Decide(RollingAction::kWait, local, "R8",
                    fmt::format("{} restarts for phase {} only while every other voter is healthy: {} {}", f.self,
                                phase.name, m.name, why));
    }
  }
  return Decide(RollingAction::kRestart, next, "R8",
                fmt::format("every other voter is healthy and caught up, and every member before {} is at {}", f.self,
                            phase.name));
}

RollingPlan PeerHttpsPlan() {
  RollingPlan plan;
  plan.change = "peer TLS";
  plan.initial = "http";
  // etcd reads its listen URLs only at start; a member's advertised peer URLs change live
  // (MemberUpdate), and a peer dials the new one once it has the CA (since `both`).
  plan.phases = {{"both", true}, {"advertised", false}, {"https", true}};
  return plan;
}

namespace {

// The https twin of an http URL: the same host at `port`.
std::string HttpsTwin(const std::string& url, int port) {
  auto parsed = ParseUrl(url);
  if (!parsed.ok() || parsed->scheme != "http") return url;
  const std::string& host = parsed->host;
  return fmt::format("https://{}:{}", host.find(':') != std::string::npos ? "[" + host + "]" : host, port);
}

void AddOnce(std::vector<std::string>& out, const std::string& url) {
  if (std::find(out.begin(), out.end(), url) == out.end()) out.push_back(url);
}

}  // namespace

std::vector<std::string> PeerUrlsAtPhase(const std::vector<std::string>& urls, int https_port, int phase) {
  if (phase <= 0) return urls;
  std::vector<std::string> out;
  if (phase < kHttpsPhaseHttps) {
    // The listed one first: a probe that finds it answering looks no further.
    for (const auto& u : AdvertisedPeerUrlsAtPhase(urls, https_port, phase)) AddOnce(out, u);
  }
  for (const auto& u : urls) {
    if (phase < kHttpsPhaseHttps) AddOnce(out, u);
    AddOnce(out, HttpsTwin(u, https_port));
  }
  return out;
}

std::vector<std::string> AdvertisedPeerUrlsAtPhase(const std::vector<std::string>& urls, int https_port, int phase) {
  if (phase < kHttpsPhaseAdvertised) {
    // Before `advertised` an https twin is not listed yet: the http URLs it came from are.
    std::vector<std::string> http;
    for (const auto& u : urls) {
      if (u.rfind("http://", 0) == 0) http.push_back(u);
    }
    return http.empty() ? urls : http;
  }
  std::vector<std::string> out;
  for (const auto& u : urls) AddOnce(out, HttpsTwin(u, https_port));
  return out;
}

}  // namespace quorate
