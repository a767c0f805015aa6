// Random samplers: distributions over large samples, the global key state,
// empty shapes and bad arguments.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <thread>

#include "test_utils.h"

namespace kiln::test {
namespace {

using random::key;

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / v.size();
}

template <typename F>
void expect_invalid(F&& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << op;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos)
        << e.what();
  }
}

constexpr int kN = 200000;

TEST(RandomDist, UniformMomentsAndRange) {
  auto v = to_doubles(random::uniform(2.0f, 5.0f, {kN}, float32, key(1)));
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 2.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 5.0);
  EXPECT_NEAR(mean_of(v), 3.5, 0.01);
  EXPECT_NEAR(var_of(v), 0.75, 0.01);
  for (Dtype dt : float_dtypes()) {
    auto u = to_doubles(random::uniform({kN}, dt, key(2)));
    EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0) << dt;
    EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0) << dt;
    EXPECT_NEAR(mean_of(u), 0.5, 0.01) << dt;
  }
}

TEST(RandomDist, NormalMoments) {
  for (Dtype dt : float_dtypes()) {
    auto v = to_doubles(random::normal({kN}, dt, key(3)));
    EXPECT_NEAR(mean_of(v), 0.0, 0.012) << dt;
    EXPECT_NEAR(var_of(v), 1.0, 0.02) << dt;
    double inside = 0;
    for (double x : v) inside += std::abs(x) < 1.0;
    EXPECT_NEAR(inside / kN, 0.6827, 0.006) << dt;
  }
  auto loc = array({-3.0f, 3.0f}, {2, 1});
  auto scale = array({0.5f, 2.0f}, {2, 1});
  auto v = random::normal({2, kN / 2}, float32, loc, scale, key(4));
  auto rows = to_doubles(v);
  std::vector<double> a(rows.begin(), rows.begin() + kN / 2);
  std::vector<double> b(rows.begin() + kN / 2, rows.end());
  EXPECT_NEAR(mean_of(a), -3.0, 0.01);
  EXPECT_NEAR(std::sqrt(var_of(a)), 0.5, 0.01);
  EXPECT_NEAR(mean_of(b), 3.0, 0.04);
  EXPECT_NEAR(std::sqrt(var_of(b)), 2.0, 0.03);
}

TEST(RandomDist, RandintIsUniformOverTheRange) {
  for (Dtype dt : {int32, int64, uint8, int8}) {
    auto v = to_doubles(random::randint(0, 10, {kN}, dt, key(5)));
    std::vector<double> counts(10, 0);
    for (double x : v) {
      ASSERT_TRUE(x >= 0 && x < 10 && x == std::floor(x)) << x;
      counts[static_cast<int>(x)] += 1;
    }
    for (double c : counts) EXPECT_NEAR(c / kN, 0.1, 0.005) << dt;
  }
  auto neg = to_doubles(random::randint(-7, -2, {1000}, int32, key(6)));
  for (double x : neg) EXPECT_TRUE(x >= -7 && x < -2) << x;
}

TEST(RandomDist, BernoulliFrequency) {
  auto v = to_doubles(random::bernoulli(0.3, {kN}, key(7)));
  EXPECT_NEAR(mean_of(v), 0.3, 0.005);
  EXPECT_EQ(mean_of(to_doubles(random::bernoulli(0.0, {1000}, key(8)))), 0.0);
  EXPECT_EQ(mean_of(to_doubles(random::bernoulli(1.0, {1000}, key(8)))), 1.0);
  auto h = random::bernoulli(array(0.75f, float16), {kN}, key(9));
  EXPECT_NEAR(mean_of(to_doubles(h)), 0.75, 0.005);
  // (A bare array argument is p, as in MLX; a key alone goes in optional.)
  auto half = random::bernoulli(std::optional<array>(key(1)));
  EXPECT_EQ(half.shape(), Shape{});
  EXPECT_EQ(half.dtype(), bool_);
}

TEST(RandomDist, TruncatedNormalStaysInBounds) {
  double a = -1, b = 2;
  auto v = to_doubles(random::truncated_normal(array(-1.0f), array(2.0f), {kN},
                                               float32, key(10)));
  EXPECT_GE(*std::min_element(v.begin(), v.end()), a);
  EXPECT_LE(*std::max_element(v.begin(), v.end()), b);
  auto pdf = [](double x) {
    return std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
  };
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  double z = cdf(b) - cdf(a);
  double mean = (pdf(a) - pdf(b)) / z;
  double var = 1 + (a * pdf(a) - b * pdf(b)) / z - mean * mean;
  EXPECT_NEAR(mean_of(v), mean, 0.01);
  EXPECT_NEAR(var_of(v), var, 0.01);
  auto shape = random::truncated_normal(array({-1.0f, 0.0f}),
                                        array(1.0f, float32), float32, key(1));
  EXPECT_EQ(shape.shape(), Shape{2});
}

TEST(RandomDist, GumbelMoments) {
  auto v = to_doubles(random::gumbel({kN}, float32, key(11)));
  EXPECT_NEAR(mean_of(v), 0.5772156649, 0.01);
  EXPECT_NEAR(var_of(v), M_PI * M_PI / 6, 0.03);
}

TEST(RandomDist, CategoricalFollowsSoftmax) {
  std::vector<double> logits = {0, 1, 2, -1};
  auto l = array(logits.begin(), {4}, float32);
  auto v = to_doubles(random::categorical(l, 0, kN, key(12)));
  double z = 0;
  for (double x : logits) z += std::exp(x);
  std::vector<double> counts(4, 0);
  for (double x : v) counts[static_cast<int>(x)] += 1;
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(counts[i] / kN, std::exp(logits[i]) / z, 0.005) << i;
  }
}

TEST(RandomDist, PermutationIsAPermutation) {
  auto p = to_doubles(random::permutation(1000, key(13)));
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
  int fixed = 0;
  for (int i = 0; i < 1000; ++i) fixed += p[i] == i;
  EXPECT_LT(fixed, 10);
  // Rows of a float64 matrix move whole, in the order of permutation(n).
  auto x = random_array({6, 5}, float64);
  auto px = to_doubles(random::permutation(x, 0, key(14)));
  auto order = to_doubles(random::permutation(6, key(14)));
  auto xs = to_doubles(x);
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(px[i * 5 + j], xs[static_cast<int>(order[i]) * 5 + j]);
    }
  }
}

TEST(RandomState, DrawsAdvanceTheGlobalKey) {
  random::seed(3);
  auto a = to_doubles(random::uniform({4}));
  auto b = to_doubles(random::uniform({4}));
  EXPECT_NE(a, b);
  random::seed(3);
  EXPECT_EQ(to_doubles(random::uniform({4})), a);
  // An explicit key leaves the state alone.
  auto before = to_doubles(random::state().get());
  random::uniform({3}, key(1)).eval();
  EXPECT_EQ(to_doubles(random::state().get()), before);
  // set() installs a key; a draw uses the second half of its split.
  random::state().set(key(21));
  auto drawn = to_doubles(random::normal({5}));
  auto [keep, use] = random::split(key(21));
  EXPECT_EQ(drawn, to_doubles(random::normal({5}, use)));
  EXPECT_EQ(to_doubles(random::state().get()), to_doubles(keep));
  EXPECT_EQ(random::state().size(), 1u);
}

TEST(RandomState, FailedDrawsLeaveTheKey) {
  random::seed(5);
  auto before = to_doubles(random::state().get());
  EXPECT_THROW(random::uniform({3}, int32), std::invalid_argument);
  EXPECT_THROW(random::bernoulli(array(1), Shape{2}), std::invalid_argument);
  EXPECT_THROW(random::randint(0, 3, {2}, float32), std::invalid_argument);
  EXPECT_THROW(random::uniform(array({1.0f, 2.0f}), array(3.0f), {3}),
               std::invalid_argument);
  EXPECT_EQ(to_doubles(random::state().get()), before);
}

TEST(RandomState, ConcurrentDrawsGetDistinctKeys) {
  random::seed(17);
  std::vector<std::vector<array>> draws(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) draws[t].push_back(random::bits({2}));
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::vector<double>> seen;
  for (auto& d : draws) {
    for (auto& a : d) seen.insert(to_doubles(a));
  }
  EXPECT_EQ(seen.size(), 200u);
}

TEST(RandomDist, LaplaceMomentsAndTails) {
  // Laplace(loc, b): mean loc, variance 2 b^2, P(|x - loc| > b) = 1/e.
  auto v = to_doubles(random::laplace({kN}, float32, 1.5f, 0.5f, key(11)));
  EXPECT_NEAR(mean_of(v), 1.5, 0.01);
  EXPECT_NEAR(var_of(v), 0.5, 0.02);
  double beyond = 0;
  for (double x : v) beyond += std::abs(x - 1.5) > 0.5;
  EXPECT_NEAR(beyond / kN, std::exp(-1.0), 0.01);
  // the same key draws the same numbers; half types hold the float32 draw
  auto a = random::laplace({64}, float32, 0, 1, key(3));
  auto h = random::laplace({64}, float16, 0, 1, key(3));
  EXPECT_EQ(to_doubles(a),
            to_doubles(random::laplace({64}, float32, 0, 1, key(3))));
  EXPECT_EQ(to_doubles(h), quantize(to_doubles(a), float16));
  expect_invalid([] { random::laplace({2}, int32); }, "laplace");
}

TEST(RandomDist, MultivariateNormalCovariance) {
  // cov = L L^T with a known L; the sample covariance and mean match.
  std::vector<double> lv{1.0, 0.0, 0.0, 0.5, 1.2, 0.0, -0.3, 0.4, 0.8};
  std::vector<double> cov(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k)
        cov[i * 3 + j] += lv[i * 3 + k] * lv[j * 3 + k];
  array c(cov.begin(), {3, 3}, float32);
  array mean({1.0f, -2.0f, 0.5f}, {3});
  int n = kN / 4;
  auto x = random::multivariate_normal(mean, c, {n}, float32, key(5));
  ASSERT_EQ(x.shape(), (Shape{n, 3}));
  auto v = to_doubles(x);
  std::vector<double> mu(3, 0.0), sc(9, 0.0);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 3; ++i) mu[i] += v[r * 3 + i] / n;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        sc[i * 3 + j] += (v[r * 3 + i] - mu[i]) * (v[r * 3 + j] - mu[j]) / n;
  EXPECT_TRUE(all_close(mu, {1.0, -2.0, 0.5}, 0, 0.02));
  EXPECT_TRUE(all_close(sc, cov, 0, 0.03));
  // batch shapes broadcast; the default shape is theirs
  auto batched = random::multivariate_normal(
      zeros({2, 1, 3}), broadcast_to(c, {4, 3, 3}), {}, float32, key(1));
  EXPECT_EQ(batched.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(random::multivariate_normal(mean, c, {5, 2}).shape(),
            (Shape{5, 2, 3}));
  expect_invalid(
      [&] {
        random::multivariate_normal(zeros({2, 3}), c, {5});
      },
      "multivariate_normal");
  expect_invalid(
      [&] {
        random::multivariate_normal(mean, zeros({4, 4}));
      },
      "multivariate_normal");
  expect_invalid([&] { random::multivariate_normal(mean, c, {}, float64); },
                 "multivariate_normal");
}

TEST(RandomDist, ZeroSizeAndScalarShapes) {
  EXPECT_EQ(random::uniform({0, 3}, key(1)).shape(), (Shape{0, 3}));
  EXPECT_TRUE(to_doubles(random::uniform({0, 3}, key(1))).empty());
  EXPECT_TRUE(to_doubles(random::bits({0}, 2, key(1))).empty());
  EXPECT_TRUE(to_doubles(random::normal({2, 0}, key(1))).empty());
  EXPECT_TRUE(to_doubles(random::randint(0, 4, {0}, int32, key(1))).empty());
  EXPECT_TRUE(to_doubles(random::permutation(0, key(1))).empty());
  auto l = array({0.0f, 1.0f, 2.0f});
  EXPECT_EQ(random::categorical(l, 0, 0, key(1)).shape(), Shape{0});
  // A 0-d draw uses one word, as shape (1,) does (mlx 0.32.4: 0.844106972).
  auto u = random::uniform({}, key(7));
  EXPECT_EQ(u.shape(), Shape{});
  EXPECT_EQ(u.item<float>(), 0.844106972f);
}

TEST(RandomErrors, BadArgumentsNameTheOp) {
  auto k = key(1);
  expect_invalid([&] { random::uniform({2}, int32, k); }, "uniform");
  expect_invalid([&] { random::uniform({-1}, k); }, "uniform");
  expect_invalid(
      [&] {
        random::uniform(array({1.0f, 2.0f}), array(3.0f), {3}, float32, k);
      },
      "uniform");
  expect_invalid([&] { random::normal({2}, int32, k); }, "normal");
  expect_invalid([&] { random::bits({2}, 3, k); }, "bits");
  expect_invalid([&] { random::bits({2}, 4, array({1, 2})); }, "bits");
  expect_invalid([&] { random::bits({2}, 4, array({1u, 2u, 3u})); }, "bits");
  expect_invalid([&] { random::split(k, -1); }, "split");
  expect_invalid([&] { random::split(array({1.0f, 2.0f})); }, "split");
  expect_invalid([&] { random::randint(0, 5, {2}, float32, k); }, "randint");
  expect_invalid(
      [&] {
        random::randint(array({0, 1}), array({2, 3, 4}), {2}, int32, k);
      },
      "randint");
  expect_invalid([&] { random::bernoulli(array(1), {2}, k); }, "bernoulli");
  expect_invalid(
      [&] {
        random::bernoulli(array({0.1f, 0.2f}), {3}, k);
      },
      "bernoulli");
  expect_invalid(
      [&] {
        random::truncated_normal(array(0.0f), array(1.0f), {2}, int32, k);
      },
      "truncated_normal");
  expect_invalid(
      [&] {
        random::truncated_normal(array({0.0f, 1.0f}), array(2.0f), {3}, float32,
                                 k);
      },
      "truncated_normal");
  expect_invalid([&] { random::gumbel({2}, uint8, k); }, "gumbel");
  auto logits = array({0.f, 1.f, 2.f, 3.f}, {2, 2});
  expect_invalid([&] { random::categorical(logits, 2, k); }, "categorical");
  expect_invalid([&] { random::categorical(array(1.0f), 0, k); },
                 "categorical");
  expect_invalid([&] { random::categorical(logits, -1, Shape{3}, k); },
                 "categorical");
  expect_invalid([&] { random::categorical(logits, -1, -2, k); },
                 "categorical");
  expect_invalid([&] { random::permutation(array(1.0f), 0, k); },
                 "permutation");
  expect_invalid([&] { random::permutation(logits, 2, k); }, "permutation");
  expect_invalid([&] { random::permutation(-3, k); }, "permutation");
  expect_invalid([&] { random::state().set(array({1, 2})); }, "random.state");
}

} // namespace
} // namespace kiln::test
