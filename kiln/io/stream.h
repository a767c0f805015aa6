// Byte sources and sinks for the file formats: a file on disk, or anything
// else (a Python file object) that implements read_some / write_some.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace kiln::io {

/** A regular file read at offsets, shared by the arrays one load makes
 *  lazily: each reads its bytes when it is evaluated. Holds its own
 *  descriptor, so the file may be renamed, replaced or deleted meanwhile. */
class RandomAccessFile {
 public:
  RandomAccessFile(int fd, std::string path, size_t size);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;
  /** Exactly n bytes from offset; throws naming the file and `what` when
   *  they are not there (the file shrank since it was opened). */
  void read_at(void* dst, size_t n, size_t offset,
               const std::string& what) const;
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
  size_t size_;
};

/** A sequential byte source. The formats only read forward, so a source
 *  needs no seeking; the reader counts what it has consumed. */
class Reader {
 public:
  virtual ~Reader() = default;
  /** Name for messages: the path, or a description of the object. */
  virtual std::string label() const = 0;

  /** Exactly n bytes into dst; throws std::runtime_error naming the file
   *  and `what` (the part of the file being read) when it ends early. */
  void read(void* dst, size_t n, const std::string& what);
  /** The next n bytes as a string, grown as the bytes arrive so that a
   *  corrupt length cannot allocate more than the source holds. */
  std::string read_string(size_t n, const std::string& what);
  /** Discards n bytes (padding between tensors, or the data of an array
   *  read later); a file seeks past them. */
  void skip(size_t n, const std::string& what);
  /** The source as a file read at offsets (position() is then the offset
   *  of the next byte), or nullptr for a stream. */
  virtual std::shared_ptr<RandomAccessFile> random_access() { return nullptr; }
  /** Bytes consumed so far. */
  size_t position() const { return position_; }
  /** Bytes left when the source knows its size, so that a corrupt header
   *  is caught before a huge allocation; nullopt otherwise. */
  std::optional<size_t> remaining() const;

 protected:
  /** Up to n bytes into dst; returns how many (0 at the end). */
  virtual size_t read_some(void* dst, size_t n) = 0;
  /** Total size of the source from where reading began, when known. */
  virtual std::optional<size_t> size() const { return std::nullopt; }
  /** Moves n bytes forward without reading them, if the source can. */
  virtual bool seek_forward(size_t) { return false; }

 private:
  size_t position_ = 0;
};

/** A sequential byte sink. */
class Writer {
 public:
  virtual ~Writer() = default;
  virtual std::string label() const = 0;
  /** All n bytes; throws std::runtime_error naming the file on failure. */
  virtual void write(const void* src, size_t n) = 0;
};

/** A file opened for reading; throws std::runtime_error naming the path
 *  when it cannot be opened. */
class FileReader : public Reader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader() override;
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  std::string label() const override { return path_; }
  std::shared_ptr<RandomAccessFile> random_access() override;

 protected:
  size_t read_some(void* dst, size_t n) override;
  std::optional<size_t> size() const override { return size_; }
  bool seek_forward(size_t n) override;

 private:
  std::string path_;
  std::FILE* file_;
  size_t size_;
  std::shared_ptr<RandomAccessFile> shared_;
};

/** A file written in full, then put in place: the bytes go to a new file
 *  beside it that replaces the path on close (a rename), so readers of the
 *  old file (arrays loaded lazily from it) keep its bytes, and a failed
 *  write leaves the old file as it was. A symbolic link's target is
 *  replaced. */
class FileWriter : public Writer {
 public:
  explicit FileWriter(const std::string& path);
  ~FileWriter() override;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  std::string label() const override { return path_; }
  void write(const void* src, size_t n) override;
  /** Flushes and closes, reporting a failed flush (a full disk). */
  void close();
  /** Closes and deletes the new file (after a failed write). */
  void discard();

 private:
  std::string path_;
  std::string temp_;
  std::FILE* file_;
};

/** Runs write on a new file at path and closes it; when write throws, the
 *  partly written file is deleted and the error rethrown. */
void write_file(const std::string& path,
                const std::function<void(Writer&)>& write);

} // namespace kiln::io
