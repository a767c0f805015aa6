// Random draws that must equal MLX's for the same key. Every expected value
// below was printed by the mlx 0.32.4 package (Python, CPU) for the same
// call, e.g. mx.random.uniform(shape=(5,), key=mx.random.key(7)).
#include <cstring>

#include "test_utils.h"

namespace kiln::test {
namespace {

using random::key;

::testing::AssertionResult same(const array& got,
                                const std::vector<double>& want) {
  auto g = to_doubles(got);
  if (g.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size " << g.size() << " != " << want.size();
  }
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// float32 literals compared exactly (9 significant digits round-trip).
::testing::AssertionResult same_f(const array& got,
                                  const std::vector<float>& want) {
  return same(got, std::vector<double>(want.begin(), want.end()));
}

TEST(Random, KeyIsTheSeedPair) {
  auto k = key(7);
  EXPECT_EQ(k.dtype(), uint32);
  EXPECT_EQ(k.shape(), Shape{2});
  EXPECT_TRUE(same(k, {0, 7}));
  EXPECT_TRUE(same(key((uint64_t(1) << 40) + 5), {256, 5}));
}

TEST(Random, SplitMatchesMlx) {
  auto [a, b] = random::split(key(7));
  EXPECT_EQ(a.shape(), Shape{2});
  EXPECT_TRUE(same(a, {966301609, 989289821}));
  EXPECT_TRUE(same(b, {1948237315, 1058547403}));
  auto one = random::split(key(7), 1);
  EXPECT_EQ(one.shape(), (Shape{1, 2}));
  EXPECT_TRUE(same(one, {195045567, 4062205631}));
  EXPECT_TRUE(same(
      random::split(key(7), 3),
      {276534068, 861967409, 1905761346, 1641862660, 2900896126, 1402713516}));
  EXPECT_TRUE(same(random::split(key(7), 4),
                   {51277378, 1628829261, 1440439266, 395909871, 3088387524,
                    4291721531, 3731608162, 3705585371}));
  EXPECT_TRUE(
      same(random::split(key(42), 5),
           {2765691542, 1385194879, 831049250, 3807460095, 3616728933,
            824333390, 1482326074, 1083977345, 2713995981, 2812206153}));
}

TEST(Random, BitsOfNarrowWidthsAreTheSameByteStream) {
  // For the same number of 32-bit words, every width reads one byte stream.
  for (int nbytes : {1, 3, 5, 6, 8, 13, 24}) {
    int words = (nbytes + 3) / 4;
    auto w4 = random::bits({words}, 4, key(9));
    w4.eval();
    for (int width : {1, 2}) {
      if (nbytes % width) continue;
      auto w = random::bits({nbytes / width}, width, key(9));
      w.eval();
      EXPECT_EQ(w.dtype(), width == 1 ? uint8 : uint16);
      EXPECT_EQ(std::memcmp(w.data<char>(), w4.data<char>(), nbytes), 0)
          << nbytes << " bytes, width " << width;
    }
  }
}

TEST(Random, BitsReadAStridedKey) {
  // A broadcast key (stride 0) gives the same bits as the dense key.
  auto k = broadcast_to(array({5u}), {2});
  auto want = to_doubles(random::bits({7, 3}, 4, array({5u, 5u})));
  EXPECT_TRUE(same(random::bits({7, 3}, 4, k), want));
}

TEST(Random, UniformMatchesMlx) {
  EXPECT_TRUE(same_f(random::uniform({1}, key(7)), {0.844106972f}));
  EXPECT_TRUE(same_f(random::uniform({3}, key(7)),
                     {0.224984631f, 0.426160425f, 0.453609347f}));
  EXPECT_TRUE(same_f(
      random::uniform({5}, key(7)),
      {0.0643856078f, 0.20069243f, 0.65045923f, 0.382275939f, 0.675417483f}));
  EXPECT_TRUE(same_f(random::uniform({8}, key(7)),
                     {0.0119389445f, 0.379241377f, 0.335378408f, 0.0921799466f,
                      0.719071269f, 0.999244273f, 0.868832707f, 0.862773836f}));
  auto lo = array({-1.0f, 2.0f}, {2, 1});
  auto hi = array({1.0f, 3.0f, 5.0f});
  EXPECT_TRUE(same_f(random::uniform(lo, hi, {2, 3}, float32, key(7)),
                     {-0.871228814f, -0.197230279f, 1.66231799f, 1.61772406f,
                      2.67541742f, 2.97978401f}));
  // The same bounds, transposed and broadcast views.
  auto lo_t = transpose(array({-1.0f, 2.0f}, {1, 2}));
  auto hi_b = broadcast_to(hi, {2, 3});
  EXPECT_TRUE(same_f(random::uniform(lo_t, hi_b, {2, 3}, float32, key(7)),
                     {-0.871228814f, -0.197230279f, 1.66231799f, 1.61772406f,
                      2.67541742f, 2.97978401f}));
  auto h = random::uniform({6}, float16, key(7));
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_TRUE(same_f(h, {0.0643920898f, 0.200683594f, 0.443603516f,
                         0.382324219f, 0.675292969f, 0.326660156f}));
  EXPECT_TRUE(same_f(random::uniform({6}, bfloat16, key(7)),
                     {0.064453125f, 0.201171875f, 0.443359375f, 0.3828125f,
                      0.67578125f, 0.326171875f}));
}

TEST(Random, NormalMatchesMlx) {
  EXPECT_TRUE(same_f(random::normal({7}, key(7)),
                     {-2.25908709f, -0.307473719f, -0.425109506f, 0.275901049f,
                      0.58008486f, 3.17248654f, 1.12089038f}));
  EXPECT_TRUE(same_f(random::normal({2, 4}, 1.5f, 0.5f, key(3)),
                     {1.26247203f, 2.02945352f, 1.9509294f, 1.48349249f,
                      0.822909057f, 0.663291097f, 2.03557491f, 1.34172022f}));
  EXPECT_TRUE(same_f(random::normal({6}, float16, key(7)),
                     {-1.51855469f, -0.838867188f, -0.141601562f, -0.299560547f,
                      0.455078125f, -0.44921875f}));
  EXPECT_TRUE(same_f(random::normal({6}, bfloat16, key(7)),
                     {-1.515625f, -0.83984375f, -0.141601562f, -0.298828125f,
                      0.455078125f, -0.44921875f}));
  // float64 samples carry float32 values (mlx prints them rounded to
  // float32 here, which is exact).
  auto d = random::normal({6}, float64, key(7));
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_TRUE(
      same_f(astype(d, float32), {-1.51896501f, -0.83915031f, -0.141545042f,
                                  -0.299508691f, 0.454922557f, -0.449335843f}));
}

TEST(Random, RandintMatchesMlx) {
  auto k = key(7);
  auto r = random::randint(0, 10, {9}, int32, k);
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_TRUE(same(r, {8, 2, 2, 8, 5, 4, 2, 6, 6}));
  EXPECT_TRUE(same(random::randint(-100, -3, {9}, int32, k),
                   {-20, -77, -74, -20, -44, -57, -79, -34, -34}));
  // Bounds that wrap in the output dtype clip as mlx does.
  EXPECT_TRUE(same(random::randint(0, 300, {9}, uint8, k),
                   {43, 43, 43, 43, 43, 43, 43, 43, 43}));
  EXPECT_TRUE(same(random::randint(-1000, 1000, {9}, uint16, k),
                   std::vector<double>(9, 64536)));
  EXPECT_TRUE(same(random::randint(-7, 7, {9}, int8, k),
                   {4, -4, -4, 4, 1, -1, -4, 2, 2}));
  EXPECT_TRUE(
      same(random::randint(0, 2, {9}, bool_, k), {1, 0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_TRUE(same(random::randint(0, 2147483647, {9}, int64, k),
                   {1791540992, 529883936, 579298496, 1785241856, 1251132032,
                    973796032, 482385920, 1468013696, 1478034816}));
  EXPECT_TRUE(same(random::randint(-2.5f, 3.7f, {9}, int32, k),
                   {2, -1, -1, 2, 1, 0, -2, 1, 1}));
  EXPECT_TRUE(
      same(random::randint(array({0, 10}), array({5, 20}), {3, 2}, int32, k),
           {0, 12, 2, 13, 3, 13}));
}

TEST(Random, BernoulliMatchesMlx) {
  auto b = random::bernoulli(0.3, {10}, key(7));
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_TRUE(same(b, {0, 1, 1, 0, 1, 0, 1, 0, 0, 0}));
  auto p = array({0.1f, 0.9f}, {2, 1});
  EXPECT_TRUE(same(random::bernoulli(p, {2, 5}, key(7)),
                   {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}));
}

TEST(Random, TruncatedNormalMatchesMlx) {
  auto t =
      random::truncated_normal(array(-1.0f), array(1.0f), {8}, float32, key(7));
  EXPECT_TRUE(
      same_f(t, {-0.966864526f, -0.208141193f, -0.285541713f, -0.766849279f,
                 0.384126484f, 0.997869849f, 0.68015933f, 0.66715014f}));
  auto lo = array({-2.0f, 0.5f});
  EXPECT_TRUE(
      same_f(random::truncated_normal(lo, array(2.5f), {3, 2}, float32, key(7)),
             {-1.37046385f, 0.681231022f, -0.116521254f, 0.867022216f,
              0.463808864f, 0.807119191f}));
  EXPECT_TRUE(same_f(
      random::truncated_normal(array(-1.0f), array(1.0f), {8}, float16, key(7)),
      {-0.967285156f, -0.208374023f, -0.285400391f, -0.766601562f, 0.384277344f,
       0.997558594f, 0.679199219f, 0.666503906f}));
}

TEST(Random, GumbelMatchesMlx) {
  // Two logs of the uniform draws: the vector log's last bit depends on the
  // CPU's SIMD width (AVX2 or AVX-512 code), and the outer log turns the
  // inner one's last bit near 1 into an absolute error of its size (6e-8
  // at 0.039, seen on an AVX2 machine).
  std::vector<double> want = {-1.00900304f, -0.473735213f, 0.20756264f,
                              0.0391436294f, 0.935411692f, -0.112467028f};
  EXPECT_TRUE(all_close(to_doubles(random::gumbel({6}, float32, key(7))), want,
                        2.5e-7, 1.2e-7));
  EXPECT_TRUE(same_f(random::gumbel({6}, float16, key(7)),
                     {-1.00878906f, -0.474121094f, 0.20703125f, 0.0393371582f,
                      0.935058594f, -0.112548828f}));
}

TEST(Random, CategoricalMatchesMlx) {
  auto logits = array(
      {0.f, 1.f, 2.f, -1.f, 3.f, 0.f, 0.f, 1.f, -2.f, -2.f, 5.f, 0.f}, {3, 4});
  auto c = random::categorical(logits, -1, key(7));
  EXPECT_EQ(c.dtype(), uint32);
  EXPECT_EQ(c.shape(), Shape{3});
  EXPECT_TRUE(same(c, {2, 0, 2}));
  EXPECT_TRUE(same(random::categorical(logits, 0, key(7)), {1, 1, 2, 1}));
  auto n = random::categorical(logits, -1, 5, key(7));
  EXPECT_EQ(n.shape(), (Shape{3, 5}));
  EXPECT_TRUE(same(n, {1, 2, 1, 2, 2, 0, 3, 1, 0, 0, 2, 2, 2, 2, 2}));
  auto s = random::categorical(logits, -1, Shape{2, 3}, key(7));
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_TRUE(same(s, {2, 3, 2, 2, 1, 2}));
  // Transposed (non-contiguous) logits.
  EXPECT_TRUE(
      same(random::categorical(transpose(logits), 1, key(7)), {1, 2, 0, 1}));
  EXPECT_TRUE(
      same(random::categorical(transpose(logits), 0, key(7)), {2, 0, 2}));
}

TEST(Random, PermutationMatchesMlx) {
  auto p = random::permutation(10, key(7));
  EXPECT_EQ(p.dtype(), uint32);
  EXPECT_TRUE(same(p, {4, 6, 1, 2, 5, 7, 8, 3, 0, 9}));
  EXPECT_TRUE(same(random::permutation(1, key(7)), {0}));
  auto x = reshape(arange(12), {3, 4});
  auto px = random::permutation(x, 1, key(7));
  EXPECT_EQ(px.dtype(), int32);
  EXPECT_TRUE(same(px, {0, 1, 3, 2, 4, 5, 7, 6, 8, 9, 11, 10}));
  EXPECT_TRUE(same(random::permutation(x, 0, key(11)),
                   {4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3}));
  // A transposed input: permute axis 0 of x.T, i.e. the columns of x.
  auto pt = random::permutation(transpose(x), 0, key(7));
  EXPECT_TRUE(same(pt, to_doubles(transpose(px))));
}

TEST(Random, GlobalStateMatchesMlxSeeding) {
  random::seed(7);
  EXPECT_TRUE(same(random::state().get(), {0, 7}));
  EXPECT_TRUE(
      same_f(random::uniform({3}), {0.0777458325f, 0.174454302f, 0.83264631f}));
  // The state kept the first half of the split.
  EXPECT_TRUE(same(random::state().get(), {966301609, 989289821}));
  EXPECT_TRUE(
      same_f(random::uniform({3}), {0.584717035f, 0.436813712f, 0.706478179f}));
  random::seed(7);
  EXPECT_TRUE(same_f(random::normal({4}), {-1.42039847f, -0.43944332f,
                                           0.964675605f, -0.463114023f}));
  EXPECT_TRUE(same(random::randint(0, 100, {4}), {58, 49, 70, 17}));
}

} // namespace
} // namespace kiln::test
