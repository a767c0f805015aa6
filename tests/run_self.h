// Runs this test binary again on one test in a child process, for tests of
// what a new process sees (disk caches). The child inherits the environment
// with the given entries replacing those of the same name, and without
// GoogleTest's sharding variables: a sharded parent must not filter the
// child's one test away.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace kiln::test {

/** The child's exit status (-1 when it could not run or did not exit). */
inline int run_self(const std::string& filter,
                    const std::vector<std::string>& env) {
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> envs = env;
  for (char** e = environ; *e; ++e) {
    std::string s = *e, name = name_of(s);
    bool drop = name.rfind("GTEST_SHARD", 0) == 0 ||
                name == "GTEST_TOTAL_SHARDS";
    for (auto& mine : env) drop |= name_of(mine) == name;
    if (!drop) envs.push_back(s);
  }
  std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  std::string f = "--gtest_filter=" + filter;
  std::vector<char*> envp, argv = {exe.data(), f.data(), nullptr};
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc =
      ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace kiln::test
