#include "kiln/core/env.h"

#include <cstdlib>

namespace kiln::env {

std::string value(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool flag(const char* name, bool fallback) {
  std::string v = value(name);
  return v.empty() ? fallback : v != "0";
}

int debug_level() {
  static const int level = std::atoi(value("KILN_DEBUG").c_str());
  return level;
}

} // namespace kiln::env
