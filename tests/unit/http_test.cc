#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "quorate/http.h"
#include "testing/fake_clock.h"
#include "quorate/json.h"

namespace quorate {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// A server on 127.0.0.1, port 0, that reads each request's head and then runs `serve` on the
// connection: raw bytes, so it can answer as no HTTP library would.
class RawServer {
 public:
  explicit RawServer(std::function<void(int fd)> serve) : serve_(std::move(serve)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] {
      while (true) {
        int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        connections_.emplace_back([this, fd] {
          std::string head;
          char c;
          while (head.find("\r\n\r\n") == std::string::npos && read(fd, &c, 1) == 1) head += c;
          serve_(fd);
          close(fd);
        });
      }
    });
  }
  ~RawServer() {
    shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (auto& t : connections_) t.join();
    close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<void(int fd)> serve_;
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

// False once the client has gone: every serving loop ends with the call it serves.
bool Send(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

void Dribble(int fd, const std::string& bytes) {
  for (char c : bytes) {
    if (!Send(fd, std::string(1, c))) return;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

HttpRequest Get(const RawServer& server, milliseconds timeout = milliseconds(600)) {
  HttpRequest request;
  request.base_url = server.url();
  request.target = "/members";
  request.timeout = timeout;
  request.max_body = 1 << 20;
  return request;
}

}  // namespace

TEST_CASE("http: a whole answer comes back with its status, headers and body") {
  RawServer server([](int fd) {
    Send(fd, "HTTP/1.1 404 Not Found\r\nX-Etcd-Cluster-Id: 2a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope!");
  });
  HttpResult r = HttpSend(Get(server));
  REQUIRE_MESSAGE(r.ok(), r.why);
  CHECK(r.response.status == 404);
  CHECK(r.response.Header("x-etcd-cluster-id") == "2a");
  CHECK(r.response.body == "nope!");
  CHECK(r.ToStatus("GET x").ok());
}

TEST_CASE("http: a throttled call waits as the answer asks, or backs off, and gives the first real answer") {
  std::atomic<int> calls{0};
  RawServer server([&calls](int fd) {
    int n = ++calls;
    if (n == 1) {
      Send(fd, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    } else if (n <= 3) {
      const std::string body = "<Response><Errors><Error><Code>RequestLimitExceeded</Code></Error></Errors></Response>";
      Send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\nConnection: close\r\n\r\n" + body);
    } else {
      Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    }
  });
  FakeClock clock;
  const auto start = clock.Now();
  int signed_tries = 0;
  HttpResult r = HttpSendThrottled(
      Get(server), clock,
      [](const HttpResponse& a) { return a.body.find("<Code>RequestLimitExceeded</Code>") != std::string::npos; },
      [&signed_tries](HttpRequest&) { ++signed_tries; });
  REQUIRE_MESSAGE(r.ok(), r.why);
  CHECK(r.response.status == 200);
  CHECK(calls == 4);
  CHECK(signed_tries == 4);
  // 3 s as asked, then 200 ms and 400 ms of backoff for the two throttles that named no wait.
  CHECK(clock.Now() - start == milliseconds(3600));
}

TEST_CASE("http: a call throttled for ever ends, with the throttle as its answer") {
  RawServer server([](int fd) {
    Send(fd, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  });
  FakeClock clock;
  HttpResult r = HttpSendThrottled(Get(server), clock);
  REQUIRE_MESSAGE(r.ok(), r.why);
  CHECK(r.response.status == 503);
  CHECK(RetryAfter(r.response) == std::chrono::seconds(1));
  HttpResponse dated;
  dated.headers = {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}};
  CHECK(!RetryAfter(dated).has_value());
}

TEST_CASE("http: a dribbled body or dribbled headers end at the deadline, as a partial answer") {
  for (bool headers : {false, true}) {
    INFO("dribbled ", (headers ? "headers" : "body"));
    RawServer server([headers](int fd) {
      if (headers) {
        Dribble(fd, "HTTP/1.1 200 OK\r\nX-Slow: " + std::string(10000, 'a'));
      } else {
        Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n");
        Dribble(fd, std::string(10000, '['));
      }
    });
    auto start = Steady::now();
    HttpResult r = HttpSend(Get(server));
    CHECK(Steady::now() - start < std::chrono::seconds(10));
    CHECK(r.failure == HttpFailure::kPartial);
    CHECK_MESSAGE(r.why == "the answer was not whole within 600 ms (sent too slowly)", r.why);
    CHECK(r.ToStatus("GET x").IsUnavailable());
  }
}

TEST_CASE("http: the caller's deadline ends the call when it comes before the timeout") {
  RawServer server([](int fd) {
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n");
    Dribble(fd, std::string(10000, '['));
  });
  HttpRequest request = Get(server, milliseconds(60000));
  request.deadline = Steady::now() + milliseconds(300);
  auto start = Steady::now();
  HttpResult r = HttpSend(request);
  CHECK(Steady::now() - start < std::chrono::seconds(10));
  CHECK(r.failure == HttpFailure::kPartial);
}

TEST_CASE("http: an endless chunked body stops at the cap, and a body that says it is too large is not read") {
  std::atomic<size_t> sent{0};
  RawServer endless([&sent](int fd) {
    Send(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "10000\r\n" + std::string(0x10000, '[') + "\r\n";
    while (Send(fd, chunk)) sent += chunk.size();
  });
  HttpResult r = HttpSend(Get(endless, milliseconds(10000)));
  CHECK(r.failure == HttpFailure::kTooLarge);
  CHECK(r.why == "its body is larger than the 1048576 bytes allowed");
  CHECK(r.response.body.size() <= size_t{1} << 20);

  RawServer huge([](int fd) { Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n[[[["); });
  r = HttpSend(Get(huge));
  CHECK(r.failure == HttpFailure::kTooLarge);
  CHECK(r.why == "its body would be 10000000000 bytes, more than the 1048576 allowed");
}

TEST_CASE("http: silence and a closed port are no answer and no connection") {
  RawServer silent([](int fd) {
    char c;
    while (read(fd, &c, 1) == 1) {
    }
  });
  auto start = Steady::now();
  HttpResult r = HttpSend(Get(silent, milliseconds(300)));
  CHECK(Steady::now() - start < std::chrono::seconds(10));
  CHECK(r.failure == HttpFailure::kNoAnswer);
  CHECK_MESSAGE(r.why == "no answer (connection closed, or silent for 300 ms)", r.why);

  HttpRequest refused;
  refused.base_url = "http://127.0.0.1:1";
  refused.target = "/";
  refused.timeout = milliseconds(300);
  refused.max_body = 10;
  r = HttpSend(refused);
  CHECK(r.failure == HttpFailure::kNoConnection);
  CHECK(r.ToStatus("GET http://127.0.0.1:1/").message() == "GET http://127.0.0.1:1/: cannot connect (refused or unreachable)");
}

TEST_CASE("http: a body without a length that the deadline cuts short is not taken for the whole answer") {
  // Headers with neither Content-Length nor chunking, a piece of the body, then nothing until the
  // client gives up: read-until-close would see the watchdog's shutdown as the server's close.
  RawServer server([](int fd) {
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"items\":[");
    pollfd gone{fd, POLLIN, 0};
    poll(&gone, 1, 10000);
  });
  auto start = Steady::now();
  HttpResult r = HttpSend(Get(server, milliseconds(500)));
  CHECK(Steady::now() - start < std::chrono::seconds(10));
  CHECK_MESSAGE(r.failure == HttpFailure::kPartial, r.why, " body '", r.response.body, "'");
  // Cut by the watchdog it reads as whole to httplib (cut short after its 10 bytes); on a loaded
  // machine httplib's own read timeout, the same budget, may end it first (sent too slowly).
  CHECK_MESSAGE(r.why.starts_with("the answer was not whole within 500 ms ("), r.why);
  CHECK(r.ToStatus("GET x").IsUnavailable());

  // Closed by the server, the same body is whole: that is how such a body ends.
  RawServer closes([](int fd) { Send(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"items\":[]}"); });
  r = HttpSend(Get(closes));
  REQUIRE_MESSAGE(r.ok(), r.why);
  CHECK(r.response.body == "{\"items\":[]}");
}

TEST_CASE("http: a request whose address, target or header holds CR, LF or NUL is never sent, the secret unnamed") {
  std::atomic<int> served{0};
  RawServer server([&served](int fd) {
    ++served;
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  });
  const std::string smuggled = "\r\n\r\nGET /steal HTTP/1.1\r\nHost: evil";
  struct Case {
    const char* what;
    std::function<void(HttpRequest&)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"a bearer token with CR LF", [&](HttpRequest& r) { r.headers = {{"Authorization", "Bearer s3cret" + smuggled}}; },
       "header Authorization holds a CR, LF, NUL or other control byte"},
      {"a header value with NUL",
       [](HttpRequest& r) { r.headers = {{"X-Token", std::string("s3cret\0tail", 11)}}; },
       "header X-Token holds"},
      {"a header value with a bare LF", [](HttpRequest& r) { r.headers = {{"X-Token", "s3cret\nX-Evil: 1"}}; },
       "header X-Token holds"},
      {"a header name with CR LF", [](HttpRequest& r) { r.headers = {{"X-A\r\nX-Evil", "1"}}; },
       "is not an HTTP token"},
      {"a target with CR LF (a next page's link)", [&](HttpRequest& r) { r.target = "/list?page=2 HTTP/1.1" + smuggled; },
       "the request target is empty or holds a space or a control byte"},
      {"a target with NUL", [](HttpRequest& r) { r.target = std::string("/list\0/x", 8); }, "the request target"},
      {"a target with a space", [](HttpRequest& r) { r.target = "/a b"; }, "the request target"},
      {"a host with CR LF", [&](HttpRequest& r) { r.base_url += smuggled; }, "the server's address holds"},
      {"a method with CR LF", [](HttpRequest& r) { r.method = "GET /x HTTP/1.1\r\n"; }, "the method is not"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    HttpRequest request = Get(server);
    c.spoil(request);
    HttpResult r = HttpSend(request);
    CHECK(r.failure == HttpFailure::kUnsafeRequest);
    CHECK_MESSAGE(r.why.find(c.says) != std::string::npos, r.why);
    CHECK_MESSAGE(r.why.find("s3cret") == std::string::npos, r.why);
    CHECK_MESSAGE(r.why.find("evil") == std::string::npos, r.why);
    CHECK(r.ToStatus("GET x").IsUnavailable());
  }
  CHECK(served == 0);
  // A tab is allowed in a value (RFC 9110), and the same request without the bytes goes out.
  HttpRequest fine = Get(server);
  fine.headers = {{"Authorization", "Bearer\ts3cret"}};
  HttpResult r = HttpSend(fine);
  CHECK_MESSAGE(r.ok(), r.why);
  CHECK(served == 1);
}

TEST_CASE("foreign JSON: nesting past the cap is refused without recursion, garbage is named") {
  CHECK(ParseForeignJson(R"({"a":[1,{"b":null}]})").ok());
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  auto refused = ParseForeignJson(deep);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "JSON nested deeper than 64 levels");
  CHECK(ParseForeignJson(std::string(64, '[') + std::string(64, ']')).ok());
  // Nothing of the text is quoted: an answer from outside may hold anything, a secret too.
  CHECK(ParseForeignJson("<html>proxy</html>").status().message() == "not JSON (18 bytes)");
  CHECK(ParseForeignJson("").status().message() == "not JSON (empty)");
}

}  // namespace quorate
