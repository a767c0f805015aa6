// The disk caches' size limit: least recently used entries are removed
// after a compile adds one. Hits refresh an entry's modification time
// (touch_file), so "used" means read or written.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "kiln/backend/common/jit_disk.h"

namespace kiln::detail {

void touch_file(const std::string& path) {
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); // now; best effort
}

uint64_t cache_limit_bytes() {
  const char* v = std::getenv("KILN_CACHE_LIMIT_MB");
  if (v && *v) {
    char* end = nullptr;
    unsigned long long mb = std::strtoull(v, &end, 10);
    if (end && *end == '\0') return mb << 20;
  }
  return uint64_t(1024) << 20;
}

uint64_t evict_cache_entries(const std::string& dir,
                             const std::vector<std::string>& exts,
                             uint64_t limit) {
  if (limit == 0) return 0;
  struct Entry {
    int64_t newest = 0; // nanoseconds
    uint64_t bytes = 0;
    std::vector<std::string> files;
  };
  std::map<std::string, Entry> entries;
  uint64_t total = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    auto dot = name.find('.');
    if (dot == std::string::npos || dot == 0) continue;
    // Files still being written (write_file_atomic, the compilers) are
    // named tmp-*: never counted, never removed.
    if (name.compare(0, 4, "tmp-") == 0) continue;
    std::string ext = name.substr(dot + 1);
    if (std::find(exts.begin(), exts.end(), ext) == exts.end()) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    Entry& en = entries[name.substr(0, dot)];
    int64_t t = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    en.newest = std::max(en.newest, t);
    en.bytes += static_cast<uint64_t>(st.st_size);
    en.files.push_back(path);
    total += static_cast<uint64_t>(st.st_size);
  }
  ::closedir(d);
  if (total <= limit) return 0;
  std::vector<const Entry*> order;
  for (auto& [stem, en] : entries) order.push_back(&en);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->newest < b->newest;
  });
  uint64_t removed = 0;
  for (const Entry* en : order) {
    if (total - removed <= limit) break;
    for (auto& f : en->files) ::unlink(f.c_str());
    removed += en->bytes;
  }
  return removed;
}

} // namespace kiln::detail
