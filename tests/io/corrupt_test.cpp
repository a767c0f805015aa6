// Junk input: every truncation of a valid file and random byte damage must
// raise std::runtime_error or std::invalid_argument, never crash.
#include "io/io_helpers.h"

namespace kiln::test {
namespace {

using Loader = std::function<void(io::Reader&)>;

struct Format {
  std::string name;
  std::string bytes;
  Loader load;
};

std::vector<Format> valid_files() {
  std::vector<Format> out;
  BytesWriter npy, st, gg;
  save(npy, transpose(random_array({4, 3}, float32)));
  save_safetensors(
      st,
      {{"a", random_array({2, 4}, float32)}, {"b", random_array({3}, int16)}},
      {{"k", "v"}});
  // Tensor sizes that are multiples of 32 bytes: no padding at the end.
  save_gguf(
      gg,
      {{"a", random_array({4, 8}, float16)}, {"b", random_array({8}, int32)}},
      {{"s", std::string("x")},
       {"l", std::vector<std::string>{"p", "q"}},
       {"n", array({1, 2, 3})}});
  out.push_back({"npy", npy.bytes, [](io::Reader& r) { load(r); }});
  out.push_back(
      {"safetensors", st.bytes, [](io::Reader& r) { load_safetensors(r); }});
  out.push_back({"gguf", gg.bytes, [](io::Reader& r) { load_gguf(r); }});
  return out;
}

class Corrupt : public IoTest {};

TEST_F(Corrupt, EveryTruncationRaises) {
  for (auto& f : valid_files()) {
    SCOPED_TRACE(f.name);
    BytesReader whole(f.bytes);
    ASSERT_NO_THROW(f.load(whole));
    for (size_t n = 0; n < f.bytes.size(); ++n) {
      BytesReader sized(f.bytes.substr(0, n), /*tell_size=*/true);
      EXPECT_THROW(f.load(sized), std::runtime_error) << "length " << n;
      BytesReader unsized(f.bytes.substr(0, n));
      EXPECT_THROW(f.load(unsized), std::runtime_error) << "length " << n;
    }
  }
}

TEST_F(Corrupt, RandomDamageRaisesCleanly) {
  std::mt19937_64 gen(99);
  for (auto& f : valid_files()) {
    SCOPED_TRACE(f.name);
    int loaded = 0, raised = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::string bytes = f.bytes;
      int hits = 1 + int(gen() % 4);
      for (int h = 0; h < hits; ++h) {
        // Damage the header more often than the data: that is where the
        // parsers are.
        size_t limit =
            gen() % 4 ? std::min<size_t>(bytes.size(), 160) : bytes.size();
        bytes[gen() % limit] = char(gen() % 256);
      }
      try {
        // Half the trials with a known size, half as an unsized stream.
        BytesReader r(bytes, /*tell_size=*/trial % 2 == 0);
        f.load(r);
        ++loaded;
      } catch (const std::runtime_error&) {
        ++raised;
      } catch (const std::invalid_argument&) {
        ++raised;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "trial " << trial << ": " << e.what();
      }
    }
    // Both outcomes occur: the damage reaches the parsers and the data.
    EXPECT_GT(raised, 0);
    EXPECT_GT(loaded, 0);
  }
}

} // namespace
} // namespace kiln::test

namespace kiln::test {
namespace {

// A .npy header (version 1) for descr and shape, padded as NumPy pads it.
std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string h = "{'descr': '" + descr +
                  "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h;
}

// Found by fuzzing: bool bytes other than 0 and 1 were read as C++ bools
// (undefined), and an empty shape whose strides overflow int64 overflowed.
TEST(CorruptFound, BoolBytesReadAsTrue) {
  std::string bytes = npy_header("|b1", "(4,)") + std::string("\x00\x20\x01\xff", 4);
  for (bool sized : {false, true}) {
    BytesReader in(bytes, sized);
    auto a = load(in);
    EXPECT_EQ(to_doubles(a), (std::vector<double>{0, 1, 1, 1}));
    EXPECT_EQ(to_doubles(logical_not(a)), (std::vector<double>{1, 0, 0, 0}));
    EXPECT_EQ(sum(a).item<int>(), 3);
  }
}

TEST(CorruptFound, EmptyShapeWithHugeDimensionsLoads) {
  // The first stride, (2^31 - 1)^2 * 3, passes int64 but not uint64.
  std::string bytes =
      npy_header("<f4", "(1, 2147483647, 2147483647, 3, 0)");
  BytesReader in(bytes);
  auto a = load(in);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.shape(), (Shape{1, 2147483647, 2147483647, 3, 0}));
  EXPECT_EQ(sum(a).item<float>(), 0.0f);
}

} // namespace
} // namespace kiln::test
