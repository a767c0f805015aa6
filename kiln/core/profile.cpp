#include "kiln/core/profile.h"

#include "kiln/core/array.h"
#include "kiln/core/env.h"
#include "kiln/core/primitive.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::detail {

namespace {

struct Totals {
  const char* title;
  std::mutex mutex;
  std::map<std::string, std::pair<long, double>> by_name; // calls, seconds

  explicit Totals(const char* t) : title(t) {}
  void print() {
    std::lock_guard<std::mutex> lock(mutex);
    if (by_name.empty()) return;
    std::vector<std::pair<std::string, std::pair<long, double>>> rows(
        by_name.begin(), by_name.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) {
      return a.second.second > b.second.second;
    });
    std::fprintf(stderr, "| %s | calls | ms | us per call |\n", title);
    std::fprintf(stderr, "| --- | --- | --- | --- |\n");
    for (auto& [name, t] : rows) {
      std::fprintf(stderr, "| %s | %ld | %.2f | %.2f |\n", name.c_str(),
                   t.first, t.second * 1e3, t.second * 1e6 / t.first);
    }
  }
};

struct Tables {
  Totals gpu{"GPU time (KILN_GPU_PROFILE)"};
  Totals host{"host time (KILN_HOST_PROFILE)"};
};

/** Never destroyed: timers run in other statics' destructors at exit (the
 *  CUDA allocator freeing its blocks), after a static table would be gone.
 *  The tables are printed by an exit handler instead. */
Tables& tables() {
  static Tables* t = [] {
    auto* made = new Tables;
    std::atexit([] {
      tables().gpu.print();
      tables().host.print();
    });
    return made;
  }();
  return *t;
}

Totals& host_totals() { return tables().host; }
Totals& gpu_totals() { return tables().gpu; }

void add(Totals& t, const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(t.mutex);
  auto& row = t.by_name[name];
  ++row.first;
  row.second += seconds;
}

// computed: a has just been evaluated (the node being labelled), so its
// layout is known although its status is not yet set.
void describe(std::string& out, const array& a, bool computed = false) {
  out += dtype_name(a.dtype());
  out += '[';
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (d) out += ',';
    out += std::to_string(a.shape(d));
  }
  out += ']';
  if (!computed && !a.is_available()) return;
  bool broadcast = false;
  for (size_t d = 0; d < a.ndim(); ++d) {
    broadcast |= a.strides()[d] == 0 && a.shape(d) > 1;
  }
  out += a.flags().row_contiguous ? 'c'
         : a.flags().col_contiguous ? 'f'
         : broadcast ? 'b'
                     : 's';
}

} // namespace

bool host_profile_enabled() {
  static const bool on = env::flag("KILN_HOST_PROFILE", false);
  return on;
}

void host_profile_add(const char* name, double seconds) {
  add(host_totals(), name, seconds);
}

void host_profile_reset() {
  for (Totals* t : {&host_totals(), &gpu_totals()}) {
    std::lock_guard<std::mutex> lock(t->mutex);
    t->by_name.clear();
  }
}

bool gpu_profile_enabled() {
  static const bool on = env::flag("KILN_GPU_PROFILE", false);
  return on;
}

void gpu_profile_add(const std::string& label, double seconds) {
  add(gpu_totals(), label, seconds);
}

std::string gpu_profile_label(const array& node) {
  std::string s = node.primitive().name();
  const char* sep = " ";
  for (const auto& in : node.inputs()) {
    s += sep;
    describe(s, in);
    sep = ", ";
  }
  s += " -> ";
  describe(s, node, true);
  return s;
}

} // namespace kiln::detail
