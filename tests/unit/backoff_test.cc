#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "quorate/clock.h"
#include "testing/fake_clock.h"

namespace quorate {

using std::chrono::milliseconds;

TEST_CASE("Backoff doubles up to its cap, ends its last wait at the deadline, then says so") {
  FakeClock clock;
  auto start = clock.Now();
  Backoff backoff(clock, milliseconds(250), milliseconds(1000), start + milliseconds(2600));
  std::vector<long> waited;
  Backoff::Outcome outcome;
  for (;;) {
    auto before = clock.Now();
    outcome = backoff.Wait();
    if (outcome != Backoff::kRetry) break;
    waited.push_back(std::chrono::duration_cast<milliseconds>(clock.Now() - before).count());
  }
  CHECK(outcome == Backoff::kDeadline);
  // 250 + 500 + 1000 = 1750, then the last wait is cut to the deadline (850 ms).
  CHECK(waited == std::vector<long>{250, 500, 1000, 850});
  CHECK(clock.Now() == start + milliseconds(2600));

  backoff.Reset();
  CHECK(backoff.next() == milliseconds(250));
}

TEST_CASE("Backoff returns at once when its stop fd is readable, and without a deadline it never expires") {
  FakeClock clock;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  Backoff backoff(clock, milliseconds(100), milliseconds(400), Clock::kNever, fds[0]);
  for (int i = 0; i < 10; ++i) CHECK(backoff.Wait() == Backoff::kRetry);
  CHECK(backoff.next() == milliseconds(400));
  auto before = clock.Now();
  clock.At(before + milliseconds(150), [&] { REQUIRE(write(fds[1], "x", 1) == 1); });
  CHECK(backoff.Wait() == Backoff::kStopped);
  CHECK(clock.Now() == before + milliseconds(150));
  CHECK(backoff.Wait() == Backoff::kStopped);  // still pending: every later wait sees it too
  close(fds[0]);
  close(fds[1]);
}

}  // namespace quorate
