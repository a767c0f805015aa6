// .npy: round trips of every dtype and layout, files in the forms NumPy
// writes (versions 1-3, big-endian, Fortran order), and errors.
#include "io/io_helpers.h"

namespace kiln::test {
namespace {

/** A .npy file of the given version around a header dict and raw data. */
std::string npy_file(int major, const std::string& dict,
                     const std::string& data) {
  std::string head = dict;
  size_t prefix = major == 1 ? 10 : 12;
  head.append((64 - (prefix + head.size() + 1) % 64) % 64, ' ');
  head += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += '\0';
  size_t n = head.size();
  out += char(n & 0xff);
  out += char(n >> 8);
  if (major > 1) out += std::string(2, '\0');
  return out + head + data;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

class Npy : public IoTest {};

TEST_F(Npy, RoundTripEveryDtypeAndLayout) {
  for (Dtype dtype : every_dtype()) {
    for (auto& [layout, a] : layouts(dtype)) {
      SCOPED_TRACE(dtype_name(dtype) + " " + layout);
      std::string file = path("a.npy");
      save(file, a);
      std::string bytes = read_file(file);
      // The data starts on a 64-byte boundary and is the row-major bytes.
      ASSERT_EQ((bytes.size() - a.nbytes()) % 64, 0u);
      EXPECT_EQ(bytes.substr(bytes.size() - a.nbytes()), strided_bytes(a));
      EXPECT_NE(bytes.find("'fortran_order': False"), std::string::npos);
      EXPECT_TRUE(same_array(load(file), a));
    }
  }
}

TEST_F(Npy, HeaderNamesDtypesAsNumPyAndBfloat16AsMLX) {
  std::vector<std::pair<Dtype, std::string>> cases = {
      {bool_, "|b1"},   {uint8, "|u1"},     {int8, "|i1"},
      {uint16, "<u2"},  {int64, "<i8"},     {float16, "<f2"},
      {float64, "<f8"}, {complex64, "<c8"}, {bfloat16, "<V2"}};
  for (auto& [dtype, descr] : cases) {
    save(path("d"), random_any({2}, dtype));
    std::string bytes = read_file(path("d.npy"));
    EXPECT_NE(bytes.find("{'descr': '" + descr +
                         "', 'fortran_order': False, 'shape': (2,), }"),
              std::string::npos)
        << bytes;
  }
  save(path("s"), array(1.5f));
  EXPECT_NE(read_file(path("s.npy")).find("'shape': (), }"), std::string::npos);
  save(path("m"), zeros({2, 0, 3}));
  EXPECT_NE(read_file(path("m.npy")).find("'shape': (2, 0, 3), }"),
            std::string::npos);
}

TEST_F(Npy, SuffixIsAppendedWhenMissing) {
  auto a = random_array({3}, float32);
  save(path("plain"), a);
  save(path("has.npy"), a);
  save(path("other.bin"), a);
  EXPECT_TRUE(std::filesystem::exists(path("plain.npy")));
  EXPECT_TRUE(std::filesystem::exists(path("has.npy")));
  EXPECT_FALSE(std::filesystem::exists(path("has.npy.npy")));
  EXPECT_TRUE(std::filesystem::exists(path("other.bin.npy")));
}

TEST_F(Npy, ScalarsAndEmptyArrays) {
  auto s = random_any({}, complex64);
  save(path("s.npy"), s);
  EXPECT_TRUE(same_array(load(path("s.npy")), s));
  auto e = zeros({0, 5}, int16);
  save(path("e.npy"), e);
  auto back = load(path("e.npy"));
  EXPECT_EQ(back.shape(), (Shape{0, 5}));
  EXPECT_EQ(back.dtype(), int16);
}

TEST_F(Npy, ReadsVersions2And3AndDoubleQuotes) {
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 4.0f};
  for (int major : {1, 2, 3}) {
    write_file(path("v.npy"),
               npy_file(major,
                        "{\"descr\": \"<f4\", \"shape\": (2, 2), "
                        "\"fortran_order\": False}",
                        raw(v)));
    auto a = load(path("v.npy"));
    EXPECT_EQ(a.shape(), (Shape{2, 2}));
    EXPECT_EQ(to_doubles(a), (std::vector<double>{1.5, -2.0, 3.25, 4.0}));
  }
}

TEST_F(Npy, ReadsBigEndianOfEveryWidth) {
  // Big-endian 1, 2 (int16), 258 (int32), 2^40 + 3 (uint64), 1.5 (float64),
  // and a complex 1+2i whose two floats are swapped separately.
  write_file(path("i2.npy"),
             npy_file(1,
                      "{'descr': '>i2', 'fortran_order': False, "
                      "'shape': (2,), }",
                      std::string("\x00\x01\x00\x02", 4)));
  EXPECT_EQ(to_doubles(load(path("i2.npy"))), (std::vector<double>{1, 2}));
  write_file(path("i4.npy"),
             npy_file(1,
                      "{'descr': '>i4', 'fortran_order': False, "
                      "'shape': (), }",
                      std::string("\x00\x00\x01\x02", 4)));
  EXPECT_EQ(load(path("i4.npy")).item<int32_t>(), 258);
  write_file(path("u8.npy"),
             npy_file(1,
                      "{'descr': '>u8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::string("\x00\x00\x01\x00\x00\x00\x00\x03", 8)));
  EXPECT_EQ(load(path("u8.npy")).item<uint64_t>(), (1ull << 40) + 3);
  write_file(path("f8.npy"),
             npy_file(1,
                      "{'descr': '>f8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::string("\x3f\xf8\0\0\0\0\0\0", 8)));
  EXPECT_EQ(load(path("f8.npy")).item<double>(), 1.5);
  write_file(path("c8.npy"),
             npy_file(1,
                      "{'descr': '>c8', 'fortran_order': False, "
                      "'shape': (1,), }",
                      std::string("\x3f\x80\0\0\x40\0\0\0", 8)));
  EXPECT_EQ(load(path("c8.npy")).item<complex64_t>(), complex64_t(1, 2));
  // '|' and '=' orders of one-byte and native types.
  write_file(path("b.npy"), npy_file(1,
                                     "{'descr': '|b1', 'fortran_order': False, "
                                     "'shape': (3,), }",
                                     std::string("\x01\x00\x01", 3)));
  EXPECT_EQ(to_doubles(load(path("b.npy"))), (std::vector<double>{1, 0, 1}));
}

TEST_F(Npy, ReadsFortranOrder) {
  // Column-major (2, 3): the file lists columns [0 3] [1 4] [2 5].
  std::vector<int32_t> cols = {0, 3, 1, 4, 2, 5};
  write_file(path("f.npy"), npy_file(1,
                                     "{'descr': '<i4', 'fortran_order': True, "
                                     "'shape': (2, 3), }",
                                     raw(cols)));
  auto a = load(path("f.npy"));
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(to_doubles(a), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  // Three axes: element (i, j, k) sits at i + 2j + 6k.
  std::vector<int16_t> v(24);
  for (int i = 0; i < 24; ++i) v[i] = int16_t(i);
  write_file(path("f3.npy"), npy_file(1,
                                      "{'descr': '<i2', 'fortran_order': True, "
                                      "'shape': (2, 3, 4), }",
                                      raw(v)));
  auto b = to_doubles(load(path("f3.npy")));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(b[(i * 3 + j) * 4 + k], i + 2 * j + 6 * k);
}

TEST_F(Npy, ReadsBfloat16AsVoidOfTwoBytes) {
  // 1.0 and -2.5 in bfloat16, as MLX writes them ('<V2'), and as NumPy
  // writes the void array back ('|V2').
  std::string data("\x80\x3f\x20\xc0", 4);
  for (std::string descr : {"<V2", "|V2"}) {
    write_file(path("bf.npy"),
               npy_file(1,
                        "{'descr': '" + descr +
                            "', 'fortran_order': False, 'shape': (2,), }",
                        data));
    auto a = load(path("bf.npy"));
    EXPECT_EQ(a.dtype(), bfloat16);
    EXPECT_EQ(to_doubles(a), (std::vector<double>{1.0, -2.5}));
  }
}

TEST_F(Npy, HeadersTooLongForVersion1UseVersion2) {
  // 22,000 axes of size 1 make a header of 66,000 characters: past version
  // 1's 16-bit length.
  auto a = reshape(array({7.5f}), Shape(22000, 1));
  save(path("long.npy"), a);
  std::string bytes = read_file(path("long.npy"));
  EXPECT_EQ(bytes[6], '\x02');
  size_t len = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8 |
               uint8_t(bytes[10]) << 16 | uint8_t(bytes[11]) << 24;
  EXPECT_GT(len, 65535u);
  EXPECT_EQ((12 + len) % 64, 0u);
  auto back = load(path("long.npy"));
  EXPECT_EQ(back.shape(), a.shape());
  EXPECT_EQ(to_doubles(back), (std::vector<double>{7.5}));
}

TEST_F(Npy, StreamsWithoutAKnownSize) {
  auto a = transpose(random_any({3, 5}, float16));
  BytesWriter w;
  save(w, a);
  BytesReader r(w.bytes);
  EXPECT_TRUE(same_array(load(r), a));
}

TEST_F(Npy, ErrorsNameTheFileAndTheProblem) {
  auto expect_error = [&](const std::string& file, const std::string& part) {
    try {
      load(file);
      ADD_FAILURE() << "no error for " << file;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << e.what();
    }
  };
  expect_error(path("missing.npy"), "cannot open");
  expect_error(dir_.string(), "not a regular file");
  write_file(path("junk.npy"), "hello, this is not an array at all");
  expect_error(path("junk.npy"), "not a .npy file");
  write_file(path("empty.npy"), "");
  expect_error(path("empty.npy"), "ends early");
  std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  write_file(path("short.npy"), npy_file(1, f4, std::string(10, '\1')));
  expect_error(path("short.npy"), "needs 16 bytes");
  auto with = [&](const std::string& dict) {
    write_file(path("h.npy"), npy_file(1, dict, std::string(64, '\1')));
  };
  with("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }");
  expect_error(path("h.npy"), "unsupported dtype '<U2'");
  with("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }");
  expect_error(path("h.npy"), "unsupported dtype");
  with("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }");
  expect_error(path("h.npy"), "invalid .npy header");
  with("{'descr': '<f4', 'fortran_order': False}");
  expect_error(path("h.npy"), "missing");
  with("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }");
  expect_error(path("h.npy"), "True or False");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }");
  expect_error(path("h.npy"), "expected a dimension");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296,), }");
  expect_error(path("h.npy"), "limit");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }");
  expect_error(path("h.npy"), "are left");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}");
  expect_error(path("h.npy"), "unexpected key");
  std::string v9 = npy_file(1, f4, std::string(16, '\0'));
  v9[6] = 9;
  write_file(path("v9.npy"), v9);
  expect_error(path("v9.npy"), "version 9");
  // A header length past the end of the file.
  write_file(path("len.npy"), std::string("\x93NUMPY\x01\x00\xff\xff{", 11));
  expect_error(path("len.npy"), "header length");
}

TEST_F(Npy, SavingToAMissingDirectoryRaises) {
  EXPECT_THROW(save(path("no/such/dir/a.npy"), array(1.0f)),
               std::runtime_error);
}

} // namespace
} // namespace kiln::test
