#include <doctest/doctest.h>

#include <chrono>


#include "cli/output.h"
#include "etcd/etcd_client.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;

// An address nothing listens on: the calls below fail before anything is sent.
const std::string kIp = "127.0.3.1";

bool Has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST_CASE("etcd client options that cannot work are the error of every call, naming the input") {
  auto unix_socket = MakeEtcdClient({{"unix:///run/etcd.sock"}, {}, milliseconds(200)});
  auto list = unix_socket->MemberList();
  CHECK(list.status().IsInvalidArgument());
  CHECK_MESSAGE(Has(list.status(), "unix:///run/etcd.sock"), list.status().message());

  TlsFiles tls;
  tls.trusted_ca_file = "/nonexistent/quorate-ca.crt";
  auto no_ca = MakeEtcdClient({{"https://" + kIp + ":2379"}, tls, milliseconds(200)});
  Status put = no_ca->Put("k", "v");
  CHECK(put.IsInvalidArgument());
  CHECK_MESSAGE(Has(put, "/nonexistent/quorate-ca.crt"), put.message());

  auto none = MakeEtcdClient({{}, {}, milliseconds(200)});
  CHECK(none->MemberList().status().IsInvalidArgument());
}

}  // namespace
}  // namespace quorate
