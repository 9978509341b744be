// The cloud kit's checks (discovery/cloud/cloud.h, src/net/cloud/opaque.h): what an instance must be
// to become a member, and what a token handed out must be to be sent back.
#include <doctest/doctest.h>

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

}  // namespace quorate::cloud
