#include "kiln/io/stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
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
  auto left = remaining();
  if (left && n <= *left && seek_forward(n)) {
    position_ += n;
    return;
  }
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

bool FileReader::seek_forward(size_t n) {
  return fseeko(file_, static_cast<off_t>(n), SEEK_CUR) == 0;
}

std::shared_ptr<RandomAccessFile> FileReader::random_access() {
  if (!shared_) {
    int fd = fcntl(fileno(file_), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      throw std::runtime_error("[load] cannot share " + path_ + ": " +
                               os_error() + ".");
    }
    shared_ = std::make_shared<RandomAccessFile>(fd, path_, size_);
  }
  return shared_;
}

RandomAccessFile::RandomAccessFile(int fd, std::string path, size_t size)
    : fd_(fd), path_(std::move(path)), size_(size) {}

RandomAccessFile::~RandomAccessFile() { ::close(fd_); }

void RandomAccessFile::read_at(void* dst, size_t n, size_t offset,
                               const std::string& what) const {
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t k = pread(fd_, out + done, n - done,
                      static_cast<off_t>(offset + done));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      throw std::runtime_error(
          "[load] reading " + what + " of " + path_ + " (" +
          std::to_string(n) + " bytes at offset " + std::to_string(offset) +
          ") failed: " +
          (k < 0 ? os_error() : std::string("the file is shorter than when "
                                            "it was loaded")) +
          ".");
    }
    done += static_cast<size_t>(k);
  }
}

size_t FileReader::read_some(void* dst, size_t n) {
  size_t k = std::fread(dst, 1, n, file_);
  if (k == 0 && std::ferror(file_)) {
    throw std::runtime_error("[load] reading " + path_ +
                             " failed: " + os_error() + ".");
  }
  return k;
}

namespace {

// The file a path names, through symbolic links (so that saving to a link
// replaces its target, as writing through it did).
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
      realpath(path.c_str(), buf)) {
    return buf;
  }
  return path;
}

} // namespace

FileWriter::FileWriter(const std::string& path)
    : path_(resolved(path)), file_(nullptr) {
  // The new file takes the old one's permissions, or the default ones.
  struct stat st;
  bool existed = stat(path_.c_str(), &st) == 0;
  if (existed && !S_ISREG(st.st_mode)) {
    // A device or a pipe (/dev/null, a FIFO) is written as it is.
    file_ = std::fopen(path_.c_str(), "wb");
    if (!file_) {
      throw std::runtime_error("[save] cannot open " + path +
                               " for writing: " + os_error() + ".");
    }
    return;
  }
  temp_ = path_ + ".kiln-XXXXXX";
  int fd = mkstemp(temp_.data());
  if (fd < 0) {
    throw std::runtime_error("[save] cannot open " + path +
                             " for writing: " + os_error() + ".");
  }
  mode_t mode = 0;
  if (existed) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  fchmod(fd, mode);
  file_ = fdopen(fd, "wb");
  if (!file_) {
    ::close(fd);
    std::remove(temp_.c_str());
    throw std::runtime_error("[save] cannot open " + path +
                             " for writing: " + os_error() + ".");
  }
}

FileWriter::~FileWriter() { discard(); }

void FileWriter::write(const void* src, size_t n) {
  if (n > 0 && std::fwrite(src, 1, n, file_) != n) {
    throw std::runtime_error("[save] writing " + path_ +
                             " failed: " + os_error() + ".");
  }
}

void FileWriter::close() {
  std::FILE* f = file_;
  file_ = nullptr;
  if (std::fclose(f) != 0 ||
      (!temp_.empty() && std::rename(temp_.c_str(), path_.c_str()) != 0)) {
    std::string why = os_error();
    if (!temp_.empty()) std::remove(temp_.c_str());
    throw std::runtime_error("[save] writing " + path_ + " failed: " + why +
                             ".");
  }
}

void FileWriter::discard() {
  if (!file_) return;
  std::fclose(file_);
  file_ = nullptr;
  if (!temp_.empty()) std::remove(temp_.c_str());
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
