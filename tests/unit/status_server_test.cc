#include <doctest/doctest.h>

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <map>
#include <set>
#include <sstream>

#include "status/status_server.h"

namespace quorate {
namespace {

// A strict reader of the Prometheus text format 0.0.4, as far as quorate uses it: every sample is
// `name{labels} value`, label values use only the \\, \" and \n escapes, every sample's metric has a
// HELP and a TYPE line before it, and every counter ends in _total. Returns the problems found and
// fills `samples` ("name{labels}" as written → value).
bool IsMetricName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:") ==
         std::string::npos;
}

std::vector<std::string> CheckExposition(const std::string& text, std::map<std::string, double>& samples) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> types;
  std::set<std::string> helps;
  static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
  std::istringstream in(text);
  std::string line;
  int n = 0;
  if (text.empty() || text.back() != '\n') problems.push_back("does not end in a newline");
  while (std::getline(in, line)) {
    ++n;
    auto bad = [&](const std::string& why) { problems.push_back("line " + std::to_string(n) + ": " + why + ": " + line); };
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line.substr(1));
      std::string keyword, name, rest;
      words >> keyword >> name;
      std::getline(words, rest);
      if (keyword == "HELP") {
        if (!IsMetricName(name)) bad("bad metric name");
        if (!helps.insert(name).second) bad("second HELP");
      } else if (keyword == "TYPE") {
        if (rest.size() < 2 || !kTypes.count(rest.substr(1))) bad("bad type");
        if (types.count(name)) bad("second TYPE");
        types[name] = rest.size() > 1 ? rest.substr(1) : "";
        if (types[name] == "counter" && !name.ends_with("_total")) bad("counter not ending in _total");
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    std::string name = line.substr(0, i);
    if (!IsMetricName(name)) {
      bad("bad metric name");
      continue;
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || !IsMetricName(line.substr(i, eq - i))) {
          bad("bad label name");
          break;
        }
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') {
          bad("label value not quoted");
          break;
        }
        for (++i; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            if (i + 1 >= line.size() || std::string("\\\"n").find(line[i + 1]) == std::string::npos) bad("bad escape");
            ++i;
          }
        }
        if (i >= line.size()) {
          bad("unterminated label value");
          break;
        }
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) {
        bad("unterminated labels");
        continue;
      }
      ++i;
    }
    std::string key = line.substr(0, i);
    if (i >= line.size() || line[i] != ' ') {
      bad("no space before the value");
      continue;
    }
    std::string value = line.substr(i + 1);
    size_t used = 0;
    try {
      samples[key] = std::stod(value, &used);
    } catch (const std::exception&) {
    }
    if (used == 0 || used != value.size()) bad("value is not a number");
    if (!types.count(name)) bad("sample without a TYPE before it");
    if (!helps.count(name)) bad("sample without a HELP before it");
  }
  for (const auto& [name, type] : types) {
    if (!helps.count(name)) problems.push_back(name + ": TYPE without HELP");
  }
  return problems;
}

TEST_CASE("the exposition checker catches what it should") {
  std::map<std::string, double> s;
  CHECK(CheckExposition("# HELP a_total x\n# TYPE a_total counter\na_total 1\n", s).empty());
  CHECK(CheckExposition("# HELP a x\n# TYPE a counter\na 1\n", s).size() == 1);
  CHECK(CheckExposition("a 1\n", s).size() == 2);
  CHECK(CheckExposition("# HELP a x\n# TYPE a gauge\na{l=\"\\x\"} 1\n", s).size() == 1);
  CHECK(CheckExposition("# HELP a x\n# TYPE a gauge\na{l=\"v\"}1\n", s).size() == 1);
  CHECK(CheckExposition("# HELP a x\n# TYPE a gauge\na one\n", s).size() == 1);
}

TEST_CASE("label values are escaped as the text format wants") {
  CHECK(EscapeLabelValue("plain") == "plain");
  CHECK(EscapeLabelValue("a \"b\" \\c\nd") == "a \\\"b\\\" \\\\c\\nd");
}

TEST_CASE("metrics render as valid Prometheus text with every series quorate promises") {
  Metrics m;
  std::map<std::string, double> samples;
  CHECK(CheckExposition(m.Render(), samples).empty());
  CHECK(samples.at("quorate_up") == 1);
  CHECK(samples.at("quorate_etcd_restarts_total") == 0);
  CHECK(samples.at("quorate_decisions_total{decision=\"new\"}") == 0);
  CHECK(samples.at("quorate_decisions_total{decision=\"late-initial\"}") == 0);
  CHECK(samples.at("quorate_last_error_timestamp_seconds") == 0);
  CHECK(samples.count("quorate_last_error_info{message=\"\"}") == 0);

  m.IncEtcdRestarts();
  m.IncEtcdRestarts();
  m.RecordDecision(Action::kJoin);
  m.SetMembers(3);
  m.SetIsLearner(true);
  m.RecordError("MemberAdd \"n4\": etcdserver: unhealthy cluster\nretrying",
                std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000250)));
  samples.clear();
  std::string text = m.Render();
  auto problems = CheckExposition(text, samples);
  CHECK_MESSAGE(problems.empty(), text);
  CHECK(samples.at("quorate_etcd_restarts_total") == 2);
  CHECK(samples.at("quorate_decisions_total{decision=\"join\"}") == 1);
  CHECK(samples.at("quorate_members") == 3);
  CHECK(samples.at("quorate_is_learner") == 1);
  CHECK(samples.at("quorate_last_error_timestamp_seconds") == doctest::Approx(1700000000.25));
  CHECK(text.find("quorate_last_error_info{message=\"MemberAdd \\\"n4\\\": etcdserver: unhealthy cluster\\nretrying\"} 1\n") !=
        std::string::npos);
}

struct Probe {
  std::atomic<bool> etcd_alive{true};
  std::atomic<bool> voter{false};
  std::atomic<bool> expiring{false};
  StatusChecks Checks() {
    return {[this] { return etcd_alive ? Status::Ok() : Status::Unavailable("etcd is not running: restarting in 2s"); },
            [this] { return voter ? Status::Ok() : Status::Unavailable("this member is a learner"); },
            [this] { return expiring ? std::string("warning: peer certificate /p.crt expires in 2d 1h\n") : ""; }};
  }
};

TEST_CASE("the status server answers /healthz, /readyz and /metrics over HTTP") {
  Metrics metrics;
  Probe probe;
  auto server = StatusServer::Start("127.0.0.1:0", metrics, probe.Checks());
  REQUIRE_MESSAGE(server.ok(), server.status().message());
  REQUIRE((*server)->port() > 0);
  httplib::Client client("127.0.0.1", (*server)->port());

  auto health = client.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body == "ok\n");

  probe.etcd_alive = false;
  health = client.Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 503);
  CHECK(health->body == "etcd is not running: restarting in 2s\n");

  auto ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 503);
  CHECK(ready->body == "this member is a learner\n");
  probe.voter = true;
  ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  CHECK(ready->body == "ok\n");
  // A certificate close to its expiry is said on /readyz, and does not make the member unready.
  probe.expiring = true;
  ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 200);
  CHECK(ready->body == "ok\nwarning: peer certificate /p.crt expires in 2d 1h\n");
  probe.expiring = false;

  metrics.RecordDecision(Action::kNew);
  auto scraped = client.Get("/metrics");
  REQUIRE(scraped);
  CHECK(scraped->status == 200);
  CHECK(scraped->get_header_value("Content-Type") == "text/plain; version=0.0.4; charset=utf-8");
  std::map<std::string, double> samples;
  auto problems = CheckExposition(scraped->body, samples);
  CHECK_MESSAGE(problems.empty(), scraped->body);
  CHECK(samples.at("quorate_decisions_total{decision=\"new\"}") == 1);

  CHECK(client.Get("/nothing-here")->status == 404);

  int port = (*server)->port();
  server->reset();
  httplib::Client after("127.0.0.1", port);
  CHECK_FALSE(after.Get("/healthz"));
}

TEST_CASE("a status address that is malformed or cannot be bound is an error naming it") {
  Metrics metrics;
  for (const char* bad : {"2383", "127.0.0.1:http", "127.0.0.1:65536", ":2383", "127.0.0.1:"}) {
    CAPTURE(bad);
    auto s = StatusServer::Start(bad, metrics, {});
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().IsInvalidArgument());
    CHECK(s.status().message().find(std::string("--status-listen '") + bad + "'") != std::string::npos);
  }

  auto first = StatusServer::Start("127.0.0.1:0", metrics, {});
  REQUIRE(first.ok());
  std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = StatusServer::Start(taken, metrics, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().IsUnavailable());
  CHECK(second.status().message().find(taken) != std::string::npos);

  auto foreign = StatusServer::Start("192.0.2.1:0", metrics, {});
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.status().message().find("192.0.2.1:0") != std::string::npos);
}

TEST_CASE("without checks the server says what is missing") {
  Metrics metrics;
  auto server = StatusServer::Start("127.0.0.1:0", metrics, {});
  REQUIRE(server.ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  auto ready = client.Get("/readyz");
  REQUIRE(ready);
  CHECK(ready->status == 503);
  CHECK(ready->body == "no readiness check is configured\n");
}

// A client connected to 127.0.0.1:`port` that sends its request line, then one header byte at a
// time, never finishing: the slow client of issue 15 item 9.
int Dribbler(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  REQUIRE(::send(fd, start.data(), start.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(start.size()));
  return fd;
}

TEST_CASE("/healthz answers every probe within 1s while 16 clients dribble their headers") {
  Metrics metrics;
  Probe probe;
  auto server = StatusServer::Start("127.0.0.1:0", metrics, probe.Checks());
  REQUIRE(server.ok());
  const int port = (*server)->port();
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) slow.push_back(Dribbler(port));
  // One byte per connection every 100 ms: quicker than any per-read timeout, for as long as the
  // probes go on.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread dribble([&] {
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; })) {
      for (int fd : slow) ::send(fd, "a", 1, MSG_NOSIGNAL);
    }
  });
  int answered = 0;
  for (int i = 0; i < 20; ++i) {
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(std::chrono::seconds(1));
    client.set_read_timeout(std::chrono::seconds(1));
    client.set_write_timeout(std::chrono::seconds(1));
    auto started = std::chrono::steady_clock::now();
    auto health = client.Get("/healthz");
    CAPTURE(i);
    CHECK(health);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    if (health && health->status == 200) ++answered;
  }
  CHECK(answered == 20);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  dribble.join();
  for (int fd : slow) ::close(fd);
}

TEST_CASE("a client that never finishes its headers is dropped after its deadline") {
  Metrics metrics;
  auto server = StatusServer::Start("127.0.0.1:0", metrics, {});
  REQUIRE(server.ok());
  int fd = Dribbler((*server)->port());
  timeval limit{10, 0};
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) == 0);
  auto started = std::chrono::steady_clock::now();
  char byte;
  // The server closes it: end of stream, well before the 10 s this read would wait.
  CHECK(::recv(fd, &byte, 1, 0) == 0);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  ::close(fd);
}

TEST_CASE("requests other than GET and HEAD of a known path get 404, 405 or 400") {
  Metrics metrics;
  auto server = StatusServer::Start("127.0.0.1:0", metrics, {});
  REQUIRE(server.ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  auto posted = client.Post("/healthz", "x", "text/plain");
  REQUIRE(posted);
  CHECK(posted->status == 405);
  auto head = client.Head("/metrics");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->body.empty());
  auto queried = client.Get("/readyz?verbose");
  REQUIRE(queried);
  CHECK(queried->status == 503);
}

}  // namespace
}  // namespace quorate
