#include "kiln/transforms/host_profile.h"

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
  std::mutex mutex;
  std::map<std::string, std::pair<long, double>> by_name; // calls, seconds

  ~Totals() {
    std::vector<std::pair<std::string, std::pair<long, double>>> rows(
        by_name.begin(), by_name.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) {
      return a.second.second > b.second.second;
    });
    std::fprintf(stderr, "| host time (KILN_HOST_PROFILE) | calls | ms | us per call |\n");
    std::fprintf(stderr, "| --- | --- | --- | --- |\n");
    for (auto& [name, t] : rows) {
      std::fprintf(stderr, "| %s | %ld | %.2f | %.2f |\n", name.c_str(),
                   t.first, t.second * 1e3, t.second * 1e6 / t.first);
    }
  }
};

Totals& totals() {
  static Totals t;
  return t;
}

} // namespace

bool host_profile_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_HOST_PROFILE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void host_profile_add(const char* name, double seconds) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto& row = t.by_name[name];
  ++row.first;
  row.second += seconds;
}

void host_profile_reset() {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.by_name.clear();
}

} // namespace kiln::detail
