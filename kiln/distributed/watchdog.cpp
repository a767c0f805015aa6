#include "kiln/distributed/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// A thread's blocking call, watched without a lock or an allocation: the
// owner writes the fields, then publishes the start time; the watchdog reads
// the fields between two equal readings of it.
struct Slot {
  std::atomic<const char*> what{nullptr};
  std::atomic<int> rank{0}, size{0}, peer{0};
  std::atomic<int64_t> start{0}; // steady-clock ticks; 0: no call
};

struct Watchdog {
  std::mutex mutex;
  std::map<uint64_t, Call> calls;
  std::vector<Slot*> slots; // one per thread that has made a blocking call
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
      for (Slot* slot : slots) {
        int64_t start = slot->start.load(std::memory_order_acquire);
        if (start == 0) continue;
        Call c{slot->what.load(), slot->rank.load(), slot->size.load(),
               slot->peer.load(), Clock::time_point(Clock::duration(start)),
               nullptr};
        if (slot->start.load(std::memory_order_acquire) != start) continue;
        if (now - c.start > limit) fire(c, limit, "");
      }
    }
  }

  void start_thread() { // with mutex held
    if (started) return;
    std::thread([this] { run(); }).detach();
    started = true;
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog; // lives past exit: the thread uses it
  return *w;
}

uint64_t add(Call c) {
  auto& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.start_thread();
  uint64_t id = w.next++;
  w.calls.emplace(id, std::move(c));
  return id;
}

// This thread's slot, registered with the watchdog on first use and removed
// when the thread ends.
struct ThreadSlot {
  Slot slot;
  ThreadSlot() {
    auto& w = watchdog();
    std::lock_guard<std::mutex> lock(w.mutex);
    w.start_thread();
    w.slots.push_back(&slot);
  }
  ~ThreadSlot() {
    auto& w = watchdog();
    std::lock_guard<std::mutex> lock(w.mutex);
    w.slots.erase(std::find(w.slots.begin(), w.slots.end(), &slot));
  }
};

Slot& thread_slot() {
  thread_local ThreadSlot s;
  return s.slot;
}

} // namespace

// A blocking call costs a clock read and a few stores: a 1 KB all_sum over
// shared memory takes about 1.5 us, and a lock with a map entry per call
// was a tenth of that. A nested watch (not made today) takes the map.
Watch::Watch(const char* what, int rank, int size, int peer) {
  Slot& s = thread_slot();
  auto now = Clock::now();
  if (s.start.load(std::memory_order_relaxed) != 0) {
    id_ = add(Call{what, rank, size, peer, now, nullptr});
    return;
  }
  s.what.store(what, std::memory_order_relaxed);
  s.rank.store(rank, std::memory_order_relaxed);
  s.size.store(size, std::memory_order_relaxed);
  s.peer.store(peer, std::memory_order_relaxed);
  s.start.store(std::max<int64_t>(1, now.time_since_epoch().count()),
                std::memory_order_release);
  id_ = kInSlot;
}

Watch::~Watch() {
  if (id_ == kInSlot) {
    thread_slot().start.store(0, std::memory_order_release);
    return;
  }
  auto& w = watchdog();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.calls.erase(id_);
}

void watch_queued(const char* what, int rank, int size, int peer, Poll poll) {
  add(Call{what, rank, size, peer, Clock::now(), std::move(poll)});
}

} // namespace kiln::distributed::detail
