// Helpers for the I/O tests: a scratch directory, whole-file reads and
// writes, in-memory readers and writers, and byte-exact references.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "kiln/io/io.h"
#include "kiln/ops/utils.h"
#include "test_utils.h"

namespace kiln::test {

/** A fresh directory per test, removed afterwards. */
class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_io_" + std::to_string(getpid()) + "_" +
            info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ / name; }

  std::filesystem::path dir_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

/** A reader over bytes in memory. Unless tell_size, it does not tell its
 *  size, as a pipe or a Python stream that cannot seek. */
class BytesReader : public io::Reader {
 public:
  explicit BytesReader(std::string bytes, bool tell_size = false)
      : bytes_(std::move(bytes)), tell_size_(tell_size) {}
  std::string label() const override { return "<bytes>"; }

 protected:
  size_t read_some(void* dst, size_t n) override {
    n = std::min(n, bytes_.size() - at_);
    std::memcpy(dst, bytes_.data() + at_, n);
    at_ += n;
    return n;
  }
  std::optional<size_t> size() const override {
    if (!tell_size_) return std::nullopt;
    return bytes_.size();
  }

 private:
  std::string bytes_;
  bool tell_size_;
  size_t at_ = 0;
};

class BytesWriter : public io::Writer {
 public:
  std::string label() const override { return "<bytes>"; }
  void write(const void* src, size_t n) override {
    bytes.append(static_cast<const char*>(src), n);
  }
  std::string bytes;
};

/** a's elements in row-major order as raw bytes, read through its strides
 *  (an independent walk, not kiln's copy kernels). */
inline std::string strided_bytes(array a) {
  a.eval();
  std::string out;
  size_t item = a.itemsize();
  const char* base = a.data<char>();
  std::vector<int> idx(a.ndim(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
    out.append(base + off * int64_t(item), item);
    for (int d = int(a.ndim()) - 1; d >= 0; --d) {
      if (++idx[d] < a.shape(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

/** Same dtype, shape and bytes. */
inline ::testing::AssertionResult same_array(const array& got,
                                             const array& want) {
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << got.dtype() << " != " << want.dtype();
  }
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << detail::shape_str(got.shape())
           << " != " << detail::shape_str(want.shape());
  }
  if (strided_bytes(got) != strided_bytes(want)) {
    return ::testing::AssertionFailure() << "the bytes differ";
  }
  return ::testing::AssertionSuccess();
}

/** Random values of any dtype, complex64 included (imaginary parts set). */
inline array random_any(const Shape& shape, Dtype dtype) {
  if (dtype != complex64) return random_array(shape, dtype);
  auto re = random_array(shape, float32);
  auto im = random_array(shape, float32);
  auto out = add(astype(re, complex64),
                 multiply(astype(im, complex64), array(complex64_t(0, 1))));
  out.eval();
  return out;
}

/** Every kiln dtype. */
inline std::vector<Dtype> every_dtype() {
  auto v = all_dtypes();
  v.push_back(complex64);
  return v;
}

/** The layouts a saver must flatten: dense, transposed, sliced with a
 *  step, and broadcast (stride 0). Each of shape (3, 4). */
inline std::vector<std::pair<std::string, array>> layouts(Dtype dtype) {
  auto base = random_any({6, 8}, dtype);
  return {
      {"dense", random_any({3, 4}, dtype)},
      {"transposed", transpose(random_any({4, 3}, dtype))},
      {"sliced", slice(base, Shape{1, 0}, Shape{6, 8}, Shape{2, 2})},
      {"broadcast", broadcast_to(random_any({1, 4}, dtype), {3, 4})},
  };
}

} // namespace kiln::test
