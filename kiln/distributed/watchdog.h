// Blocking collectives are the fast ones in MPI and the only ones in NCCL,
// and a blocked call cannot raise. So a call that may wait for its peers is
// watched: one thread per process wakes a few times per timeout and, when
// a call has waited longer than KILN_DISTRIBUTED_TIMEOUT, prints which op
// and rank waited for whom and ends the process, which ends the job (the
// launcher stops every rank when one exits with an error). A watch costs
// a clock read and a few stores; the thread never calls the engine's
// collectives.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln::distributed::detail {

class Watch {
 public:
  /** Watches one call of op `what` on rank `rank` of a group of `size`,
   *  waiting for `peer` (-1: the group). `what` must outlive the watch. */
  Watch(const char* what, int rank, int size, int peer);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  static constexpr uint64_t kInSlot = ~uint64_t(0); // the thread's slot
  uint64_t id_;
};

/** What the watchdog asks of work queued on a device: 1 when it is done,
 *  0 while it runs, -1 when the engine reports an error (in `error`). */
using Poll = std::function<int(std::string& error)>;

/** Watches queued work of op `what` until poll() says it is done: past the
 *  timeout, or on an error, the process ends as for a blocked call. */
void watch_queued(const char* what, int rank, int size, int peer, Poll poll);

} // namespace kiln::distributed::detail
