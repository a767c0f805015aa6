// Byte sources and sinks for the file formats: a file on disk, or anything
// else (a Python file object) that implements read_some / write_some.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace kiln::io {

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
  /** Discards n bytes (padding between tensors). */
  void skip(size_t n, const std::string& what);
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

 protected:
  size_t read_some(void* dst, size_t n) override;
  std::optional<size_t> size() const override { return size_; }

 private:
  std::string path_;
  std::FILE* file_;
  size_t size_;
};

/** A file created (or truncated) for writing. */
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
  /** Closes and deletes the file (after a failed write). */
  void discard();

 private:
  std::string path_;
  std::FILE* file_;
};

/** Runs write on a new file at path and closes it; when write throws, the
 *  partly written file is deleted and the error rethrown. */
void write_file(const std::string& path,
                const std::function<void(Writer&)>& write);

} // namespace kiln::io
