#include "kiln/io/common.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "kiln/ops/shape.h"
#include "kiln/primitives/load.h"
#include "kiln/ops/utils.h"

namespace kiln::io::detail {

namespace {
constexpr size_t kStreamChunk = size_t{16} << 20;

// The bytes an array of shape and dtype takes, checked against what is
// left of the source when it knows its size.
size_t checked_bytes(const Reader& in, const Shape& shape, Dtype dtype,
                     const std::string& op, const std::string& what) {
  size_t size = shape_size(shape);
  if (size > SIZE_MAX / dtype.size) {
    corrupt(op, in, what + " is too large to address.");
  }
  size_t nbytes = size * dtype.size;
  auto left = in.remaining();
  if (left && *left < nbytes) {
    corrupt(op, in,
            what + " (" + dtype_name(dtype) + ", shape " +
                kiln::detail::shape_str(shape) + ") needs " +
                std::to_string(nbytes) + " bytes but only " +
                std::to_string(*left) +
                " are left (a truncated or corrupt file).");
  }
  return nbytes;
}
} // namespace

void corrupt(const std::string& op, const Reader& in, const std::string& msg) {
  throw std::runtime_error("[" + op + "] " + in.label() + ": " + msg);
}

std::string with_suffix(std::string file, const std::string& suffix) {
  if (file.size() < suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    file += suffix;
  }
  return file;
}

array row_major(const array& a, const std::string& op) {
  if (a.is_tracer()) {
    kiln::detail::invalid(op, "cannot save a " + kiln::detail::describe(a) +
                                  " while a transformation traces it.");
  }
  array out = contiguous(a);
  out.eval();
  return out;
}

Shape checked_shape(const std::vector<uint64_t>& dims, const std::string& op,
                    const Reader& in, const std::string& what) {
  Shape shape;
  for (uint64_t d : dims) {
    if (d > static_cast<uint64_t>(INT32_MAX)) {
      corrupt(op, in,
              what + " has dimension " + std::to_string(d) +
                  ", more than kiln's limit of 2^31 - 1.");
    }
    shape.push_back(static_cast<int32_t>(d));
  }
  try {
    shape_size(shape);
  } catch (const std::invalid_argument&) {
    corrupt(op, in,
            what + " has shape " + kiln::detail::shape_str(shape) +
                ", whose size overflows.");
  }
  return shape;
}

array read_array(Reader& in, const Shape& shape, Dtype dtype,
                 const std::string& op, const std::string& what) {
  size_t nbytes = checked_bytes(in, shape, dtype, op, what);
  auto left = in.remaining();
  // A source of unknown size (a stream, a zip member) is read in chunks
  // first, so a corrupt shape cannot allocate more than the bytes that
  // actually arrive (twice them at most, for the final copy).
  std::vector<std::unique_ptr<char[]>> chunks;
  if (!left && nbytes > kStreamChunk) {
    for (size_t got = 0; got < nbytes; got += kStreamChunk) {
      size_t k = std::min(kStreamChunk, nbytes - got);
      chunks.emplace_back(new char[k]);
      in.read(chunks.back().get(), k, what);
    }
  }
  auto buffer = allocator::malloc(nbytes);
  try {
    if (chunks.empty()) {
      in.read(buffer.raw(), nbytes, what);
    } else {
      auto* dst = static_cast<char*>(buffer.raw());
      for (size_t i = 0; i < chunks.size(); ++i) {
        size_t at = i * kStreamChunk;
        std::memcpy(dst + at, chunks[i].get(),
                    std::min(kStreamChunk, nbytes - at));
        chunks[i].reset();
      }
    }
  } catch (...) {
    allocator::free(buffer);
    throw;
  }
  fix_loaded_bytes(static_cast<char*>(buffer.raw()), nbytes, dtype, 0);
  return array(buffer, shape, dtype);
}

array read_or_defer(Reader& in, const Shape& shape, Dtype dtype,
                    const std::string& op, const std::string& what,
                    size_t swap_unit) {
  auto file = in.random_access();
  if (!file) {
    array a = read_array(in, shape, dtype, op, what);
    if (swap_unit > 1) swap_bytes(a.data<char>(), a.nbytes(), swap_unit);
    return a;
  }
  size_t nbytes = checked_bytes(in, shape, dtype, op, what);
  size_t offset = in.position();
  in.skip(nbytes, what);
  return array(shape, dtype,
               std::make_shared<Load>(default_stream(Device::cpu),
                                      std::move(file), offset, swap_unit),
               {});
}

void fix_loaded_bytes(char* data, size_t nbytes, Dtype dtype,
                      size_t swap_unit) {
  if (swap_unit > 1) swap_bytes(data, nbytes, swap_unit);
  if (dtype == bool_) {
    // A byte other than 0 or 1 is true (as NumPy reads it); kernels read
    // bools as C++ bool, for which only 0 and 1 are values.
    auto* p = reinterpret_cast<unsigned char*>(data);
    for (size_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
  }
}

void swap_bytes(void* data, size_t nbytes, size_t unit) {
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i + unit <= nbytes; i += unit) {
    std::reverse(p + i, p + i + unit);
  }
}

} // namespace kiln::io::detail
