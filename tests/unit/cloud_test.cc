// The cloud kit's checks (discovery/cloud/cloud.h, src/net/cloud/opaque.h): what an instance must be
// to become a member, and what a token handed out must be to be sent back.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "../../discovery/cloud/api.h"
#include "../../discovery/cloud/cloud.h"
#include "net/cloud/opaque.h"

namespace quorate::cloud {

TEST_CASE("cloud: a member's address is a unicast address of the family asked, nothing else") {
  CHECK(*UnicastHost("10.0.0.1", Family::kV4, "i") == "10.0.0.1");
  CHECK(*UnicastHost("127.0.0.2", Family::kV4, "i") == "127.0.0.2");
  CHECK(*UnicastHost("2600:1f18::1", Family::kV6, "i") == "[2600:1f18::1]");
  for (const char* bad : {"0.0.0.0", "255.255.255.255", "300.1.1.1", "224.0.0.1", "239.1.2.3", "etcd.example.com",
                          "10.0.0.1\r\nHost: x", "10.0.0.1 ", "", "::1", "010.0.0.1", "10.0.0.1/8"}) {
    CAPTURE(bad);
    auto host = UnicastHost(bad, Family::kV4, "instance i-1");
    REQUIRE_FALSE(host.ok());
    CHECK(host.status().IsUnavailable());
    CHECK(host.status().message().find("instance i-1") != std::string::npos);
    CHECK(host.status().message().find('\r') == std::string::npos);
  }
  for (const char* bad : {"::", "ff02::1", "10.0.0.1", "[2600::1]", "2600::1%eth0"}) {
    CAPTURE(bad);
    CHECK(UnicastHost(bad, Family::kV6, "i").status().IsUnavailable());
  }
  CHECK(UnicastHost(std::string(30000, '1'), Family::kV4, "i").status().message().size() < 300);
}

TEST_CASE("cloud: a private DNS name is a host name") {
  CHECK(*DnsHost("ip-10-0-0-1.ec2.internal", "i") == "ip-10-0-0-1.ec2.internal");
  for (const std::string& bad : std::vector<std::string>{"", "a..b", "-a.b", "a-.b", "a b", "a\nb", "a/b", "a:1",
                                                        std::string(64, 'a') + ".b", std::string(254, 'a')}) {
    CAPTURE(bad);
    CHECK(DnsHost(bad, "i").status().IsUnavailable());
  }
}

TEST_CASE("cloud: two instances of one name or address, and a group with none, are answers to wait out") {
  std::vector<Member> members = {{"a", {"http://10.0.0.1:2380"}, {}}, {"b", {"http://10.0.0.2:2380"}, {}}};
  CHECK(CheckMembers(members, "group g").ok());
  members.push_back({"a", {"http://10.0.0.3:2380"}, {}});
  CHECK(CheckMembers(members, "group g").IsUnavailable());
  members.back() = {"c", {"http://10.0.0.1:2380"}, {}};
  auto same_address = CheckMembers(members, "group g");
  CHECK(same_address.IsUnavailable());
  CHECK(same_address.message().find("http://10.0.0.1:2380") != std::string::npos);
  auto none = CheckMembers({}, "group g");
  CHECK(none.IsUnavailable());
  CHECK(none.message() == "group g has no instances with an address yet");
  CHECK(CheckGroupSize(99, "g").ok());
  CHECK(CheckGroupSize(0, "g").ok());
  CHECK(CheckGroupSize(100, "g").IsUnavailable());
  CHECK(CheckGroupSize(10000, "g").IsUnavailable());
  CHECK(CheckGroupSize(-1, "g").IsUnavailable());
}

TEST_CASE("cloud: a token handed out is printable ASCII of a bounded size, and never shown") {
  CHECK(CheckOpaque("AQoDYXdzEJr//+abc=", 100, "t").ok());
  for (const std::string& bad : {std::string(""), std::string("secret\r\nX-Smuggled: 1"), std::string("sec\0ret", 7),
                                std::string("sec ret"), std::string("s\xc3\xa9"), std::string(101, 'a')}) {
    CAPTURE(bad);
    Status s = CheckOpaque(bad, 100, "the token");
    CHECK(s.IsUnavailable());
    CHECK(s.message().find("sec") == std::string::npos);
    CHECK(s.message().find("the token") == 0);
  }
}

TEST_CASE("cloud: an answer that is not the document asked for is named by its size, none of it quoted") {
  const std::string answer = "<html>token=ya29.secret-value</html>";
  Status s = NotThe("EC2's DescribeInstancesResponse XML", answer);
  CHECK(s.IsUnavailable());
  CHECK(s.message() == "the answer (36 bytes) is not EC2's DescribeInstancesResponse XML");
  CHECK(s.message().find("ya29") == std::string::npos);
}

TEST_CASE("cloud: a paged list is read to its end by the items read, not a page count; one that never ends stops") {
  // 1,000 instances 5 to a page: 200 pages (a page cap of 100 stopped at 500).
  int pages = 0;
  CHECK(ReadPages("list", "NextToken", [&](const std::string& next) -> Result<Page> {
          CHECK(next == (pages == 0 ? "" : "p" + std::to_string(pages)));
          ++pages;
          return Page{5, pages < 200 ? "p" + std::to_string(pages) : ""};
        }).ok());
  CHECK(pages == 200);
  // Full pages without end stop past kMaxItemsRead; empty ones past kMaxPages.
  for (size_t items : {size_t{1000}, size_t{0}}) {
    int calls = 0;
    Status endless = ReadPages("list", "NextToken", [&](const std::string&) -> Result<Page> {
      return Page{items, "p" + std::to_string(++calls)};
    });
    CHECK(endless.IsUnavailable());
    CHECK(endless.message().find("did not end") != std::string::npos);
    CHECK(calls == (items ? 101 : kMaxPages));
  }
  // A token given before, or one that would break a request, stops it; an error is passed on as it is.
  CHECK(ReadPages("list", "nextLink", [](const std::string&) -> Result<Page> { return Page{1, "same"}; })
            .message()
            .find("a nextLink came round again") != std::string::npos);
  Status crlf = ReadPages("list", "NextToken", [](const std::string&) -> Result<Page> { return Page{1, "p\r\nX: 1"}; });
  CHECK(crlf.IsUnavailable());
  CHECK(crlf.message().find("list's NextToken") == 0);
  CHECK(ReadPages("list", "NextToken", [](const std::string&) -> Result<Page> { return Status::NotFound("no"); })
            .IsNotFound());
}

TEST_CASE("cloud: an instance's member: its name as etcd takes it, URLs of the scheme and ports given") {
  auto m = InstanceMember("etcd-1", "[2600::1]", CommonKeys{"", "https", 12380, 12379}, "instance i-1");
  REQUIRE(m.ok());
  CHECK(m->peer_urls == std::vector<std::string>{"https://[2600::1]:12380"});
  CHECK(m->client_urls == std::vector<std::string>{"https://[2600::1]:12379"});
  auto bad = InstanceMember("a=b", "10.0.0.1", CommonKeys{}, "instance i-1");
  CHECK(bad.status().IsUnavailable());
  CHECK(bad.status().message().find("instance i-1's name") != std::string::npos);
}

// Time that starts at the real clock's now (HttpSend's own deadline stays true) and jumps over
// every wait, recording it: throttles are waited out without sleeping.
class JumpClock : public Clock {
 public:
  TimePoint Now() override { return start_ + skipped_; }
  Result<int> Poll(std::span<pollfd>, TimePoint deadline) override {
    waits.push_back(deadline - Now());
    skipped_ += deadline - Now();
    return 0;
  }
  std::vector<Duration> waits;

 private:
  TimePoint start_ = std::chrono::steady_clock::now();
  Duration skipped_{};
};

// An API on 127.0.0.1 that answers the next `script` entries in turn, then 200 "ok".
class ScriptedApi {
 public:
  struct Answer {
    int status;
    std::string body;
    std::string retry_after;
  };
  explicit ScriptedApi(std::vector<Answer> script) : script_(std::move(script)) {
    server_.Get("/call", [this](const httplib::Request&, httplib::Response& res) {
      const size_t n = calls_++;
      if (n >= script_.size()) return res.set_content("ok", "text/plain");
      res.status = script_[n].status;
      if (!script_[n].retry_after.empty()) res.set_header("Retry-After", script_[n].retry_after);
      res.set_content(script_[n].body, "application/xml");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~ScriptedApi() {
    server_.stop();
    thread_.join();
  }
  HttpRequest Request() const {
    HttpRequest r;
    r.base_url = fmt::format("http://127.0.0.1:{}", port_);
    r.target = "/call";
    return r;
  }
  size_t calls() const { return calls_; }

 private:
  std::vector<Answer> script_;
  std::atomic<size_t> calls_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

Api AwsLikeApi(JumpClock& clock, Clock::TimePoint deadline, int* drops) {
  Api api;
  api.clock = &clock;
  api.deadline = deadline;
  api.read_error = [](const std::string& body) {
    const size_t code = body.find("<Code>"), end = body.find("</Code>");
    if (code == std::string::npos || end == std::string::npos) return ApiError{};
    return ApiError{body.substr(code + 6, end - code - 6), "Rate exceeded"};
  };
  api.throttled = [](int, const ApiError& e) { return e.code == "Throttling"; };
  api.expired = [](int, const ApiError& e) { return e.code == "ExpiredToken"; };
  api.drop = [drops] { ++*drops; };
  api.refusal = "the credentials need {}";
  return api;
}

TEST_CASE("cloud API call: throttles are waited out on the clock, as long as the server asks, within the deadline") {
  JumpClock clock;
  int drops = 0;
  ScriptedApi server({{429, "", "30"}, {400, "<Code>Throttling</Code>", ""}, {503, "", "20"}});
  auto body = CallApi(AwsLikeApi(clock, clock.Now() + std::chrono::minutes(2), &drops), server.Request(), 1024,
                      {"DescribeInstances", "ec2:DescribeInstances"});
  REQUIRE_MESSAGE(body.ok(), body.status().message());
  CHECK(*body == "ok");
  CHECK(server.calls() == 4);
  REQUIRE(clock.waits.size() == 3);
  CHECK(clock.waits[0] == std::chrono::seconds(30));  // its Retry-After
  CHECK(clock.waits[1] == std::chrono::milliseconds(200));  // none given: our own backoff
  CHECK(clock.waits[2] == std::chrono::seconds(20));

  // A throttle that outlasts the deadline is the answer, not a longer wait.
  JumpClock short_clock;
  ScriptedApi busy({{429, "", "30"}, {429, "", "30"}, {429, "", "30"}});
  auto late = CallApi(AwsLikeApi(short_clock, short_clock.Now() + std::chrono::seconds(45), &drops), busy.Request(),
                      1024, {"DescribeInstances", "ec2:DescribeInstances"});
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().IsUnavailable());
  CHECK(late.status().message() == "DescribeInstances: HTTP 429");
  CHECK(busy.calls() == 2);
  CHECK(short_clock.waits.size() == 1);
}

TEST_CASE("cloud API call: an error quotes the cloud's code and message escaped and cut, a refusal names the permission") {
  JumpClock clock;
  int drops = 0;
  const Api api = AwsLikeApi(clock, Clock::kNever, &drops);
  ScriptedApi denied({{403, "<Code>UnauthorizedOperation</Code>", ""}});
  auto refused = CallApi(api, denied.Request(), 1024, {"DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingGroups"});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().IsUnavailable());
  CHECK(refused.status().message() ==
        "DescribeAutoScalingGroups: HTTP 403 UnauthorizedOperation: Rate exceeded; the credentials need "
        "autoscaling:DescribeAutoScalingGroups");
  CHECK(drops == 0);

  ScriptedApi hostile({{400, "<Code>Bad\r\nX-Injected: 1" + std::string(500, 'a') + "</Code>", ""}});
  auto garbled = CallApi(api, hostile.Request(), 4096, {"DescribeInstances", "ec2:DescribeInstances"});
  REQUIRE_FALSE(garbled.ok());
  CHECK(garbled.status().message().find('\n') == std::string::npos);
  CHECK(garbled.status().message().find("more bytes") != std::string::npos);
  CHECK(garbled.status().message().size() < 600);
  CHECK(garbled.status().message().find("need") == std::string::npos);  // not a refusal

  // Credentials refused (401, or a code that says they expired) are dropped for the next call.
  ScriptedApi expired({{401, "", ""}, {400, "<Code>ExpiredToken</Code>", ""}});
  CHECK_FALSE(CallApi(api, expired.Request(), 1024, {"DescribeInstances", "ec2:DescribeInstances"}).ok());
  CHECK_FALSE(CallApi(api, expired.Request(), 1024, {"DescribeInstances", "ec2:DescribeInstances"}).ok());
  CHECK(drops == 2);

  ScriptedApi missing({{404, "", ""}});
  auto gone = CallApi(api, missing.Request(), 1024, {"instanceGroupManagers.get", "compute.instanceGroupManagers.get",
                                                     "is the group's name right?"});
  CHECK(gone.status().message() == "instanceGroupManagers.get: HTTP 404; is the group's name right?");
}

}  // namespace quorate::cloud
