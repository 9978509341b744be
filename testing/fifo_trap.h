// A FIFO planted where quorate reads a file, for the tests that prove such a read is refused
// instead of waiting for a writer that never comes. Built only into the test binaries.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace quorate {

// Makes a FIFO at `path`; false (with errno set) when it cannot.
bool MakeFifo(const std::string& path);

// Runs `read` on another thread and waits up to `limit` for it. A reader still blocked then (the
// regression this guards against) is released by opening the FIFO at `fifo` for writing and
// closing it, so the test fails instead of hanging. True when `read` finished within `limit`.
bool FinishesWithin(std::chrono::milliseconds limit, const std::string& fifo, const std::function<void()>& read);

}  // namespace quorate
