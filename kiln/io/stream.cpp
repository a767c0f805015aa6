#include "kiln/io/stream.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace kiln::io {

namespace {

std::string os_error() { return std::strerror(errno); }

} // namespace

void Reader::read(void* dst, size_t n, const std::string& what) {
  auto* out = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    size_t k = read_some(out + got, n - got);
    if (k == 0) break;
    got += k;
  }
  position_ += got;
  if (got < n) {
    throw std::runtime_error("[load] " + label() + " ends early: " + what +
                             " needs " + std::to_string(n) +
                             " bytes but only " + std::to_string(got) +
                             " are left (a truncated or corrupt file).");
  }
}

std::string Reader::read_string(size_t n, const std::string& what) {
  constexpr size_t kChunk = 1 << 20;
  std::string out;
  while (out.size() < n) {
    size_t k = std::min(kChunk, n - out.size());
    size_t at = out.size();
    out.resize(at + k);
    read(out.data() + at, k, what);
  }
  return out;
}

void Reader::skip(size_t n, const std::string& what) {
  std::vector<char> scratch(std::min<size_t>(n, 1 << 16));
  while (n > 0) {
    size_t k = std::min(n, scratch.size());
    read(scratch.data(), k, what);
    n -= k;
  }
}

std::optional<size_t> Reader::remaining() const {
  auto total = size();
  if (!total) return std::nullopt;
  return *total > position_ ? *total - position_ : 0;
}

FileReader::FileReader(const std::string& path)
    : path_(path), file_(std::fopen(path.c_str(), "rb")), size_(0) {
  if (!file_) {
    throw std::runtime_error("[load] cannot open " + path +
                             " for reading: " + os_error() + ".");
  }
  struct stat st;
  if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(file_);
    throw std::runtime_error("[load] " + path + " is not a regular file.");
  }
  size_ = static_cast<size_t>(st.st_size);
}

FileReader::~FileReader() { std::fclose(file_); }

size_t FileReader::read_some(void* dst, size_t n) {
  size_t k = std::fread(dst, 1, n, file_);
  if (k == 0 && std::ferror(file_)) {
    throw std::runtime_error("[load] reading " + path_ +
                             " failed: " + os_error() + ".");
  }
  return k;
}

FileWriter::FileWriter(const std::string& path)
    : path_(path), file_(std::fopen(path.c_str(), "wb")) {
  if (!file_) {
    throw std::runtime_error("[save] cannot open " + path +
                             " for writing: " + os_error() + ".");
  }
}

FileWriter::~FileWriter() {
  if (file_) std::fclose(file_);
}

void FileWriter::write(const void* src, size_t n) {
  if (n > 0 && std::fwrite(src, 1, n, file_) != n) {
    throw std::runtime_error("[save] writing " + path_ +
                             " failed: " + os_error() + ".");
  }
}

void FileWriter::close() {
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0) {
    throw std::runtime_error("[save] writing " + path_ +
                             " failed: " + os_error() + ".");
  }
}

void FileWriter::discard() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::remove(path_.c_str());
}

void write_file(const std::string& path,
                const std::function<void(Writer&)>& write) {
  FileWriter out(path);
  try {
    write(out);
    out.close();
  } catch (...) {
    out.discard();
    throw;
  }
}

} // namespace kiln::io
