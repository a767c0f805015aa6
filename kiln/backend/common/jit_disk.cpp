#include "kiln/backend/common/jit_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <map>
#include <mutex>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kiln/core/env.h"

namespace kiln::detail {

bool read_regular_file(const std::string& path, std::string& out) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a
  // link is refused; fstat: only a regular file is read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
      ssize_t r = ::read(fd, out.data() + got, out.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    ok = got == out.size();
  }
  ::close(fd);
  return ok;
}

namespace {

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

// The trailer: magic, then a SipHash-2-4 MAC of the body under the cache
// directory's key. Version 2: entries sealed with version 1's unkeyed hash
// are rebuilt.
constexpr char trailer_magic[8] = {'K', 'I', 'L', 'N', 'J', 'I', 'T', '2'};
constexpr size_t trailer_size = 16;
constexpr char key_file[] = "mac-key"; // no extension: eviction skips it

// SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit MAC.
uint64_t siphash(const unsigned char key[16], const char* data, size_t n) {
  auto load = [](const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v; // little-endian hosts only (x86-64, aarch64)
  };
  auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  uint64_t k0 = load(key), k1 = load(key + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  };
  auto absorb = [&](uint64_t m) {
    v3 ^= m;
    round(), round();
    v0 ^= m;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  size_t whole = n / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) absorb(load(p + i));
  unsigned char last[8] = {};
  std::memcpy(last, p + whole, n - whole);
  last[7] = static_cast<unsigned char>(n);
  absorb(load(last));
  v2 ^= 0xff;
  round(), round(), round(), round();
  return v0 ^ v1 ^ v2 ^ v3;
}

// The directory's 16-byte MAC key, created on first use (random, mode 0600,
// linked into place so that a concurrent creator never reads half a key).
bool directory_key(const std::string& dir, unsigned char key[16]) {
  static std::mutex mutex;
  static std::map<std::string, std::array<unsigned char, 16>> keys;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = keys.find(dir);
  if (it == keys.end()) {
    std::string path = dir + "/" + key_file, bytes;
    if (!read_regular_file(path, bytes)) {
      unsigned char fresh[16];
      if (::getrandom(fresh, 16, 0) != 16) return false;
      std::string tmp = make_temp_file(dir, "tmp-", "");
      if (tmp.empty()) return false;
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                write_all(fd, reinterpret_cast<char*>(fresh), 16);
      if (fd >= 0) ok = (::close(fd) == 0) && ok;
      // link() fails when another process made the key first: read theirs.
      if (ok) ::link(tmp.c_str(), path.c_str());
      ::unlink(tmp.c_str());
      if (!read_regular_file(path, bytes)) return false;
    }
    if (bytes.size() != 16) return false;
    it = keys.emplace(dir, std::array<unsigned char, 16>{}).first;
    std::memcpy(it->second.data(), bytes.data(), 16);
  }
  std::memcpy(key, it->second.data(), 16);
  return true;
}

// The trailer of body under the key of path's directory; "" without a key.
std::string trailer_for(const std::string& path, const std::string& body) {
  unsigned char key[16];
  if (!directory_key(parent_of(path), key)) return "";
  uint64_t mac = siphash(key, body.data(), body.size());
  std::string t(trailer_magic, 8);
  t.append(reinterpret_cast<const char*>(&mac), 8);
  return t;
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

std::string seal(const std::string& path, const std::string& body) {
  std::string t = trailer_for(path, body);
  return t.empty() ? "" : body + t;
}

bool seal_library(const std::string& path) {
  std::string data;
  if (!read_regular_file(path, data)) return false;
  std::string t = trailer_for(path, data);
  if (t.empty()) return false;
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool ok = write_all(fd, t.data(), trailer_size);
  return (::close(fd) == 0) && ok;
}

bool read_sealed(const std::string& path, std::string& body) {
  std::string data;
  if (!read_regular_file(path, data)) return false;
  // An ELF header is 64 bytes; anything shorter is truncated.
  if (data.size() < 64 + trailer_size ||
      std::memcmp(data.data(), "\x7f" "ELF", 4) != 0) {
    return false;
  }
  size_t n = data.size() - trailer_size;
  std::string t = trailer_for(path, data.substr(0, n));
  if (t.empty() || data.compare(n, trailer_size, t) != 0) return false;
  data.resize(n);
  body = std::move(data);
  return true;
}

bool library_intact(const std::string& path) {
  std::string body;
  return read_sealed(path, body);
}

} // namespace kiln::detail
