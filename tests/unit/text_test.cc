#include <doctest/doctest.h>

#include "quorate/text.h"

namespace quorate {

TEST_CASE("UTF-8 is checked as a decoder would: overlong forms, surrogates and cut sequences are not") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("etcd-0"));
  CHECK(IsValidUtf8("n\xc3\xa9ud"));              // é
  CHECK(IsValidUtf8("\xf0\x9f\x90\xa7"));         // a 4-byte sequence
  CHECK_FALSE(IsValidUtf8("\xff"));
  CHECK_FALSE(IsValidUtf8("\xc3"));               // cut short
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));           // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));       // a surrogate
  CHECK_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));   // above U+10FFFF
}

TEST_CASE("member names etcd could carry in --initial-cluster") {
  CHECK(CheckMemberName("etcd-0", "--name").ok());
  CHECK(CheckMemberName("", "--name").ok());  // unstarted members have none yet
  CHECK(CheckMemberName("n\xc3\xa9ud", "--name").ok());
  for (std::string bad : {std::string("a\nETCD_X=1"), std::string("a\r"), std::string("a\tb"), std::string("\x1b[2J"),
                          std::string("a\x7f"), std::string("\xc2\x9b" "31m"), std::string("a=b"), std::string("a,b"),
                          std::string("\xff"), std::string(254, 'a')}) {
    INFO(Printable(bad));
    Status s = CheckMemberName(bad, "--name");
    CHECK(s.IsInvalidArgument());
    CHECK(s.message().rfind("--name '", 0) == 0);
    CHECK(IsPrintable(s.message()));
  }
}

TEST_CASE("Printable escapes what a terminal or a log reader would obey, and cuts") {
  CHECK(Printable("plain text, é") == "plain text, \xc3\xa9");
  CHECK(Printable("a\nb\r\tc") == "a\\nb\\r\\tc");
  CHECK(Printable("\x1b[2J\x7f") == "\\x1b[2J\\x7f");
  CHECK(Printable("\xc2\x9b") == "\\xc2\\x9b");
  CHECK(Printable("ok\xff") == "ok\\xff");
  CHECK(Printable(std::string(10, 'x'), 4) == "xxxx...(6 more bytes)");
  CHECK(IsPrintable(Printable("\x01\x02\xfe\n")));
  CHECK_FALSE(IsPrintable("a\nb"));
  CHECK(IsPrintable("a b"));
}

}  // namespace quorate
