// matmul, addmm, inner, outer and tensordot against float64 loops, on
// contiguous, transposed, sliced, reversed and broadcast operands.
#include <cmath>
#include <complex>

#include "kiln/core/primitive.h"
#include "kiln/ops/utils.h"
#include "linalg_helpers.h"

namespace kiln::test {
namespace {

// Inputs are exact in their dtype and products accumulate in float32 or
// better, so half results carry one rounding (relative); wider types carry
// the accumulation error, which grows with k.
struct Tol {
  double rtol, atol;
};
Tol gemm_tol(Dtype dt, int k) {
  k = std::max(k, 1);
  if (dt == float16 || dt == bfloat16) return {tolerance(dt), 1e-4 * k};
  if (dt == float64) return {1e-12, 1e-13 * k};
  return {1e-5, 1e-6 * k};
}

// a @ b in float64 with NumPy's rules, from the operands' values.
std::vector<double> ref_product(array a, array b) {
  if (a.ndim() == 1) a = expand_dims(a, 0);
  if (b.ndim() == 1) b = expand_dims(b, -1);
  int m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  Shape batch = detail::broadcast_shapes(
      Shape(a.shape().begin(), a.shape().end() - 2),
      Shape(b.shape().begin(), b.shape().end() - 2), "test");
  Shape as = batch, bs = batch;
  as.insert(as.end(), {m, k});
  bs.insert(bs.end(), {k, n});
  int nb = 1;
  for (int d : batch) nb *= d;
  return ref_batched_matmul(to_doubles(broadcast_to(a, as)),
                            to_doubles(broadcast_to(b, bs)), nb, m, k, n);
}

void check_matmul(const array& a, const array& b, const std::string& what) {
  auto c = matmul(a, b);
  auto t = gemm_tol(c.dtype(), a.shape(-1));
  EXPECT_TRUE(all_close(to_doubles(c), ref_product(a, b), t.rtol, t.atol))
      << what << " " << c.dtype();
}

TEST(Matmul, MatchesNaiveForEachFloatDtype) {
  for (Dtype dt : float_dtypes()) {
    check_matmul(random_array({3, 4}, dt), random_array({4, 5}, dt), "2d");
    check_matmul(random_array({1, 7}, dt), random_array({7, 1}, dt), "row@col");
    check_matmul(random_array({33, 65}, dt), random_array({65, 17}, dt), "big");
    check_matmul(random_array({2, 3, 4}, dt), random_array({2, 4, 5}, dt),
                 "batched");
    check_matmul(random_array({2, 1, 3, 4}, dt), random_array({3, 4, 5}, dt),
                 "broadcast batch");
    // b shared by the batch: the batch folds into one GEMM.
    check_matmul(random_array({5, 3, 4}, dt), random_array({4, 6}, dt),
                 "folded");
    check_matmul(random_array({4, 6}, dt), random_array({5, 6, 3}, dt),
                 "a shared");
  }
}

TEST(Matmul, NonContiguousOperands) {
  for (Dtype dt : {float32, float64, float16}) {
    auto a = random_array({6, 5}, dt), b = random_array({5, 7}, dt);
    check_matmul(as_transposed(a), b, "a col-major");
    check_matmul(a, as_transposed(b), "b col-major");
    check_matmul(transpose(random_array({5, 6}, dt)),
                 transpose(random_array({7, 5}, dt)), "both transposed");
    check_matmul(random_sliced({6, 5}, dt), random_sliced({5, 7}, dt),
                 "sliced");
    check_matmul(reversed(a, 0), reversed(b, 1), "reversed");
    check_matmul(broadcast_to(random_array({1, 5}, dt), {6, 5}), b,
                 "broadcast rows");
    check_matmul(a, broadcast_to(random_array({5, 1}, dt), {5, 7}),
                 "broadcast cols");
    auto a3 = as_transposed(random_array({3, 6, 5}, dt)); // batch innermost
    check_matmul(a3, random_array({3, 5, 7}, dt), "transposed batch");
    check_matmul(random_sliced({4, 6, 5}, dt), b, "sliced folded");
    check_matmul(transpose(random_array({2, 5, 6}, dt), {0, 2, 1}),
                 random_array({5, 7}, dt), "batched transposed a");
  }
}

TEST(Matmul, VectorOperandsFollowNumPy) {
  for (Dtype dt : {float32, float64}) {
    auto v = random_array({4}, dt), m = random_array({4, 3}, dt);
    auto mt = random_array({3, 4}, dt);
    auto vm = matmul(v, m);
    EXPECT_EQ(vm.shape(), (Shape{3}));
    auto want = ref_matmul(to_doubles(v), to_doubles(m), 1, 4, 3);
    EXPECT_TRUE(all_close(to_doubles(vm), want, 1e-5, 1e-5));
    auto mv = matmul(mt, v);
    EXPECT_EQ(mv.shape(), (Shape{3}));
    want = ref_matmul(to_doubles(mt), to_doubles(v), 3, 4, 1);
    EXPECT_TRUE(all_close(to_doubles(mv), want, 1e-5, 1e-5));
    auto vv = matmul(v, v);
    EXPECT_EQ(vv.shape(), Shape{});
    want = ref_matmul(to_doubles(v), to_doubles(v), 1, 4, 1);
    EXPECT_TRUE(all_close(to_doubles(vv), want, 1e-5, 1e-5));
    auto b = random_array({2, 4, 5}, dt);
    EXPECT_EQ(matmul(v, b).shape(), (Shape{2, 5}));
    EXPECT_EQ(matmul(random_array({2, 3, 4}, dt), v).shape(), (Shape{2, 3}));
  }
}

// Entry (i, j) of the product of row-major (., k) and (k, n) complex
// matrices, in complex128.
std::complex<double> complex_dot(const std::vector<complex64_t>& a,
                                 const std::vector<complex64_t>& b, int i,
                                 int j, int k, int n) {
  std::complex<double> sum = 0;
  for (int p = 0; p < k; ++p) {
    sum += std::complex<double>(a[i * k + p]) *
           std::complex<double>(b[p * n + j]);
  }
  return sum;
}

TEST(Matmul, Complex64) {
  std::vector<complex64_t> av, bv;
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < 12; ++i) av.emplace_back(u(rng()), u(rng()));
  for (int i = 0; i < 20; ++i) bv.emplace_back(u(rng()), u(rng()));
  array a(av, {3, 4}, complex64), b(bv, {4, 5}, complex64);
  for (auto& bb : {b, as_transposed(b)}) {
    auto c = contiguous(matmul(a, bb));
    c.eval();
    ASSERT_EQ(c.dtype(), complex64);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        std::complex<double> want = complex_dot(av, bv, i, j, 4, 5);
        auto got = std::complex<double>(c.data<complex64_t>()[i * 5 + j]);
        EXPECT_LT(std::abs(got - want), 1e-5) << i << "," << j;
      }
    }
  }
}

TEST(AddMM, Complex64AsMlx) {
  // MLX takes complex addmm: alpha * a @ b + beta * c against a complex128
  // loop, for a vector bias and a full one.
  std::uniform_real_distribution<float> u(-1, 1);
  auto draw = [&](int n) {
    std::vector<complex64_t> v;
    for (int i = 0; i < n; ++i) v.emplace_back(u(rng()), u(rng()));
    return v;
  };
  auto av = draw(12), bv = draw(20), vv = draw(5), fv = draw(15);
  array a(av, {3, 4}, complex64), b(bv, {4, 5}, complex64);
  array vec(vv, {5}, complex64), full(fv, {3, 5}, complex64);
  const float alpha = 0.75f, beta = -1.5f;
  for (bool vector_bias : {true, false}) {
    auto c = contiguous(addmm(vector_bias ? vec : full, a, b, alpha, beta));
    c.eval();
    ASSERT_EQ(c.dtype(), complex64);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        std::complex<double> bias(vector_bias ? vv[j] : fv[i * 5 + j]);
        std::complex<double> want =
            double(alpha) * complex_dot(av, bv, i, j, 4, 5) +
            double(beta) * bias;
        auto got = std::complex<double>(c.data<complex64_t>()[i * 5 + j]);
        EXPECT_LT(std::abs(got - want), 1e-5) << i << "," << j;
      }
    }
  }
}

TEST(Matmul, DtypePromotion) {
  auto h = random_array({2, 3}, float16), g = random_array({3, 2}, bfloat16);
  EXPECT_EQ(matmul(h, g).dtype(), float32);
  auto i = random_array({3, 2}, int32);
  auto hi = matmul(h, i);
  EXPECT_EQ(hi.dtype(), float16);
  auto want = ref_matmul(to_doubles(h), to_doubles(i), 2, 3, 2);
  EXPECT_TRUE(all_close(to_doubles(hi), want, 1e-2, 1e-2));
  EXPECT_EQ(matmul(random_array({2, 3}, float32), random_array({3, 2}, float64))
                .dtype(),
            float64);
}

TEST(Matmul, ZeroSize) {
  auto e = matmul(random_array({0, 3}, float32), random_array({3, 4}, float32));
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  EXPECT_TRUE(to_doubles(e).empty());
  for (Dtype dt : float_dtypes()) {
    // An empty contraction sums nothing: zeros.
    auto z = matmul(random_array({3, 0}, dt), random_array({0, 4}, dt));
    EXPECT_EQ(z.shape(), (Shape{3, 4}));
    EXPECT_EQ(to_doubles(z), std::vector<double>(12, 0.0));
  }
  auto b0 =
      matmul(random_array({0, 2, 3}, float32), random_array({3, 4}, float32));
  EXPECT_EQ(b0.shape(), (Shape{0, 2, 4}));
  EXPECT_TRUE(to_doubles(b0).empty());
}

TEST(Matmul, BadInputs) {
  auto a = random_array({2, 3}, float32);
  EXPECT_TRUE(throws_naming([&] { matmul(array(1.0f), a); }, "matmul"));
  EXPECT_TRUE(throws_naming(
      [&] {
        matmul(a, random_array({4, 2}, float32));
      },
      "matmul"));
  EXPECT_TRUE(throws_naming(
      [&] {
        matmul(random_array({2, 2, 3}, float32),
               random_array({3, 3, 2}, float32));
      },
      "matmul"));
  // MLX supports only inexact types.
  EXPECT_TRUE(throws_naming(
      [&] {
        matmul(random_array({2, 3}, int32), random_array({3, 2}, int32));
      },
      "matmul"));
  EXPECT_TRUE(throws_naming(
      [&] {
        matmul(random_array({2, 3}, bool_), random_array({3, 2}, bool_));
      },
      "matmul"));
}

// --- addmm -----------------------------------------------------------------

void check_addmm(const array& c, const array& a, const array& b, float alpha,
                 float beta, const std::string& what) {
  auto out = addmm(c, a, b, alpha, beta);
  auto ab = ref_product(a, b);
  ASSERT_EQ(out.size(), ab.size()) << what;
  auto cv = to_doubles(broadcast_to(c, out.shape()));
  std::vector<double> want(ab.size());
  for (size_t i = 0; i < ab.size(); ++i) want[i] = alpha * ab[i] + beta * cv[i];
  auto t = gemm_tol(out.dtype(), a.shape(-1));
  EXPECT_TRUE(all_close(to_doubles(out), want, t.rtol, 4 * t.atol))
      << what << " " << out.dtype();
}

TEST(AddMM, BiasFormsAndScalars) {
  for (Dtype dt : float_dtypes()) {
    auto a = random_array({4, 3}, dt), b = random_array({3, 5}, dt);
    check_addmm(random_array({5}, dt), a, b, 1, 1, "vector");
    check_addmm(random_array({1, 5}, dt), a, b, 2, 0.5, "row");
    check_addmm(random_array({4, 5}, dt), a, b, -1, 3, "full");
    check_addmm(random_array({4, 1}, dt), a, b, 1, 1, "column");
    check_addmm(random_array({}, dt), a, b, 0.5, 2, "scalar");
    check_addmm(random_array({4, 5}, dt), a, b, 1.5, 0, "beta 0");
    check_addmm(as_transposed(random_array({4, 5}, dt)), as_transposed(a), b, 1,
                1, "transposed");
    auto a3 = random_array({2, 4, 3}, dt);
    check_addmm(random_array({5}, dt), a3, b, 1, 1, "folded with bias");
    check_addmm(random_array({2, 1, 5}, dt), a3, random_array({2, 3, 5}, dt), 1,
                -1, "batched bias");
    check_addmm(random_array({5}, dt), random_array({3}, dt), b, 1, 1,
                "vector a");
  }
}

TEST(AddMM, HalfProductsRunInRowBlocks) {
  // 16-bit products convert blocks of about 2^20 / max(k, n) rows; n is
  // large here so 40 rows span three blocks.
  for (Dtype dt : {float16, bfloat16}) {
    auto a = random_array({40, 4}, dt), b = random_array({4, 65536}, dt);
    check_matmul(as_transposed(a), b, "blocks");
    check_addmm(random_array({40, 1}, dt), a, b, 1, 1, "blocks with bias");
  }
}

TEST(AddMM, VectorBiasStaysAVector) {
  auto a = random_array({4, 3}, float32), b = random_array({3, 5}, float32);
  for (auto c : {random_array({5}, float32), random_array({1, 5}, float32),
                 random_array({5}, float16)}) {
    auto out = addmm(c, a, b);
    ASSERT_TRUE(out.has_primitive());
    EXPECT_STREQ(out.primitive().name(), "AddMM");
    EXPECT_EQ(out.inputs()[0].shape(), (Shape{5}));
  }
  // Any other bias reaches the primitive broadcast to the output shape.
  auto out = addmm(random_array({4, 1}, float32), a, b);
  EXPECT_EQ(out.inputs()[0].shape(), (Shape{4, 5}));
  out.inputs()[0].eval();
  EXPECT_EQ(out.inputs()[0].data_size(), 4u);
}

TEST(AddMM, ZeroSizeContractionGivesBias) {
  auto c = random_array({3, 4}, float32);
  auto out = addmm(c, random_array({3, 0}, float32),
                   random_array({0, 4}, float32), 1.0f, 2.0f);
  auto want = map1(to_doubles(c), [](double v) { return 2 * v; });
  EXPECT_TRUE(all_close(to_doubles(out), want, 1e-6, 1e-6));
}

TEST(AddMM, BadInputs) {
  auto a = random_array({2, 3}, float32), b = random_array({3, 5}, float32);
  // MLX: c must broadcast to the output (no growing the output).
  EXPECT_TRUE(throws_naming(
      [&] {
        addmm(random_array({4, 2, 5}, float32), a, b);
      },
      "addmm"));
  EXPECT_TRUE(
      throws_naming([&] { addmm(random_array({3}, float32), a, b); }, "addmm"));
  EXPECT_TRUE(throws_naming(
      [&] {
        addmm(random_array({5}, int32), random_array({2, 3}, int32),
              random_array({3, 5}, int32));
      },
      "addmm"));
  EXPECT_TRUE(throws_naming(
      [&] {
        addmm(random_array({5}, float32), a, random_array({4, 5}, float32));
      },
      "addmm"));
}

// --- inner, outer, tensordot ------------------------------------------------

TEST(Contractions, InnerAndOuter) {
  auto a = random_array({2, 3, 4}, float32), b = random_array({5, 4}, float32);
  auto c = inner(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 3, 5}));
  auto want =
      ref_matmul(to_doubles(a), ref_transpose(to_doubles(b), 1, 5, 4), 6, 4, 5);
  EXPECT_TRUE(all_close(to_doubles(c), want, 1e-5, 1e-5));
  auto s = inner(array(2.0f), b);
  EXPECT_TRUE(all_close(to_doubles(s),
                        map1(to_doubles(b), [](double v) { return 2 * v; }),
                        1e-6, 0));
  auto x = random_array({2, 3}, int32), y = random_array({4}, int32);
  auto o = outer(x, as_transposed(y));
  EXPECT_EQ(o.shape(), (Shape{6, 4}));
  EXPECT_EQ(o.dtype(), int32);
  auto xv = to_doubles(x), yv = to_doubles(y);
  std::vector<double> ow;
  for (double p : xv) {
    for (double q : yv) ow.push_back(p * q);
  }
  EXPECT_EQ(to_doubles(o), ow);
  EXPECT_TRUE(
      throws_naming([&] { inner(a, random_array({3}, float32)); }, "inner"));
}

TEST(Contractions, TensordotMatchesLoops) {
  auto a = random_array({2, 3, 4}, float64),
       b = random_array({3, 4, 5}, float64);
  auto c = tensordot(a, b, 2);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  auto want = ref_matmul(to_doubles(a), to_doubles(b), 2, 12, 5);
  EXPECT_TRUE(all_close(to_doubles(c), want, 1e-12, 1e-12));
  // Axes in another order: contract a's (1, 2) with b2's (1, 0).
  auto b2 = random_array({4, 3, 5}, float64);
  auto d = tensordot(as_transposed(a), b2, {1, 2}, {1, 0});
  EXPECT_EQ(d.shape(), (Shape{2, 5}));
  auto av = to_doubles(a), bv = to_doubles(b2);
  std::vector<double> dw(10, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 5; ++l)
          dw[i * 5 + l] += av[(i * 3 + j) * 4 + k] * bv[(k * 3 + j) * 5 + l];
  EXPECT_TRUE(all_close(to_doubles(d), dw, 1e-12, 1e-12));
  auto o =
      tensordot(random_array({2, 3}, float32), random_array({4}, float32), 0);
  EXPECT_EQ(o.shape(), (Shape{2, 3, 4}));
}

TEST(Contractions, TensordotBadInputs) {
  auto a = random_array({2, 3, 4}, float32),
       b = random_array({4, 3, 5}, float32);
  EXPECT_TRUE(throws_naming(
      [&] {
        tensordot(a, b, {1, 2}, {0, 1});
      },
      "tensordot"));
  EXPECT_TRUE(throws_naming([&] { tensordot(a, b, 4); }, "tensordot"));
  EXPECT_TRUE(throws_naming([&] { tensordot(a, b, -1); }, "tensordot"));
  EXPECT_TRUE(throws_naming(
      [&] {
        tensordot(a, b, {1}, {1, 0});
      },
      "tensordot"));
  EXPECT_TRUE(throws_naming(
      [&] {
        tensordot(a, b, {2, 2}, {0, 0});
      },
      "tensordot"));
  EXPECT_TRUE(throws_naming([&] { tensordot(a, b, {5}, {0}); }, "tensordot"));
}

} // namespace
} // namespace kiln::test
