#include "testing/fifo_trap.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <future>
#include <thread>

namespace quorate {

bool MakeFifo(const std::string& path) { return ::mkfifo(path.c_str(), 0600) == 0; }

bool FinishesWithin(std::chrono::milliseconds limit, const std::string& fifo, const std::function<void()>& read) {
  std::packaged_task<void()> task(read);
  std::future<void> done = task.get_future();
  std::thread reader(std::move(task));
  bool in_time = done.wait_for(limit) == std::future_status::ready;
  // A writer that opens and closes at once lets a blocked open return and its read see the end.
  while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
  }
  reader.join();
  done.get();
  return in_time;
}

}  // namespace quorate
