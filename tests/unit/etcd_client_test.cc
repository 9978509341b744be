#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

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

// A listener that completes TCP handshakes and never says a word: gRPC's connection to it stays
// connecting, so a call to it runs out its whole timeout unless something ends it.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    ::inet_pton(AF_INET, "127.0.3.2", &addr.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    url_ = "http://127.0.3.2:" + std::to_string(ntohs(addr.sin_port));
  }
  ~SilentListener() { ::close(fd_); }
  const std::string& url() const { return url_; }

 private:
  int fd_ = -1;
  std::string url_;
};

TEST_CASE("a cancelled client ends its call in flight at once and makes no more") {
  SilentListener silent;
  EtcdClientOptions options{{silent.url()}, {}, std::chrono::minutes(5)};
  options.cancel = std::make_shared<Cancellation>();
  auto client = MakeEtcdClient(options);
  std::thread stopper([cancel = options.cancel] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel->Cancel();
  });
  auto started = std::chrono::steady_clock::now();
  auto list = client->MemberList();
  stopper.join();
  // Against the call's 5 minutes: the cancellation ended it, whatever the machine's load.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::minutes(1));
  CHECK_MESSAGE(list.status().IsCancelled(), list.status().message());
  CHECK_MESSAGE(Has(list.status(), "quorate is stopping"), list.status().message());

  // After the cancellation nothing is asked, a change included (it is certainly not sent).
  Status put = client->Put("k", "v");
  CHECK_MESSAGE(put.IsCancelled(), put.message());
}

TEST_CASE("a cancellation runs the hooks registered when it comes, and at once for one registered after") {
  Cancellation cancel;
  int ran = 0;
  {
    auto ended = cancel.OnCancel([&] { ran += 100; });
  }
  auto live = cancel.OnCancel([&] { ran += 1; });
  CHECK_FALSE(cancel.cancelled());
  cancel.Cancel();
  cancel.Cancel();
  CHECK(cancel.cancelled());
  CHECK(ran == 1);
  auto late = cancel.OnCancel([&] { ran += 10; });
  CHECK(ran == 11);
}

}  // namespace
}  // namespace quorate
