#include "kiln/distributed/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "kiln/distributed/communicator.h"

namespace kiln::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  const char* what;
  int rank, size, peer;
  Clock::time_point start;
  Poll poll; // empty for a blocking call, which its Watch removes
};

struct Watchdog {
  std::mutex mutex;
  std::map<uint64_t, Call> calls;
  uint64_t next = 0;
  bool started = false;

  // Past the timeout the process ends; no engine call from this thread
  // (the engine is busy in the watched call and may not allow a second).
  [[noreturn]] static void fire(const Call& c, Clock::duration limit,
                                const std::string& error) {
    std::ostringstream os;
    os << "[" << c.what << "] rank " << c.rank << " of " << c.size;
    if (!error.empty()) {
      os << ": " << error;
    } else {
      os << " waited "
         << std::chrono::duration_cast<std::chrono::milliseconds>(limit)
                    .count() / 1000.0
         << " s for ";
      if (c.peer >= 0) {
        os << "rank " << c.peer;
      } else {
        os << "the group";
      }
      os << " (KILN_DISTRIBUTED_TIMEOUT): a peer died, never arrived or runs "
            "another op";
    }
    os << "; ending this process.\n";
    std::string m = os.str();
    std::fflush(stdout);
    std::fputs(m.c_str(), stderr);
    std::fflush(stderr);
    _exit(1);
  }

  void run() {
    auto limit = timeout();
    auto period = std::clamp<Clock::duration>(limit / 10,
                                              std::chrono::milliseconds(10),
                                              std::chrono::milliseconds(500));
    for (;;) {
      std::this_thread::sleep_for(period);
      std::lock_guard<std::mutex> lock(mutex);
      auto now = Clock::now();
      for (auto it = calls.begin(); it != calls.end();) {
        const Call& c = it->second;
        std::string error;
        int state = c.poll ? c.poll(error) : 0;
        if (state < 0) fire(c, limit, error);
        if (state > 0) {
          it = calls.erase(it);
          continue;
        }
        if (now - c.start > limit) fire(c, limit, "");
        ++it;
      }
    }
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog; // lives past exit: the thread uses it
  return *w;
}

uint64_t add(Call c) {
  auto& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (!w.started) {
    std::thread([&w] { w.run(); }).detach();
    w.started = true;
  }
  uint64_t id = w.next++;
  w.calls.emplace(id, std::move(c));
  return id;
}

} // namespace

Watch::Watch(const char* what, int rank, int size, int peer)
    : id_(add(Call{what, rank, size, peer, Clock::now(), nullptr})) {}

Watch::~Watch() {
  auto& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.calls.erase(id_);
}

void watch_queued(const char* what, int rank, int size, int peer, Poll poll) {
  add(Call{what, rank, size, peer, Clock::now(), std::move(poll)});
}

} // namespace kiln::distributed::detail
