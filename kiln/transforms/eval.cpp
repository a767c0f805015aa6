#include "kiln/transforms/eval.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kiln/core/primitive.h"
#include "kiln/transforms/graph_walk.h"
#include "kiln/core/profile.h"

namespace kiln {

namespace detail {

void Event::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [this] { return done; });
  if (error) std::rethrow_exception(error);
}

void Event::signal(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    error = e;
  }
  cv.notify_all();
}

namespace {

// One evaluation runs at a time; the graph is mutated (data set, nodes
// detached) only under this lock. Not recursive: no primitive evaluates a
// graph from inside its own evaluation (a fused region's ops or a fallback
// run by detail::run_nodes), so an eval on a thread that holds the lock is
// a bug, reported as one instead of deadlocking.
std::mutex& eval_mutex() {
  static std::mutex m;
  return m;
}

thread_local bool holds_eval_lock = false;

class EvalLock {
 public:
  EvalLock() {
    if (holds_eval_lock) {
      throw std::logic_error(
          "[eval] a graph was evaluated from inside an evaluation (a "
          "primitive's eval_cpu or eval_gpu called eval); primitives run "
          "the nodes they are defined by with detail::run_nodes.");
    }
    lock_ = std::unique_lock<std::mutex>(eval_mutex());
    holds_eval_lock = true;
  }
  ~EvalLock() {
    if (lock_.owns_lock()) holds_eval_lock = false;
  }
  void unlock() {
    holds_eval_lock = false;
    lock_.unlock();
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

} // namespace

namespace {

// A set of array ids (never 0) by open addressing, kept per thread and
// emptied after each walk (only the slots used are reset, so one large
// graph does not make later small ones pay for its table). The tape walk
// used std::unordered_set: a heap node per array, and bucket arrays whose
// allocation made glibc consolidate every small block freed since (the
// last step's graph); with the replay's slots, that was most of the host
// time of evaluating a large compiled graph.
class IdSet {
 public:
  /** True when id was not in the set. */
  bool insert(uintptr_t id) {
    if (2 * (used_.size() + 1) > slots_.size()) grow();
    size_t i = find(id);
    if (slots_[i] == id) return false;
    slots_[i] = id;
    used_.push_back(i);
    return true;
  }
  void clear() {
    for (size_t i : used_) slots_[i] = 0;
    used_.clear();
  }

 private:
  size_t find(uintptr_t id) const {
    size_t mask = slots_.size() - 1;
    // Descriptors are 16-byte aligned: drop those bits, then mix.
    size_t i = ((id >> 4) * 0x9E3779B97F4A7C15ull) >> 20 & mask;
    while (slots_[i] != 0 && slots_[i] != id) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<uintptr_t> old;
    old.swap(slots_);
    slots_.assign(std::max<size_t>(1024, 2 * old.size()), 0);
    used_.clear();
    for (uintptr_t id : old) {
      if (id == 0) continue;
      size_t i = find(id);
      slots_[i] = id;
      used_.push_back(i);
    }
  }
  std::vector<uintptr_t> slots_;
  std::vector<size_t> used_;
};

} // namespace

std::vector<array> build_tape(const std::vector<array>& outputs,
                              std::vector<std::shared_ptr<Event>>& pending) {
  std::vector<array> tape;
  // Not reentrant: no eval runs while a tape is built.
  thread_local IdSet visited;
  struct Clear {
    IdSet& set;
    ~Clear() { set.clear(); }
  } clear_at_exit{visited};
  auto enter = [&](const array& a) {
    if (!visited.insert(a.id())) return false;
    auto st = a.status();
    if (st == array::Status::available) return false;
    if (st == array::Status::scheduled) {
      pending.push_back(const_cast<array&>(a).event());
      return false;
    }
    if (!a.has_primitive()) {
      throw std::runtime_error("[eval] array has neither data nor primitive.");
    }
    return true;
  };
  auto leave = [&](array& a) {
    for (auto& s : a.siblings()) visited.insert(s.id());
    tape.push_back(std::move(a));
  };
  walk_graph(outputs, enter, leave);
  return tape;
}

namespace {

// gpu_streams collects the GPU streams that got work (bit = index % 64).
void eval_node(array& arr, uint64_t& gpu_streams) {
  auto outputs = arr.outputs();
  auto& p = arr.primitive();
  HostTimer timer(p.name());
  if (p.device() == Device::cpu) {
    p.eval_cpu(arr.inputs(), outputs);
  } else {
    bool profile = gpu_profile_enabled();
    if (profile) gpu::profile_begin(p.stream().index);
    p.eval_gpu(arr.inputs(), outputs);
    if (profile) gpu::profile_end(p.stream().index, gpu_profile_label(arr));
    gpu_streams |= uint64_t(1) << (p.stream().index % 64);
  }
  for (auto& o : outputs) o.set_status(array::Status::available);
  // Tracers keep their graph: a transformation still needs it.
  if (!arr.is_tracer()) arr.detach();
}

// Waits for the GPU streams that got work, so an evaluated array is
// computed wherever it lives (as MLX's eval).
void finish_gpu_work(uint64_t gpu_streams) {
  {
    HostTimer timer("eval: wait for the GPU");
    for (int i = 0; gpu_streams != 0; ++i, gpu_streams >>= 1) {
      if (gpu_streams & 1) gpu::synchronize(i);
    }
  }
  if (gpu_profile_enabled()) gpu::profile_collect();
}

// Runs the tape; returns once the GPU work it queued is done too.
void run_tape(std::vector<array>& tape) {
  uint64_t gpu_streams = 0;
  for (auto& slot : tape) {
    array arr = std::move(slot); // the tape lets go as it goes
    if (arr.is_available()) continue;
    eval_node(arr, gpu_streams);
  }
  finish_gpu_work(gpu_streams);
}

// One array whose inputs are all computed (a collective of a computed
// array, the last op of a step) is its own tape: its node runs without the
// walk, which costs more than a small op here. False, doing nothing, for
// any other graph.
bool eval_one_node(array& a) {
  if (a.status() != array::Status::unscheduled || !a.has_primitive()) {
    return false;
  }
  for (const array& in : a.inputs()) {
    if (!in.is_available()) return false;
  }
  uint64_t gpu_streams = 0;
  eval_node(a, gpu_streams);
  finish_gpu_work(gpu_streams);
  return true;
}

// A single background worker runs async evaluations in submission order.
class AsyncWorker {
 public:
  ~AsyncWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void submit(std::vector<array> tape, std::shared_ptr<Event> event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
      queue_.push_back({std::move(tape), std::move(event)});
      ++in_flight_;
    }
    cv_.notify_all();
  }

  /** Waits for every task; returns the first error of those that failed
   *  since the last call (each error is returned once). */
  std::exception_ptr wait_all() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return in_flight_ == 0; });
    return std::exchange(first_error_, nullptr);
  }

 private:
  struct Task {
    std::vector<array> tape;
    std::shared_ptr<Event> event;
  };

  void loop() {
    while (true) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      {
        EvalLock lock;
        // Keep handles so failed nodes can be reset after an error.
        std::vector<array> nodes = task.tape;
        try {
          run_tape(task.tape);
        } catch (...) {
          error = std::current_exception();
        }
        for (auto& a : nodes) {
          if (!a.is_available()) a.set_status(array::Status::unscheduled);
        }
      }
      task.event->signal(error);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error && !first_error_) first_error_ = error;
        --in_flight_;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_;
  std::deque<Task> queue_;
  size_t in_flight_ = 0;
  std::exception_ptr first_error_;
  bool stop_ = false;
  std::thread thread_;
};

AsyncWorker& async_worker() {
  static AsyncWorker w;
  return w;
}

} // namespace

void wait_for_async_evals() {
  if (auto error = async_worker().wait_all()) std::rethrow_exception(error);
}

} // namespace detail

void eval(std::vector<array> outputs) {
  detail::HostTimer timer("eval (all of it, GPU waits included)");
  while (true) {
    std::vector<std::shared_ptr<detail::Event>> pending;
    detail::EvalLock lock;
    if (outputs.size() == 1 && detail::eval_one_node(outputs[0])) return;
    std::vector<array> tape;
    {
      detail::HostTimer timer("eval: build the tape");
      tape = detail::build_tape(outputs, pending);
    }
    if (pending.empty()) {
      detail::run_tape(tape);
      return;
    }
    // Part of the graph is in flight in the background: let it land first,
    // then rebuild the tape over what is still missing.
    lock.unlock();
    tape.clear();
    for (auto& e : pending) e->wait();
  }
}

void async_eval(std::vector<array> outputs) {
  // As in MLX: a traced value evaluated in the background would escape the
  // transformation that owns it.
  if (detail::in_tracing()) {
    throw std::invalid_argument(
        "[async_eval] not allowed inside a function transformation (grad, "
        "vjp, jvp, vmap or compile).");
  }
  auto event = std::make_shared<detail::Event>();
  std::vector<array> tape;
  {
    std::vector<std::shared_ptr<detail::Event>> pending;
    detail::EvalLock lock;
    // Arrays already scheduled by an earlier async_eval run first anyway:
    // the worker handles tasks in order.
    tape = detail::build_tape(outputs, pending);
    for (auto& a : tape) {
      a.event() = event;
      for (auto& s : a.siblings()) s.event() = event;
      a.set_status(array::Status::scheduled);
      for (auto& s : a.siblings()) s.set_status(array::Status::scheduled);
    }
  }
  if (tape.empty()) return;
  detail::async_worker().submit(std::move(tape), std::move(event));
}

} // namespace kiln
