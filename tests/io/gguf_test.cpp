// GGUF: round trips of the unquantized tensor types and every metadata
// kind, a file built by hand from the specification, and errors.
#include <random>

#include "io/io_helpers.h"

namespace kiln::test {
namespace {

// Little-endian pieces of a GGUF file built by hand.
template <typename T>
std::string le(T v) {
  std::string out;
  for (size_t i = 0; i < sizeof(T); ++i) {
    out += char((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  }
  return out;
}
std::string gstr(const std::string& s) { return le<uint64_t>(s.size()) + s; }
std::string gguf_head(uint32_t version, uint64_t tensors, uint64_t values) {
  return "GGUF" + le(version) + le(tensors) + le(values);
}

class Gguf : public IoTest {};

const std::vector<Dtype> kTensorDtypes = {float32, float16, bfloat16, float64,
                                          int8,    int16,   int32,    int64};

TEST_F(Gguf, RoundTripTensorDtypesLayoutsAndMetadata) {
  std::map<std::string, array> arrays;
  for (Dtype dtype : kTensorDtypes) {
    for (auto& [layout, a] : layouts(dtype)) {
      arrays.insert_or_assign(dtype_name(dtype) + "." + layout, a);
    }
  }
  arrays.insert_or_assign("scalar", array(2.5f));
  arrays.insert_or_assign("five_d", random_array({1, 2, 1, 3, 2}, float32));
  arrays.insert_or_assign("odd", random_array({3}, int8)); // forces padding
  std::map<std::string, GGUFMetaData> meta = {
      {"name", std::string("kiln")},
      {"tokens", std::vector<std::string>{"a", "", "\xc3\xa9"}},
      {"flag", array(true)},
      {"flags", array({true, false, true})},
      {"steps", slice(random_array({6}, uint32), Shape{0}, Shape{6}, Shape{2})},
      {"rate", array(0.125f)},
      {"wide", array(int64_t(1) << 40)},
      {"d", array({1.5, -2.0}, float64)},
      {"u8", random_array({4}, uint8)},
      {"i16", array(int16_t(-7))},
      {"u64", array(uint64_t(1) << 63)},
  };
  save_gguf(path("all"), arrays, meta);
  auto [loaded, loaded_meta] = load_gguf(path("all.gguf"));
  ASSERT_EQ(loaded.size(), arrays.size());
  for (auto& [name, a] : arrays) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(same_array(loaded.at(name), a));
  }
  ASSERT_EQ(loaded_meta.size(), meta.size());
  for (auto& [key, value] : meta) {
    SCOPED_TRACE(key);
    auto& got = loaded_meta.at(key);
    ASSERT_EQ(got.index(), value.index());
    if (auto* a = std::get_if<array>(&value)) {
      EXPECT_TRUE(same_array(std::get<array>(got), *a));
    } else if (auto* s = std::get_if<std::string>(&value)) {
      EXPECT_EQ(std::get<std::string>(got), *s);
    } else {
      EXPECT_EQ(std::get<std::vector<std::string>>(got),
                std::get<std::vector<std::string>>(value));
    }
  }
}

TEST_F(Gguf, LayoutFollowsTheSpecification) {
  // One float32 (2, 3) tensor "w" and one string value: dimensions
  // innermost first, data aligned to 32 bytes.
  auto w = random_array({2, 3}, float32);
  save_gguf(path("w.gguf"), {{"w", w}}, {{"k", std::string("v")}});
  std::string head = gguf_head(3, 1, 1) + gstr("k") + le<uint32_t>(8) +
                     gstr("v") + gstr("w") + le<uint32_t>(2) + le<uint64_t>(3) +
                     le<uint64_t>(2) + le<uint32_t>(0) + le<uint64_t>(0);
  head.append((32 - head.size() % 32) % 32, '\0');
  std::string data = strided_bytes(w);
  data.append((32 - data.size() % 32) % 32, '\0');
  EXPECT_EQ(read_file(path("w.gguf")), head + data);
}

TEST_F(Gguf, ReadsHandBuiltFilesWithAlignmentAndGaps) {
  // Version 2, alignment 64, tensors stored in reverse order with a gap,
  // an int32 array value and a float64 value.
  std::string head = gguf_head(2, 2, 3);
  head += gstr("general.alignment") + le<uint32_t>(4) + le<uint32_t>(64);
  head += gstr("ids") + le<uint32_t>(9) + le<uint32_t>(5) + le<uint64_t>(2) +
          le<int32_t>(-1) + le<int32_t>(7);
  double pi = 3.25;
  head += gstr("x") + le<uint32_t>(12) +
          std::string(reinterpret_cast<const char*>(&pi), 8);
  head += gstr("first") + le<uint32_t>(1) + le<uint64_t>(2) + le<uint32_t>(26) +
          le<uint64_t>(128);
  head += gstr("second") + le<uint32_t>(2) + le<uint64_t>(2) + le<uint64_t>(1) +
          le<uint32_t>(1) + le<uint64_t>(0);
  head.append((64 - head.size() % 64) % 64, '\0');
  std::string data = le<uint16_t>(0x3c00) + le<uint16_t>(0xc000); // 1, -2
  data.append(128 - data.size(), '\x55');
  data += le<int32_t>(11) + le<int32_t>(-12);
  write_file(path("h.gguf"), head + data);
  auto [arrays, meta] = load_gguf(path("h.gguf"));
  EXPECT_EQ(arrays.at("first").dtype(), int32);
  EXPECT_EQ(to_doubles(arrays.at("first")), (std::vector<double>{11, -12}));
  EXPECT_EQ(arrays.at("second").shape(), (Shape{1, 2}));
  EXPECT_EQ(arrays.at("second").dtype(), float16);
  EXPECT_EQ(to_doubles(arrays.at("second")), (std::vector<double>{1, -2}));
  EXPECT_EQ(std::get<array>(meta.at("general.alignment")).item<uint32_t>(),
            64u);
  EXPECT_EQ(to_doubles(std::get<array>(meta.at("ids"))),
            (std::vector<double>{-1, 7}));
  EXPECT_EQ(std::get<array>(meta.at("x")).item<double>(), 3.25);
}

TEST_F(Gguf, WritesTheAlignmentItDeclares) {
  auto a = random_array({5}, int8);
  auto b = random_array({3, 3}, float16);
  save_gguf(path("a64"), {{"a", a}, {"b", b}},
            {{"general.alignment", array(uint32_t(64))}});
  std::string bytes = read_file(path("a64.gguf"));
  // a at the data start, b 64 bytes later, the data start on 64 bytes.
  size_t data = bytes.size() - 64 - 64;
  EXPECT_EQ(data % 64, 0u);
  EXPECT_EQ(bytes.substr(data, 5), strided_bytes(a));
  EXPECT_EQ(bytes.substr(data + 64, 18), strided_bytes(b));
  auto [arrays, meta] = load_gguf(path("a64.gguf"));
  EXPECT_TRUE(same_array(arrays.at("a"), a));
  EXPECT_TRUE(same_array(arrays.at("b"), b));
  for (auto bad : {array(uint32_t(24)), array(uint32_t(0)), array(64)}) {
    EXPECT_THROW(save_gguf(path("x"), {}, {{"general.alignment", bad}}),
                 std::invalid_argument);
  }
}

TEST_F(Gguf, StreamsWithoutAKnownSize) {
  auto a = transpose(random_array({3, 4}, bfloat16));
  BytesWriter w;
  save_gguf(w, {{"a", a}}, {{"n", array(3)}});
  BytesReader r(w.bytes);
  auto [arrays, meta] = load_gguf(r);
  EXPECT_TRUE(same_array(arrays.at("a"), a));
  EXPECT_EQ(std::get<array>(meta.at("n")).item<int32_t>(), 3);
}

TEST_F(Gguf, BadArgumentsRaiseInvalidArgument) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, complex64}) {
    EXPECT_THROW(save_gguf(path("x"), {{"a", zeros({2}, d)}}),
                 std::invalid_argument)
        << d;
  }
  // A failed save leaves no file behind.
  EXPECT_FALSE(std::filesystem::exists(path("x.gguf")));
  EXPECT_THROW(save_gguf(path("x"), {}, {{"m", zeros({2, 2})}}),
               std::invalid_argument);
  for (Dtype d : {float16, bfloat16, complex64}) {
    EXPECT_THROW(save_gguf(path("x"), {}, {{"m", zeros({2}, d)}}),
                 std::invalid_argument)
        << d;
  }
}

TEST_F(Gguf, ErrorsNameTheFileAndTheProblem) {
  auto expect_error = [&](const std::string& bytes, const std::string& part) {
    std::string file = path("bad.gguf");
    write_file(file, bytes);
    try {
      load_gguf(file);
      ADD_FAILURE() << "no error for " << part;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << e.what();
    }
  };
  expect_error("GGXX" + std::string(20, '\0'), "not a GGUF file");
  expect_error(gguf_head(1, 0, 0), "version 1");
  expect_error("GGUF" + le<uint32_t>(0x03000000) + std::string(16, '\0'),
               "version");
  expect_error(gguf_head(3, 1ull << 40, 0), "more than the file holds");
  expect_error(gguf_head(3, 0, 1) + gstr("k") + le<uint32_t>(8) +
                   le<uint64_t>(1ull << 50),
               "past the end");
  expect_error(
      gguf_head(3, 0, 1) + gstr("k") + le<uint32_t>(77) + std::string(8, '\0'),
      "unknown value type 77");
  expect_error(gguf_head(3, 0, 1) + gstr("k") + le<uint32_t>(9) +
                   le<uint32_t>(9) + le<uint64_t>(1) + std::string(16, '\0'),
               "nested arrays");
  expect_error(gguf_head(3, 0, 1) + gstr("general.alignment") +
                   le<uint32_t>(4) + le<uint32_t>(24),
               "power of two");
  expect_error(gguf_head(3, 0, 2) + gstr("k") + le<uint32_t>(4) +
                   le<uint32_t>(1) + gstr("k") + le<uint32_t>(4) +
                   le<uint32_t>(2),
               "'k' appears twice");
  std::string info = gstr("w") + le<uint32_t>(1) + le<uint64_t>(1) +
                     le<uint32_t>(0) + le<uint64_t>(0);
  expect_error(gguf_head(3, 2, 0) + info + info + std::string(64, '\0'),
               "'w' appears twice");
  std::string q4 = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(1) +
                   le<uint64_t>(48) + le<uint32_t>(2) + le<uint64_t>(0);
  expect_error(q4 + std::string(64, '\0'), "must be a multiple of 32");
  std::string q5 = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(1) +
                   le<uint64_t>(32) + le<uint32_t>(6) + le<uint64_t>(0);
  expect_error(q5 + std::string(64, '\0'), "GGML type Q5_0");
  // Two blocks announced, one stored: an error before any allocation.
  std::string q8 = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(1) +
                   le<uint64_t>(64) + le<uint32_t>(8) + le<uint64_t>(0);
  q8.append((32 - q8.size() % 32) % 32, '\0');
  expect_error(q8 + std::string(34, '\0'), "needs 68 bytes");
  std::string f32 = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(1) +
                    le<uint64_t>(8) + le<uint32_t>(0) + le<uint64_t>(0);
  f32.append((32 - f32.size() % 32) % 32, '\0');
  expect_error(f32 + std::string(16, '\0'), "needs 32 bytes");
  std::string big = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(1) +
                    le<uint64_t>(1ull << 33) + le<uint32_t>(0) +
                    le<uint64_t>(0);
  expect_error(big, "limit");
}

// A Q4_0, a Q4_1 and a Q8_0 tensor of 2 rows of 64 built from random
// blocks: each loads as kiln's affine quantization (groups of 32, float16
// scales and biases) whose dequantization is the GGML block formula.
TEST_F(Gguf, EmptyQuantizedTensorWithLongRowsLoads) {
  // Q4_0 of shape (0, 1023500800): no blocks, and the packed row length
  // (n * 4 / 32) computed without passing int32 on the way (the fuzzer
  // found the overflow).
  const uint64_t n = 1023500800;
  std::string head = gguf_head(3, 1, 0) + gstr("w") + le<uint32_t>(2) +
                     le<uint64_t>(n) + le<uint64_t>(0) + le<uint32_t>(2) +
                     le<uint64_t>(0);
  head.append((32 - head.size() % 32) % 32, '\0');
  write_file(path("long.gguf"), head);
  auto [arrays, meta] = load_gguf(path("long.gguf"));
  EXPECT_EQ(arrays.at("w").shape(), (Shape{0, static_cast<int>(n / 8)}));
  EXPECT_EQ(arrays.at("w.scales").shape(),
            (Shape{0, static_cast<int>(n / 32)}));
}

TEST_F(Gguf, QuantizedBlocksLoadAsAffineQuantization) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> byte(0, 255);
  const float scales[4] = {0.5f, -0.25f, 2.0f, 0.125f};
  struct Tensor {
    std::string name;
    uint32_t type;
    int bits;
    std::string data;
    std::vector<double> want;
  };
  std::vector<Tensor> tensors = {{"a.weight", 2, 4, "", {}},
                                 {"b.weight", 3, 4, "", {}},
                                 {"c", 8, 8, "", {}}};
  for (auto& t : tensors) {
    for (int blk = 0; blk < 4; ++blk) { // 2 rows x 2 blocks
      float scale = scales[blk], minimum = -1.5f + blk;
      t.data += le<uint16_t>(float16_t(scale).bits);
      if (t.type == 3) t.data += le<uint16_t>(float16_t(minimum).bits);
      std::vector<double> w(32);
      if (t.type == 8) {
        for (int j = 0; j < 32; ++j) {
          auto q = static_cast<int8_t>(byte(gen));
          t.data += char(q);
          w[j] = double(scale) * q;
        }
      } else {
        for (int j = 0; j < 16; ++j) {
          int lo = byte(gen) & 15, hi = byte(gen) & 15;
          t.data += char(lo | (hi << 4));
          double bias = t.type == 3 ? minimum : -8.0 * scale;
          w[j] = double(scale) * lo + bias;
          w[j + 16] = double(scale) * hi + bias;
        }
      }
      t.want.insert(t.want.end(), w.begin(), w.end());
    }
  }
  std::string head = gguf_head(3, tensors.size(), 0);
  uint64_t offset = 0;
  std::string data;
  for (auto& t : tensors) {
    head += gstr(t.name) + le<uint32_t>(2) + le<uint64_t>(64) +
            le<uint64_t>(2) + le<uint32_t>(t.type) + le<uint64_t>(offset);
    data += t.data;
    data.append((32 - data.size() % 32) % 32, '\0');
    offset = data.size();
  }
  head.append((32 - head.size() % 32) % 32, '\0');
  write_file(path("q.gguf"), head + data);
  auto [arrays, meta] = load_gguf(path("q.gguf"));
  EXPECT_EQ(arrays.size(), 9u);
  for (auto& t : tensors) {
    std::string prefix = t.name == "c" ? "c" : t.name.substr(0, 1);
    const array& w = arrays.at(t.name);
    const array& s = arrays.at(prefix + ".scales");
    const array& b = arrays.at(prefix + ".biases");
    EXPECT_EQ(w.dtype(), uint32);
    EXPECT_EQ(w.shape(), (Shape{2, 64 * t.bits / 32})) << t.name;
    EXPECT_EQ(s.shape(), (Shape{2, 2}));
    EXPECT_EQ(b.dtype(), float16);
    array d = dequantize(w, s, b, 32, t.bits, "affine", float32);
    EXPECT_EQ(to_doubles(d), t.want) << t.name;
  }
}

} // namespace
} // namespace kiln::test
