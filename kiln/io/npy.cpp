// NumPy's .npy format: a magic string, a version, a header that is a Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded
// to 64 bytes, then the raw data.
#include <cstring>
#include <optional>
#include <stdexcept>

#include "kiln/io/common.h"
#include "kiln/io/io.h"
#include "kiln/io/text_cursor.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"

namespace kiln {

namespace {

using io::Reader;
using io::detail::corrupt;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// NumPy pads the header so that the data starts on a 64-byte boundary.
constexpr size_t kAlign = 64;

// NumPy's type string without the byte-order character. bfloat16 has no
// NumPy name; MLX writes its two bytes as a void type, and so do we.
std::string descr_of(Dtype d) {
  switch (d) {
    case Dtype::Val::bool_: return "|b1";
    case Dtype::Val::uint8: return "|u1";
    case Dtype::Val::uint16: return "<u2";
    case Dtype::Val::uint32: return "<u4";
    case Dtype::Val::uint64: return "<u8";
    case Dtype::Val::int8: return "|i1";
    case Dtype::Val::int16: return "<i2";
    case Dtype::Val::int32: return "<i4";
    case Dtype::Val::int64: return "<i8";
    case Dtype::Val::float16: return "<f2";
    case Dtype::Val::float32: return "<f4";
    case Dtype::Val::float64: return "<f8";
    case Dtype::Val::bfloat16: return "<V2";
    case Dtype::Val::complex64: return "<c8";
  }
  return "";
}

struct Descr {
  Dtype dtype;
  bool big_endian;
};

Descr parse_descr(const std::string& s, const Reader& in) {
  auto unsupported = [&]() -> Descr {
    corrupt("load", in,
            "unsupported dtype '" + s + "' (kiln reads bool, " +
                "integers, float16/32/64, bfloat16 as V2 and " + "complex64).");
  };
  if (s.size() < 3) unsupported();
  char order = s[0];
  std::string code = s.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    unsupported();
  }
  static const std::pair<const char*, Dtype> codes[] = {
      {"b1", bool_},     {"u1", uint8},   {"u2", uint16},  {"u4", uint32},
      {"u8", uint64},    {"i1", int8},    {"i2", int16},   {"i4", int32},
      {"i8", int64},     {"f2", float16}, {"f4", float32}, {"f8", float64},
      {"c8", complex64}, {"V2", bfloat16}};
  for (auto& [name, dtype] : codes) {
    if (code != name) continue;
    // Void types have no byte order; a big-endian one is not MLX's bfloat16.
    if (dtype == bfloat16 && order == '>') unsupported();
    return {dtype, order == '>' && dtype.size > 1};
  }
  return unsupported();
}

// The header: a dict literal of three keys whose values are a string, a
// bool and a tuple of ints. Anything else is a corrupt header.
class HeaderParser : io::TextCursor {
 public:
  HeaderParser(const std::string& text, const Reader& in)
      : TextCursor(text), in_(in) {}

  void parse(std::string& descr, bool& fortran, std::vector<uint64_t>& dims) {
    bool seen[3] = {false, false, false};
    expect('{');
    while (!take('}')) {
      std::string key = string();
      expect(':');
      if (key == "descr") {
        descr = string();
        seen[0] = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        seen[1] = true;
      } else if (key == "shape") {
        dims = tuple();
        seen[2] = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!take(',')) {
        expect('}');
        break;
      }
    }
    if (!seen[0] || !seen[1] || !seen[2]) {
      fail("a key of descr, fortran_order and shape is missing");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) override {
    corrupt("load", in_, "invalid .npy header (" + why + "): " + s_);
  }
  std::string string() {
    space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) {
      fail("expected a string");
    }
    char quote = s_[i_++];
    size_t end = s_.find(quote, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    space();
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}}) {
      size_t n = std::strlen(word);
      if (s_.compare(i_, n, word) == 0) {
        i_ += n;
        return value;
      }
    }
    fail("expected True or False");
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    expect('(');
    while (!take(')')) {
      space();
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') {
        fail("expected a dimension");
      }
      uint64_t d = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (d > (UINT64_MAX - 9) / 10) fail("dimension too large");
        d = d * 10 + uint64_t(s_[i_++] - '0');
      }
      // NumPy writes 3L for longs in old files.
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;
      dims.push_back(d);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

  const Reader& in_;
};

std::string header_text(const array& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape += std::to_string(a.shape()[i]);
    if (a.ndim() == 1 || i + 1 < a.ndim()) shape += a.ndim() == 1 ? "," : ", ";
  }
  shape += ")";
  return "{'descr': '" + descr_of(a.dtype()) +
         "', 'fortran_order': False, 'shape': " + shape + ", }";
}

} // namespace

void save(io::Writer& out, const array& a) {
  array c = io::detail::row_major(a, "save");
  std::string dict = header_text(c);
  // Version 1 stores the header length in 2 bytes; longer headers (very
  // many dimensions) need version 2's 4 bytes, as NumPy does.
  size_t prefix = kMagicSize + 2 + 2;
  bool v2 = prefix + dict.size() + 1 > 65535;
  if (v2) prefix += 2;
  size_t total = prefix + dict.size() + 1;
  dict.append((kAlign - total % kAlign) % kAlign, ' ');
  dict += '\n';

  std::string head(kMagic, kMagicSize);
  head += v2 ? '\x02' : '\x01';
  head += '\x00';
  if (v2) {
    io::detail::append_le<uint32_t>(head, dict.size());
  } else {
    io::detail::append_le<uint16_t>(head, dict.size());
  }
  head += dict;
  out.write(head.data(), head.size());
  out.write(c.data<char>(), c.nbytes());
}

void save(std::string file, const array& a) {
  io::write_file(io::detail::with_suffix(std::move(file), ".npy"),
                 [&](io::Writer& out) { save(out, a); });
}

array load(io::Reader& in, StreamOrDevice) {
  char magic[kMagicSize + 2];
  in.read(magic, sizeof(magic), "the .npy magic string");
  if (std::memcmp(magic, kMagic, kMagicSize) != 0) {
    corrupt("load", in, "not a .npy file (the magic string is missing).");
  }
  int major = static_cast<unsigned char>(magic[kMagicSize]);
  if (major < 1 || major > 3) {
    corrupt("load", in,
            "unsupported .npy format version " + std::to_string(major) + ".");
  }
  uint32_t len = major == 1 ? io::detail::read_le<uint16_t>(in, "the header")
                            : io::detail::read_le<uint32_t>(in, "the header");
  auto left = in.remaining();
  if (left && *left < len) {
    corrupt("load", in,
            "the header length " + std::to_string(len) +
                " runs past the end of the file.");
  }
  std::string text = in.read_string(len, "the .npy header");

  std::string descr;
  bool fortran = false;
  std::vector<uint64_t> dims;
  HeaderParser(text, in).parse(descr, fortran, dims);
  Descr d = parse_descr(descr, in);
  Shape shape = io::detail::checked_shape(dims, "load", in, "the array");

  // Fortran order is the row-major data of the reversed shape, transposed.
  Shape stored = shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  // A complex number is two floats, each swapped on its own.
  size_t unit = !d.big_endian ? 0 : d.dtype == complex64 ? 4 : d.dtype.size;
  array out = io::detail::read_or_defer(in, stored, d.dtype, "load",
                                        "the data", unit);
  if (fortran && out.ndim() > 1) out = transpose(out);
  return out;
}

array load(const std::string& file, StreamOrDevice s) {
  io::FileReader in(file);
  return load(in, s);
}

} // namespace kiln
