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
