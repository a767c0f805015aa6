#include "kiln/core/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::detail {

namespace {

thread_local bool inside_pool = false;

class ThreadPool {
 public:
  explicit ThreadPool(int n) {
    for (int i = 0; i < n; ++i) {
      workers_.emplace_back([this] { loop(); });
    }
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    inside_pool = true;
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::vector<std::thread> workers_;
  std::deque<std::function<void()>> tasks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
};

ThreadPool& pool() {
  static ThreadPool p(std::max(num_threads() - 1, 0));
  return p;
}

} // namespace

int num_threads() {
  static int n = [] {
    if (const char* s = std::getenv("KILN_NUM_THREADS")) {
      int v = std::atoi(s);
      if (v > 0) return v;
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(size_t n, size_t grain,
                  const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  size_t chunks =
      std::min<size_t>(num_threads(), n / std::max<size_t>(grain, 1));
  if (chunks <= 1 || inside_pool) {
    fn(0, n);
    return;
  }
  std::mutex m;
  std::condition_variable cv;
  size_t remaining = chunks - 1;
  std::exception_ptr error;
  size_t step = (n + chunks - 1) / chunks;
  for (size_t c = 1; c < chunks; ++c) {
    size_t b = c * step, e = std::min(n, b + step);
    pool().submit([&, b, e] {
      try {
        if (b < e) fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(m);
      if (--remaining == 0) cv.notify_one();
    });
  }
  bool was_inside = inside_pool;
  inside_pool = true; // nested loops in our own chunk run inline
  try {
    fn(0, std::min(n, step));
  } catch (...) {
    std::lock_guard<std::mutex> lock(m);
    error = std::current_exception();
  }
  inside_pool = was_inside;
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return remaining == 0; });
  if (error) std::rethrow_exception(error);
}

} // namespace kiln::detail
