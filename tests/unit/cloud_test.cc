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

}  // namespace quorate::cloud
