// vjp / jvp / vmap rules of matmul, addmm, inverse and solve, checked
// against finite differences, the jvp/vjp identity and a loop over batches.
#include "transforms/grad_check.h"

namespace kiln::test {
namespace {

array rnd(const Shape& s, double lo = -1.5, double hi = 1.5) {
  return random_array(s, float64, lo, hi);
}

// A well-conditioned square matrix (or stack): random plus 3 I.
array well_conditioned(const Shape& s) {
  return add(rnd(s, -1, 1), multiply(eye(s.back(), s.back(), 0, float64),
                                     array(3.0, float64)));
}

using Fn2 = std::function<array(const array&, const array&)>;

ArrayFn two(Fn2 f) {
  return [f](const std::vector<array>& in) { return f(in[0], in[1]); };
}

ArrayFn one(std::function<array(const array&)> f) {
  return [f](const std::vector<array>& in) { return f(in[0]); };
}

// ---- matmul ----------------------------------------------------------------

TEST(GradMatmul, ShapesAndLayouts) {
  auto mm = two([](auto& a, auto& b) { return matmul(a, b); });
  check_transforms("2-d", mm, {rnd({3, 4}), rnd({4, 5})});
  check_transforms("batched", mm, {rnd({2, 3, 4}), rnd({2, 4, 5})});
  // batch dims broadcast both ways: the gradient sums over them
  check_transforms("broadcast batch", mm, {rnd({2, 1, 3, 4}), rnd({3, 4, 2})});
  check_transforms("2-d times batched", mm, {rnd({3, 4}), rnd({2, 4, 5})});
  check_transforms("vector @ matrix", mm, {rnd({4}), rnd({4, 5})});
  check_transforms("matrix @ vector", mm, {rnd({3, 4}), rnd({4})});
  check_transforms("batched @ vector", mm, {rnd({2, 3, 4}), rnd({4})});
  check_transforms("transposed", mm,
                   {as_transposed(rnd({3, 4})), as_transposed(rnd({2, 4, 5}))});
  check_transforms("broadcast operand", mm,
                   {broadcast_to(rnd({1, 4}), {3, 4}), rnd({4, 2})});
  auto sliced = slice(rnd({6, 5}), Shape{0, 1}, Shape{6, 5}, Shape{2, 1});
  check_transforms("sliced", mm, {sliced, rnd({4, 3})});
}

TEST(GradMatmul, MatchesHandWrittenGradients) {
  // d/da sum(c * (a @ b)) = c @ b^T and d/db = a^T @ c, in float64 loops.
  int m = 3, k = 4, n = 2;
  auto a = rnd({m, k}), b = rnd({k, n}), c = rnd({m, n});
  auto g = grad(
      [&](const std::vector<array>& in) {
        return sum(multiply(c, matmul(in[0], in[1])));
      },
      std::vector<int>{0, 1})({a, b});
  auto av = to_doubles(a), bv = to_doubles(b), cv = to_doubles(c);
  std::vector<double> ga(m * k, 0), gb(k * n, 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) {
        ga[i * k + l] += cv[i * n + j] * bv[l * n + j];
        gb[l * n + j] += av[i * k + l] * cv[i * n + j];
      }
  EXPECT_TRUE(all_close(to_doubles(g[0]), ga, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(to_doubles(g[1]), gb, 1e-12, 1e-12));
}

TEST(GradMatmul, VmapOnEitherOperand) {
  auto mm = two([](auto& a, auto& b) { return matmul(a, b); });
  auto a = rnd({3, 4}), b = rnd({4, 5});
  auto ab = rnd({2, 3, 4}), bb = rnd({4, 5, 2});
  EXPECT_TRUE(check_vmap(mm, {ab, b}, {0, -1}));
  EXPECT_TRUE(check_vmap(mm, {a, bb}, {-1, 2}));
  EXPECT_TRUE(check_vmap(mm, {as_transposed(ab), bb}, {0, 2}));
  // mapped operands with their own batch dims
  EXPECT_TRUE(check_vmap(mm, {rnd({2, 3, 4}), rnd({2, 4, 5, 3})}, {-1, 3}));
  EXPECT_TRUE(check_vmap(mm, {rnd({6, 2, 3, 4}), rnd({2, 4, 5})}, {0, -1}));
  // vectors
  EXPECT_TRUE(check_vmap(mm, {rnd({2, 4}), b}, {0, -1}));
  EXPECT_TRUE(check_vmap(mm, {a, rnd({4, 2})}, {-1, 1}));
}

TEST(GradMatmul, Compositions) {
  // grad of grad and vmap of grad through Matmul.
  auto gfun = [](const std::vector<array>& in) {
    return grad(
        [](const std::vector<array>& x) {
          auto y = matmul(x[0], x[1]);
          return sum(multiply(y, y));
        },
        0)(in)[0];
  };
  check_transforms("grad of matmul", gfun, {rnd({3, 4}), rnd({4, 2})});
  // second derivative of sum((a b)^2) along a, by hand: 2 (t b) b^T
  auto a = rnd({2, 3}), b = rnd({3, 2}), t = rnd({2, 3});
  auto hv = jvp([&](const array& x) { return gfun({x, b}); }, a, t).second;
  auto want = multiply(array(2.0, float64), matmul(matmul(t, b), transpose(b)));
  EXPECT_TRUE(all_close(to_doubles(hv), to_doubles(want), 1e-12, 1e-12));
}

TEST(GradMatmul, DtypesAndEmpty) {
  auto a = rnd({3, 4}), b = rnd({4, 2});
  auto ref = grad(
      [](const std::vector<array>& in) {
        return sum(sin(matmul(in[0], in[1])));
      },
      std::vector<int>{0, 1})({a, b});
  for (Dtype dt : {float32, float16, bfloat16}) {
    auto g = grad(
        [](const std::vector<array>& in) {
          return sum(sin(matmul(in[0], in[1])));
        },
        std::vector<int>{0, 1})({astype(a, dt), astype(b, dt)});
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(g[i].dtype(), dt);
      EXPECT_TRUE(all_close(to_doubles(g[i]), to_doubles(ref[i]),
                            8 * tolerance(dt), 8 * tolerance(dt)))
          << dtype_name(dt);
    }
  }
  // zero-size: K = 0 gives empty gradients, M = 0 zero gradients for b
  auto g0 = grad(
      [](const std::vector<array>& in) { return sum(matmul(in[0], in[1])); },
      std::vector<int>{0, 1})({rnd({3, 0}), rnd({0, 2})});
  EXPECT_EQ(g0[0].shape(), (Shape{3, 0}));
  EXPECT_EQ(g0[1].shape(), (Shape{0, 2}));
  auto g1 = grad(
      [](const std::vector<array>& in) { return sum(matmul(in[0], in[1])); },
      1)({rnd({0, 3}), rnd({3, 2})});
  EXPECT_EQ(to_doubles(g1[0]), std::vector<double>(6, 0.0));
}

// ---- addmm -----------------------------------------------------------------

TEST(GradAddMM, BiasShapesAlphaBeta) {
  auto fn = [](float alpha, float beta) {
    return [=](const std::vector<array>& in) {
      return addmm(in[0], in[1], in[2], alpha, beta);
    };
  };
  auto a = rnd({3, 4}), b = rnd({4, 5});
  check_transforms("vector bias", fn(1, 1), {rnd({5}), a, b});
  check_transforms("vector bias, alpha beta", fn(0.5f, -2.0f),
                   {rnd({5}), a, b});
  check_transforms("(1, N) bias", fn(1.5f, 0.25f), {rnd({1, 5}), a, b});
  check_transforms("full bias", fn(2.0f, 3.0f), {rnd({3, 5}), a, b});
  check_transforms("column bias", fn(1, -1), {rnd({3, 1}), a, b});
  check_transforms("scalar bias", fn(1, 2), {rnd({}), a, b});
  // a vector bias over a batched product sums over the batch and the rows
  auto ab = rnd({2, 3, 4}), bb = rnd({2, 4, 5});
  check_transforms("batched, vector bias", fn(0.75f, 1.5f), {rnd({5}), ab, bb});
  check_transforms("batched, bias broadcast over batch", fn(1, 0.5f),
                   {rnd({3, 5}), ab, bb});
  check_transforms("batched, (1, 1, N) bias", fn(1, 2),
                   {rnd({1, 1, 5}), ab, rnd({4, 5})});
  check_transforms("vector operands", fn(2, 1), {rnd({5}), rnd({4}), b});
  check_transforms(
      "transposed", fn(1, 1),
      {as_transposed(rnd({3, 5})), as_transposed(a), as_transposed(b)});
  check_transforms("broadcast bias input", fn(1, 1),
                   {broadcast_to(rnd({1, 5}), {3, 5}), a, b});
}

TEST(GradAddMM, BiasGradientByHand) {
  // d/dc sum(w * (alpha a b + beta c)) for a vector c is beta * the column
  // sums of w over the batch and the rows.
  auto c = rnd({4}), a = rnd({2, 3, 5}), b = rnd({5, 4}), w = rnd({2, 3, 4});
  auto g = grad(
      [&](const std::vector<array>& in) {
        return sum(multiply(w, addmm(in[0], a, b, 2.0f, 0.5f)));
      },
      0)({c})[0];
  ASSERT_EQ(g.shape(), (Shape{4}));
  auto wv = to_doubles(w);
  std::vector<double> want(4, 0);
  for (size_t i = 0; i < wv.size(); ++i) want[i % 4] += 0.5 * wv[i];
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-12, 1e-12));
  // the jvp along c alone has the output's shape
  auto t = jvp([&](const array& x) { return addmm(x, a, b, 2.0f, 0.5f); }, c,
               ones_like(c))
               .second;
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(to_doubles(t), std::vector<double>(24, 0.5));
}

TEST(GradAddMM, VmapEachInput) {
  auto f = [](const std::vector<array>& in) {
    return addmm(in[0], in[1], in[2], 1.5f, -0.5f);
  };
  auto c = rnd({5}), a = rnd({3, 4}), b = rnd({4, 5});
  EXPECT_TRUE(check_vmap(f, {rnd({2, 5}), a, b}, {0, -1, -1}));
  EXPECT_TRUE(check_vmap(f, {rnd({3, 5, 2}), a, b}, {2, -1, -1}));
  EXPECT_TRUE(check_vmap(f, {c, rnd({2, 3, 4}), b}, {-1, 0, -1}));
  EXPECT_TRUE(check_vmap(f, {c, a, rnd({4, 2, 5})}, {-1, -1, 1}));
  EXPECT_TRUE(check_vmap(f, {rnd({5, 2}), a, rnd({2, 4, 5})}, {1, -1, 0}));
  EXPECT_TRUE(check_vmap(f, {rnd({3, 5}), rnd({2, 3, 4}), b}, {-1, 0, -1}));
}

TEST(GradAddMM, Compositions) {
  auto gfun = [](const std::vector<array>& in) {
    return grad(
        [](const std::vector<array>& x) {
          return sum(square(tanh(addmm(x[0], x[1], x[2], 0.5f, 2.0f))));
        },
        std::vector<int>{0})(in)[0];
  };
  check_transforms("grad of addmm (bias)", gfun,
                   {rnd({4}), rnd({3, 2}), rnd({2, 4})});
}

// ---- gather_mm -------------------------------------------------------------

array picks(std::vector<int> v, Shape shape) {
  return astype(array(v, shape, int32), uint32);
}

ArrayFn gmm(bool sorted = false) {
  return [sorted](const std::vector<array>& in) {
    return gather_mm(in[0], in[1], in[2], in[3], sorted);
  };
}

TEST(GradGatherMM, RepeatedPicksSumIntoTheirMatrices) {
  // Matrices picked twice get both picks' gradients; those never picked
  // get zeros (a's matrix 3, b's matrix 2).
  std::vector<array> in = {rnd({4, 2, 3}), rnd({3, 3, 5}),
                           picks({0, 2, 2, 1, 0}, {5}),
                           picks({1, 0, 1, 1, 0}, {5})};
  EXPECT_TRUE(check_vjp(gmm(), in, 1e-6, {2, 3}));
  EXPECT_TRUE(check_jvp(gmm(), in, 1e-8, {2, 3}));
  // Broadcast (3, 1) x (1, 2) indices, b read transposed, rows of one.
  std::vector<array> mo = {rnd({3, 1, 4}), swapaxes(rnd({2, 3, 4}), -1, -2),
                           picks({0, 1, 2}, {3, 1}), picks({1, 0}, {1, 2})};
  EXPECT_TRUE(check_vjp(gmm(true), mo, 1e-6, {2, 3}));
  EXPECT_TRUE(check_jvp(gmm(true), mo, 1e-8, {2, 3}));
}

TEST(GradGatherMM, MatchesTheGatheredMatmul) {
  // The gradients equal those of matmul over take()n copies.
  auto a = rnd({3, 2, 4}), b = rnd({4, 4, 3}), c = rnd({6, 2, 3});
  auto li = picks({2, 0, 1, 1, 2, 0}, {6}), ri = picks({3, 3, 0, 1, 2, 3}, {6});
  auto loss = [&](bool gathered) {
    return [&, gathered](const std::vector<array>& in) {
      auto p = gathered ? gather_mm(in[0], in[1], li, ri)
                        : matmul(take(in[0], li, 0), take(in[1], ri, 0));
      return sum(multiply(c, p));
    };
  };
  auto g = grad(loss(true), std::vector<int>{0, 1})({a, b});
  auto w = grad(loss(false), std::vector<int>{0, 1})({a, b});
  EXPECT_TRUE(all_close(to_doubles(g[0]), to_doubles(w[0]), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(to_doubles(g[1]), to_doubles(w[1]), 1e-12, 1e-12));
}

TEST(GradGatherMM, VmapOverEachInput) {
  auto a = rnd({3, 2, 4}), b = rnd({4, 4, 3});
  auto li = picks({2, 0, 1, 1}, {4}), ri = picks({3, 3, 0, 1}, {4});
  EXPECT_TRUE(check_vmap(gmm(), {rnd({2, 3, 2, 4}), b, li, ri}, {0, -1, -1, -1}));
  EXPECT_TRUE(check_vmap(gmm(), {a, rnd({4, 4, 3, 2}), li, ri}, {-1, 3, -1, -1}));
  auto lis = picks({0, 1, 2, 2, 1, 0, 0, 0}, {2, 4});
  auto ris = picks({0, 1, 2, 3, 3, 2, 1, 0}, {4, 2});
  EXPECT_TRUE(check_vmap(gmm(), {a, b, lis, ri}, {-1, -1, 0, -1}));
  EXPECT_TRUE(check_vmap(gmm(), {a, b, li, ris}, {-1, -1, -1, 1}));
  EXPECT_TRUE(check_vmap(gmm(), {rnd({2, 3, 2, 4}), rnd({4, 4, 3, 2}), lis, ris},
                         {0, 3, 0, 1}));
  // Gradients under vmap: per-example gradients of a mixture of experts.
  auto f = [&](const std::vector<array>& in) {
    return grad([&](const std::vector<array>& x) {
      return sum(square(gather_mm(x[0], x[1], li, ri)));
    }, std::vector<int>{1})({in[0], in[1]})[0];
  };
  EXPECT_TRUE(check_vmap(f, {rnd({2, 3, 2, 4}), b}, {0, -1}));
}

// ---- segmented_mm ----------------------------------------------------------

TEST(GradSegmentedMM, Rules) {
  auto f = [](const std::vector<array>& in) {
    return segmented_mm(in[0], in[1], in[2]);
  };
  // Overlapping, empty and clamped segments.
  array seg = array({0, 3, 2, 6, 4, 4, -1, 9}, {4, 2}, int32);
  std::vector<array> in = {rnd({3, 6}), rnd({6, 4}), seg};
  EXPECT_TRUE(check_vjp(f, in, 1e-6, {2}));
  EXPECT_TRUE(check_jvp(f, in, 1e-8, {2}));
  std::vector<array> tr = {as_transposed(rnd({3, 6})), rnd({6, 4}), seg};
  EXPECT_TRUE(check_vjp(f, tr, 1e-6, {2}));
  EXPECT_TRUE(check_vmap(f, {rnd({2, 3, 6}), rnd({6, 4}), seg}, {0, -1, -1}));
  EXPECT_TRUE(check_vmap(f, {rnd({3, 6}), rnd({6, 4, 2}), seg}, {-1, 2, -1}));
  array segs = array({0, 3, 3, 6, 1, 5, 0, 0}, {2, 2, 2}, int32);
  EXPECT_TRUE(check_vmap(f, {rnd({3, 6}), rnd({6, 4}), segs}, {-1, -1, 0}));
}

TEST(GradGatherMM, BGradientOfManyPicksIsOneSegmentedProduct) {
  // The b gradient sorts the picks by matrix and sums each matrix's rows
  // in one product: equal to the per-pick sum, also for unsorted, negative
  // and clamped picks and several rows per pick.
  auto a = rnd({4, 3, 5}), b = rnd({3, 5, 2}), c = rnd({9, 3, 2});
  array li = astype(array({3, 0, 1, 1, 2, 0, 3, 2, 1}, {9}, int32), uint32);
  array ri = astype(array({2, -1, 0, 7, 1, 1, 0, 2, -3}, {9}, int32), uint32);
  auto g = grad(
      [&](const std::vector<array>& in) {
        return sum(multiply(c, gather_mm(in[0], in[1], li, ri)));
      },
      std::vector<int>{1})({a, b})[0];
  auto av = to_doubles(a), cv = to_doubles(c);
  std::vector<int> lv = {3, 0, 1, 1, 2, 0, 3, 2, 1}, rv = {2, 2, 0, 2, 1, 1, 0, 2, 0};
  std::vector<double> want(3 * 5 * 2, 0.0);
  for (int p = 0; p < 9; ++p) {
    for (int r = 0; r < 3; ++r) {
      for (int k = 0; k < 5; ++k) {
        for (int n = 0; n < 2; ++n) {
          want[(rv[p] * 5 + k) * 2 + n] +=
              av[(lv[p] * 3 + r) * 5 + k] * cv[(p * 3 + r) * 2 + n];
        }
      }
    }
  }
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-12, 1e-12));
}

// ---- inverse and solve -----------------------------------------------------

TEST(GradInverse, Rules) {
  auto f = one([](auto& a) { return linalg::inv(a); });
  check_transforms("inv", f, {well_conditioned({3, 3})});
  check_transforms("inv batched", f, {well_conditioned({2, 3, 3})});
  check_transforms("inv transposed", f,
                   {as_transposed(well_conditioned({4, 4}))});
  // d inv = -inv dA inv; at A = 2 I that is -dA / 4
  auto t = rnd({3, 3});
  auto d = jvp([](const array& a) { return linalg::inv(a); },
               multiply(eye(3, 3, 0, float64), array(2.0, float64)), t)
               .second;
  EXPECT_TRUE(all_close(to_doubles(d),
                        map1(to_doubles(t), [](double v) { return -v / 4; }),
                        1e-12, 1e-12));
  check_transforms("grad of inv", one([](auto& a) {
                     return grad([](const array& x) {
                       return sum(square(linalg::inv(x)));
                     })(a);
                   }),
                   {well_conditioned({3, 3})});
}

TEST(GradSolve, Rules) {
  auto f = two([](auto& a, auto& b) { return linalg::solve(a, b); });
  check_transforms("solve", f, {well_conditioned({3, 3}), rnd({3, 2})});
  check_transforms("solve vector", f, {well_conditioned({3, 3}), rnd({3})});
  check_transforms("solve batched a", f,
                   {well_conditioned({2, 3, 3}), rnd({3, 2})});
  check_transforms("solve batched b", f,
                   {well_conditioned({3, 3}), rnd({2, 3, 2})});
  check_transforms(
      "solve transposed", f,
      {as_transposed(well_conditioned({3, 3})), as_transposed(rnd({3, 4}))});
  auto a = well_conditioned({3, 3});
  EXPECT_TRUE(check_vmap(f, {a, rnd({2, 3, 2})}, {-1, 0}));
  EXPECT_TRUE(
      check_vmap(f, {well_conditioned({2, 3, 3}), rnd({3, 2})}, {0, -1}));
  check_transforms("grad of solve",
                   [](const std::vector<array>& in) {
                     return grad(
                         [](const std::vector<array>& x) {
                           return sum(sin(linalg::solve(x[0], x[1])));
                         },
                         0)(in)[0];
                   },
                   {a, rnd({3, 2})});
}

TEST(GradSolve, MatchesInverseTimesB) {
  auto a = well_conditioned({3, 3}), b = rnd({3, 2});
  auto loss = [](bool use_solve) {
    return [use_solve](const std::vector<array>& in) {
      auto x = use_solve ? linalg::solve(in[0], in[1])
                         : matmul(linalg::inv(in[0]), in[1]);
      return sum(sin(x));
    };
  };
  auto g1 = grad(loss(true), std::vector<int>{0, 1})({a, b});
  auto g2 = grad(loss(false), std::vector<int>{0, 1})({a, b});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(all_close(to_doubles(g1[i]), to_doubles(g2[i]), 1e-10, 1e-12));
  }
}

TEST(GradSolve, SingularMatrixRaisesAtEvaluation) {
  // Building the gradient graph is fine; evaluating it reports the op.
  auto a = array({1.0, 2.0, 2.0, 4.0}, {2, 2}, float64);
  auto cases = std::vector<std::pair<std::string, std::function<array()>>>{
      {"linalg::solve",
       [&] {
         return grad([&](const array& b) { return sum(linalg::solve(a, b)); })(
             rnd({2, 3}));
       }},
      {"linalg::inv", [&] {
         return grad([](const array& x) { return sum(linalg::inv(x)); })(a);
       }}};
  for (auto& [op, f] : cases) {
    auto g = f();
    try {
      g.eval();
      ADD_FAILURE() << op << " did not raise";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("[" + op + "]"), std::string::npos)
          << e.what();
    }
  }
}

} // namespace
} // namespace kiln::test
