// Pieces shared by the file formats (internal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/io/stream.h"

namespace kiln::io::detail {

/** Throws std::runtime_error "[op] <file>: msg" for a file that cannot be
 *  parsed. */
[[noreturn]] void corrupt(const std::string& op, const Reader& in,
                          const std::string& msg);

/** file with suffix appended unless it already ends in it (as MLX). */
std::string with_suffix(std::string file, const std::string& suffix);

/** a evaluated in a row-major layout, ready to write byte for byte;
 *  rejects arrays being traced by a transformation. */
array row_major(const array& a, const std::string& op);

/** A shape from dimensions read from a file, each checked to fit kiln's
 *  32-bit dimensions and their product to fit memory. */
Shape checked_shape(const std::vector<uint64_t>& dims, const std::string& op,
                    const Reader& in, const std::string& what);

/** An evaluated row-major array of shape and dtype filled with the next
 *  bytes of in; the size is checked against what is left of the file
 *  before anything is allocated (a source of unknown size is read in
 *  chunks first). Bool bytes other than 0 read as 1 (true). */
array read_array(Reader& in, const Shape& shape, Dtype dtype,
                 const std::string& op, const std::string& what);

/** read_array's result, or, from a file, an array that reads the same
 *  bytes when evaluated (the file stays open until then): the sizes are
 *  checked now, the bytes skipped. swap_unit > 1 reverses the byte order
 *  of each such word. Streams are read now. */
array read_or_defer(Reader& in, const Shape& shape, Dtype dtype,
                    const std::string& op, const std::string& what,
                    size_t swap_unit = 0);

/** Reverses the byte order of each `unit`-byte word of n bytes. */
void swap_bytes(void* data, size_t nbytes, size_t unit);

/** What every load does to the bytes it read: the byte order (swap_unit >
 *  1), and bools other than 0 as 1. */
void fix_loaded_bytes(char* data, size_t nbytes, Dtype dtype,
                      size_t swap_unit);

/** Little-endian integers, as all three formats store them. */
template <typename T>
T read_le(Reader& in, const std::string& what) {
  unsigned char b[sizeof(T)];
  in.read(b, sizeof(T), what);
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(b[i]) << (8 * i);
  return static_cast<T>(v);
}
template <typename T>
void append_le(std::string& out, T value) {
  auto v = static_cast<uint64_t>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(char(v >> (8 * i)));
}

} // namespace kiln::io::detail
