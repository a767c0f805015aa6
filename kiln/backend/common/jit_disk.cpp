#include "kiln/backend/common/jit_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "kiln/core/env.h"

namespace kiln::detail {

namespace {

constexpr char trailer_magic[8] = {'K', 'I', 'L', 'N', 'J', 'I', 'T', '1'};
constexpr size_t trailer_size = 16;

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return static_cast<bool>(f);
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string parent_of(const std::string& path) {
  auto p = path.find_last_of('/');
  if (p == std::string::npos) return ".";
  return p == 0 ? "/" : path.substr(0, p);
}

} // namespace

uint64_t jit_hash(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string jit_digest(const std::string& s) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(jit_hash(s, 1)),
                static_cast<unsigned long long>(jit_hash(s, 2)));
  return buf;
}

std::string check_private_dir(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return std::string("cannot stat it: ") + std::strerror(errno);
  }
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::getuid()) return "it is owned by another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return "it is writable by group or others";
  }
  if (::access(path.c_str(), R_OK | W_OK | X_OK) != 0) {
    return "it is not readable and writable";
  }
  return "";
}

std::string default_cache_dir() {
  std::string dir = env::value("KILN_CACHE_DIR");
  if (!dir.empty() && dir[0] != '/') {
    // Absolute, so the paths handed to the compiler and dlopen are paths.
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd))) dir = std::string(cwd) + "/" + dir;
  }
  if (!dir.empty()) return dir;
  std::string xdg = env::value("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/kiln";
  std::string home = env::value("HOME");
  if (home.empty()) {
    if (auto* pw = ::getpwuid(::getuid())) home = pw->pw_dir ? pw->pw_dir : "";
  }
  if (home.empty()) return "";
  return home + "/.cache/kiln";
}

std::string make_private_dir(const std::string& path) {
  if (path.empty()) return "no directory given";
  // Missing parents are created private too; existing ones are left alone.
  struct stat st;
  std::string parent = parent_of(path);
  if (parent != path && ::stat(parent.c_str(), &st) != 0) {
    std::string why = make_private_dir(parent);
    if (!why.empty() && ::stat(parent.c_str(), &st) != 0) return why;
  }
  if (::mkdir(path.c_str(), 0700) == 0) {
    // The umask may have removed bits we need; never adds any.
    ::chmod(path.c_str(), 0700);
  } else if (errno != EEXIST) {
    return std::string("cannot create it: ") + std::strerror(errno);
  }
  return check_private_dir(path);
}

std::string make_temp_dir() {
  std::string base = env::value("TMPDIR");
  if (base.empty()) base = "/tmp";
  std::vector<char> tmpl(base.begin(), base.end());
  const char* suffix = "/kiln-jit-XXXXXX";
  tmpl.insert(tmpl.end(), suffix, suffix + std::strlen(suffix) + 1);
  if (::mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl.data();
}

std::string make_temp_file(const std::string& dir, const std::string& prefix,
                           const std::string& suffix) {
  std::string t = dir + "/" + prefix + "XXXXXX" + suffix;
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  int fd = ::mkstemps(buf.data(), static_cast<int>(suffix.size()));
  if (fd < 0) return "";
  ::close(fd);
  return buf.data();
}

bool write_file_atomic(const std::string& path, const std::string& data) {
  std::string t = parent_of(path) + "/tmp-XXXXXX";
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0) return false;
  bool ok = write_all(fd, data.data(), data.size());
  ok = (::close(fd) == 0) && ok;
  if (ok) ok = ::rename(buf.data(), path.c_str()) == 0;
  if (!ok) ::unlink(buf.data());
  return ok;
}

bool seal_library(const std::string& path) {
  std::string data;
  if (!read_file(path, data)) return false;
  uint64_t h = jit_hash(data);
  char trailer[trailer_size];
  std::memcpy(trailer, trailer_magic, 8);
  std::memcpy(trailer + 8, &h, 8);
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write_all(fd, trailer, trailer_size);
  return (::close(fd) == 0) && ok;
}

bool library_intact(const std::string& path) {
  std::string data;
  if (!read_file(path, data)) return false;
  // An ELF header is 64 bytes; anything shorter is truncated.
  if (data.size() < 64 + trailer_size) return false;
  if (std::memcmp(data.data(),
                  "\x7f"
                  "ELF",
                  4) != 0)
    return false;
  size_t body = data.size() - trailer_size;
  if (std::memcmp(data.data() + body, trailer_magic, 8) != 0) return false;
  uint64_t h;
  std::memcpy(&h, data.data() + body + 8, 8);
  return h == jit_hash(data.substr(0, body));
}

} // namespace kiln::detail
