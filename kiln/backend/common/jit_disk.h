// The JIT disk caches (CPU and CUDA): a private directory, files written
// under unique names and renamed into place, and binaries sealed with a MAC
// under a per-directory random key, so that a truncated, corrupt or foreign
// file (one not built by kiln for this directory) is rebuilt, never loaded.
// Only regular files are read: a FIFO, device or symbolic link in an
// entry's place is ignored. A process of the same user can still replace a
// file between its check and its load; that is out of scope, as it is for
// any cache the user can write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::detail {

/** 64-bit FNV-1a, with a seed so two runs give a 128-bit digest. */
uint64_t jit_hash(const std::string& s, uint64_t seed = 0);

/** The 128-bit digest of s (jit_hash with seeds 1 and 2) as 32 hex digits:
 *  the disk caches' entry names. */
std::string jit_digest(const std::string& s);

/** "" when path is a real directory (not a symlink) owned by this user with
 *  no group or other write permission; otherwise why it is refused. */
std::string check_private_dir(const std::string& path);

/** $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. */
std::string default_cache_dir();

/** Creates path (mode 0700, parents too) and checks it. Returns "" when it
 *  is usable, else the reason it is refused. */
std::string make_private_dir(const std::string& path);

/** A fresh private directory under $TMPDIR (or /tmp), or "" on failure. */
std::string make_temp_dir();

/** A new empty file dir/<prefix>XXXXXX<suffix> (mkstemps); "" on failure. */
std::string make_temp_file(const std::string& dir, const std::string& prefix,
                           const std::string& suffix);

/** Writes data to path through a temporary file in the same directory and
 *  rename() (atomic on one filesystem). Returns false on failure. */
bool write_file_atomic(const std::string& path, const std::string& data);

/** Reads path into out when it is a regular file (not a link, FIFO or
 *  device; opening never blocks). */
bool read_regular_file(const std::string& path, std::string& out);

/** body with the trailer (magic and the MAC of body under the key of path's
 *  directory) appended, to be written to path; "" when the directory has no
 *  usable key. */
std::string seal(const std::string& path, const std::string& body);

/** Appends the trailer to a library that the compiler just wrote. */
bool seal_library(const std::string& path);

/** True when path is a regular file holding an ELF image whose trailer
 *  matches; body is then the image without the trailer. */
bool read_sealed(const std::string& path, std::string& body);

/** read_sealed without the body. */
bool library_intact(const std::string& path);

// ---- Size limit (jit_evict.cpp) ----

/** Marks a cache file used now (its modification time), so eviction keeps
 *  the entries a program still reads. */
void touch_file(const std::string& path);

/** The disk caches' size limit per directory in bytes: $KILN_CACHE_LIMIT_MB
 *  (0: unlimited), default 1024 MiB. */
uint64_t cache_limit_bytes();

/** Keeps dir's cache entries under limit bytes. An entry is every file
 *  named <stem>.<ext> with ext among exts; the least recently used entries
 *  (by the newest modification time of their files) go first, whole, until
 *  the rest fit. Other files, and tmp-* files being written, are left
 *  alone. Returns the bytes removed. */
uint64_t evict_cache_entries(const std::string& dir,
                             const std::vector<std::string>& exts,
                             uint64_t limit);

} // namespace kiln::detail
