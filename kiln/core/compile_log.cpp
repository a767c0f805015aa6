#include "kiln/core/compile_log.h"

#include <iostream>
#include <mutex>

#include "kiln/core/env.h"

namespace kiln::detail {

namespace {

std::mutex log_mutex;
std::vector<std::string>& log_lines() {
  static std::vector<std::string> lines;
  return lines;
}

} // namespace

void compile_log(int level, const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_lines().push_back(line);
  if (env::debug_level() >= level) {
    std::cerr << "[kiln compile] " << line << "\n";
  }
}

std::vector<std::string> compile_log_lines() {
  std::lock_guard<std::mutex> lock(log_mutex);
  return log_lines();
}

void clear_compile_log_lines() {
  std::lock_guard<std::mutex> lock(log_mutex);
  log_lines().clear();
}

} // namespace kiln::detail
