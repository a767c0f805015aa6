// Matmul and AddMM through cuBLASLt against the CPU backend: every GEMM
// dtype (complex64 also against a float64 product of its parts), operands transposed and sliced (read in place) or in layouts that
// need a copy, batches with broadcast batch dimensions, and AddMM's bias
// epilogue (packed vector, beta == 1, alpha scaling only the product)
// against its general path.
#include "cuda/gpu_fixture.h"
#include "kiln/config.h"
#if KILN_HAS_CUDA
#include "kiln/backend/cuda/cublas.h"
#endif
#include "ops/linalg_helpers.h"

namespace kiln::test {
namespace {

using GpuMatmul = GpuTest;

// float32 runs without TF32 by default, so it is close to the CPU's sums.
double gemm_tol(Dtype dt) {
  if (dt == float64) return 1e-10;
  if (dt == float32) return 1e-4;
  return 2e-2;
}

const std::vector<Dtype>& gemm_dtypes() {
  static const std::vector<Dtype> d = {float32, float16, bfloat16, float64};
  return d;
}

auto mm = [](const std::vector<array>& v, Device d) {
  return matmul(v[0], v[1], d);
};

TEST_F(GpuMatmul, EveryDtypeAndOperandLayout) {
  for (Dtype dt : gemm_dtypes()) {
    int m = 37, k = 65, n = 19;
    array a = random_array({m, k}, dt, -1, 1);
    array b = random_array({k, n}, dt, -1, 1);
    array at = as_transposed(a); // strides (1, m): read with TRANS
    array bt = as_transposed(b);
    array big = random_array({m + 3, 2 * k}, dt, -1, 1);
    array a_sliced = slice(big, Shape{2, 3}, Shape{m + 2, k + 3}); // ld 2k
    array a_strided = slice(big, Shape{0, 0}, Shape{m, 2 * k}, Shape{1, 2});
    for (auto [x, y] : {std::pair{a, b}, std::pair{at, b}, std::pair{a, bt},
                        std::pair{at, bt}, std::pair{a_sliced, b},
                        std::pair{a_strided, b}}) {
      EXPECT_TRUE(same_on_devices(mm, {x, y}, gemm_tol(dt)))
          << dtype_name(dt);
    }
  }
}

TEST_F(GpuMatmul, BatchedWithBroadcastBatches) {
  for (Dtype dt : gemm_dtypes()) {
    array a = random_array({3, 4, 21, 33}, dt, -1, 1);
    array b = random_array({3, 4, 33, 17}, dt, -1, 1);
    array b1 = random_array({33, 17}, dt, -1, 1);   // shared: folds into M
    array a1 = random_array({1, 4, 21, 33}, dt, -1, 1);
    EXPECT_TRUE(same_on_devices(mm, {a, b}, gemm_tol(dt))) << dtype_name(dt);
    EXPECT_TRUE(same_on_devices(mm, {a, b1}, gemm_tol(dt)))
        << dtype_name(dt);
    EXPECT_TRUE(same_on_devices(mm, {a1, b}, gemm_tol(dt)))
        << dtype_name(dt);
    // A reversed batch (a negative batch stride) is copied, not read with
    // stride 0.
    EXPECT_TRUE(same_on_devices(mm, {reversed(a, 1), b}, gemm_tol(dt)))
        << dtype_name(dt);
    EXPECT_TRUE(same_on_devices(mm, {transpose(a, {1, 0, 2, 3}),
                                     transpose(b, {1, 0, 2, 3})},
                                gemm_tol(dt)))
        << dtype_name(dt) << " batch needing a copy";
    EXPECT_TRUE(same_on_devices(
        mm, {a, transpose(random_array({3, 4, 17, 33}, dt), {0, 1, 3, 2})},
        gemm_tol(dt)))
        << dtype_name(dt) << " transposed batch";
  }
}

TEST_F(GpuMatmul, AgainstFloat64Reference) {
  // Independent of the CPU backend: a hand-written float64 product.
  int m = 9, k = 13, n = 7;
  array a = random_array({m, k}, float32);
  array b = random_array({k, n}, float32);
  array g = matmul(a, b, Device::gpu);
  auto x = to_doubles(a), y = to_doubles(b);
  std::vector<double> want(m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) want[i * n + j] += x[i * k + p] * y[p * n + j];
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-5, 1e-5));
}

TEST_F(GpuMatmul, AddMMBiasEpilogueAndGeneralPath) {
  for (Dtype dt : gemm_dtypes()) {
    array x = random_array({4, 16, 32}, dt, -1, 1);
    array w = random_array({24, 32}, dt, -1, 1);
    array bias = random_array({24}, dt, -1, 1);
    array full = random_array({4, 16, 24}, dt, -1, 1);
    for (auto [alpha, beta] : {std::pair{1.0f, 1.0f}, std::pair{2.0f, 1.0f},
                               std::pair{0.5f, 0.25f}, std::pair{1.5f, 0.0f}}) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return addmm(v[0], v[1], transpose(v[2]), alpha, beta, d);
      };
      EXPECT_TRUE(same_on_devices(fn, {bias, x, w}, gemm_tol(dt)))
          << dtype_name(dt) << " vector bias alpha " << alpha << " beta "
          << beta;
      EXPECT_TRUE(same_on_devices(fn, {full, x, w}, gemm_tol(dt)))
          << dtype_name(dt) << " full bias";
      // A bias that is a sliced (offset, not 16-byte aligned) vector.
      array padded = random_array({27}, dt, -1, 1);
      EXPECT_TRUE(same_on_devices(fn, {slice(padded, Shape{3}, Shape{27}), x, w},
                                  gemm_tol(dt)))
          << dtype_name(dt) << " offset bias";
    }
  }
}

TEST_F(GpuMatmul, AddMMAlphaScalesOnlyTheProduct) {
  // Hand-computed: alpha * (a @ b) + bias, with the bias unscaled.
  array a({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  array b({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
  array c({10.0f, 20.0f});
  array g = addmm(c, a, b, 2.0f, 1.0f, Device::gpu);
  std::vector<double> want = {2 * (0.5 + 4) + 10, 2 * (-1 + 0.5) + 20,
                              2 * (1.5 + 8) + 10, 2 * (-3 + 1) + 20};
  EXPECT_TRUE(all_close(to_doubles(g), want, 1e-6, 1e-6));
}

TEST_F(GpuMatmul, Complex64EveryLayoutBatchAndAddMM) {
  // Against a float64 product of the parts (independent of both backends):
  // (ar + i ai)(br + i bi) = ar br - ai bi + i (ar bi + ai br).
  int m = 21, k = 45, n = 13;
  array a = complex_random({m, k});
  array b = complex_random({k, n});
  auto part = [](const array& z, bool imaginary) {
    return astype(imaginary ? imag(z) : real(z), float64, Device::cpu);
  };
  auto mm64 = [](const array& x, const array& y) {
    return matmul(x, y, Device::cpu);
  };
  array re = subtract(mm64(part(a, false), part(b, false)),
                      mm64(part(a, true), part(b, true)));
  array im = add(mm64(part(a, false), part(b, true)),
                 mm64(part(a, true), part(b, false)));
  array g = matmul(a, b, Device::gpu);
  EXPECT_TRUE(all_close(to_doubles(real(g)), to_doubles(re), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(to_doubles(imag(g)), to_doubles(im), 1e-5, 1e-5));
  // Transposed (not conjugated) and sliced operands, against the CPU.
  array big = complex_random({m + 3, 2 * k});
  array a_sliced = slice(big, Shape{2, 3}, Shape{m + 2, k + 3});
  array a_strided = slice(big, Shape{0, 0}, Shape{m, 2 * k}, Shape{1, 2});
  array at = as_transposed(a), bt = as_transposed(b);
  for (auto [x, y] : {std::pair{at, b}, std::pair{a, bt}, std::pair{at, bt},
                      std::pair{a_sliced, b}, std::pair{a_strided, b}}) {
    EXPECT_TRUE(same_on_devices(mm, {x, y}, 1e-4));
  }
  // Batches, one of them broadcast.
  array ab = complex_random({3, 4, 9, 11});
  array bb = complex_random({1, 4, 11, 6});
  EXPECT_TRUE(same_on_devices(mm, {ab, bb}, 1e-4));
  EXPECT_TRUE(same_on_devices(mm, {ab, complex_random({11, 6})}, 1e-4));
  // AddMM: a vector bias (no epilogue for complex64) and a full one, with
  // alpha and beta.
  array x = complex_random({4, 16, 32});
  array w = complex_random({24, 32});
  for (auto [alpha, beta] : {std::pair{1.0f, 1.0f}, std::pair{0.5f, 0.25f},
                             std::pair{1.5f, 0.0f}}) {
    auto fn = [&](const std::vector<array>& v, Device d) {
      return addmm(v[0], v[1], transpose(v[2]), alpha, beta, d);
    };
    EXPECT_TRUE(same_on_devices(fn, {complex_random({24}), x, w}, 1e-4))
        << "vector bias alpha " << alpha << " beta " << beta;
    EXPECT_TRUE(same_on_devices(fn, {complex_random({4, 16, 24}), x, w}, 1e-4))
        << "full bias alpha " << alpha << " beta " << beta;
  }
}

TEST_F(GpuMatmul, EmptyInnerDimensionOnTheGpu) {
  // A product over nothing is zeros, and addmm's beta * c: written on the
  // GPU (the output stays in device memory), as the CPU writes them.
  for (Dtype dt : {float32, bfloat16}) {
    array a = random_array({2, 5, 0}, dt);
    array b = random_array({0, 3}, dt);
    EXPECT_TRUE(same_on_devices(mm, {a, b}, 0)) << dtype_name(dt);
    array g = matmul(a, b, Device::gpu);
    eval(g);
    EXPECT_TRUE(g.on_device()) << dtype_name(dt);
    for (float beta : {0.0f, 0.5f, 2.0f}) {
      for (Shape cs : {Shape{3}, Shape{5, 3}, Shape{2, 5, 3}}) {
        auto fn = [beta](const std::vector<array>& v, Device d) {
          return addmm(v[0], v[1], v[2], 1.5f, beta, d);
        };
        std::string what = dtype_name(dt) + " beta " + std::to_string(beta) +
                           " c " + std::to_string(cs.size()) + "-d";
        array c = random_array(cs, dt, 1, 2);
        EXPECT_TRUE(same_on_devices(fn, {c, a, b}, 0)) << what;
        array ga = addmm(c, a, b, 1.5f, beta, Device::gpu);
        eval(ga);
        EXPECT_TRUE(ga.on_device()) << what;
      }
    }
  }
}

TEST_F(GpuMatmul, EmptyAndUnsupportedDtypesStillWork) {
  array a = random_array({5, 0}, float32);
  array b = random_array({0, 3}, float32);
  EXPECT_TRUE(same_on_devices(mm, {a, b}, 0));
  array ai = random_array({4, 6}, int32, -5, 5);
  array bi = random_array({6, 2}, int32, -5, 5);
  // Integer products are not cuBLASLt's: they run on the CPU fallback, or
  // the op refuses them as on the CPU.
  bool cpu_throws = false;
  try {
    eval(matmul(ai, bi, Device::cpu));
  } catch (const std::invalid_argument&) {
    cpu_throws = true;
  }
  if (cpu_throws) {
    EXPECT_THROW(eval(matmul(ai, bi, Device::gpu)), std::invalid_argument);
  } else {
    EXPECT_TRUE(same_on_devices(mm, {ai, bi}, 0));
  }
}

array picks_of(std::vector<int> v, Shape shape, Dtype dt = uint32) {
  return astype(array(v, shape, int32), dt);
}

auto gmm = [](const std::vector<array>& v, Device d) {
  return gather_mm(v[0], v[1], v[2], v[3], false, d);
};

TEST_F(GpuMatmul, GatherMMEveryDtypeLayoutAndPick) {
  for (Dtype dt : gemm_dtypes()) {
    array a = random_array({5, 3, 40}, dt, -1, 1);
    array b = random_array({4, 40, 24}, dt, -1, 1);
    // b stored (E, N, K) and read transposed, as a mixture of experts does.
    array bt = swapaxes(random_array({4, 24, 40}, dt, -1, 1), -1, -2);
    array at = swapaxes(random_array({5, 40, 3}, dt, -1, 1), -1, -2);
    array big = random_array({5, 3, 80}, dt, -1, 1);
    array a_strided = slice(big, Shape{0, 0, 0}, Shape{5, 3, 80}, Shape{1, 1, 2});
    array li = picks_of({4, 0, 2, 2, 1, 3, 0}, {7});
    array ri = picks_of({3, 3, 0, 1, 3, 2, 3}, {7});
    for (auto [x, y] : {std::pair{a, b}, std::pair{a, bt}, std::pair{at, b},
                        std::pair{a_strided, bt},
                        std::pair{reversed(a, 0), reversed(b, 2)}}) {
      EXPECT_TRUE(same_on_devices(gmm, {x, y, li, ri}, gemm_tol(dt)))
          << dtype_name(dt);
    }
    // Broadcast (3, 1) x (1, 4) indices; negative and out-of-range picks
    // read as on the CPU.
    EXPECT_TRUE(same_on_devices(
        gmm, {a, b, picks_of({1, 4, 0}, {3, 1}), picks_of({2, 0, 3, 1}, {1, 4})},
        gemm_tol(dt)))
        << dtype_name(dt);
    EXPECT_TRUE(same_on_devices(
        gmm, {a, b, picks_of({7, -1, -2}, {3}, int32), picks_of({-5, 9, -1}, {3}, int64)},
        gemm_tol(dt)))
        << dtype_name(dt);
  }
  // Empty picks and an empty inner dimension.
  array a = random_array({3, 2, 4}, float32), b = random_array({3, 4, 5}, float32);
  EXPECT_TRUE(same_on_devices(gmm, {a, b, picks_of({}, {0}), picks_of({}, {0})}, 0));
  EXPECT_TRUE(same_on_devices(gmm, {random_array({3, 2, 0}, float32),
                                    random_array({3, 0, 5}, float32),
                                    picks_of({1, 2}, {2}), picks_of({0, 0}, {2})},
                              0));
}

TEST_F(GpuMatmul, GatherMMReadsPickedMatricesInPlace) {
  // 256 tokens, 2 picks each, of 16 experts of 512 -> 1024: a gathered copy
  // of b's picked matrices would take 1 GiB; the products themselves 1 MiB.
  array x = random_array({256, 1, 512}, float32, -1, 1);
  array w = random_array({16, 512, 1024}, float32, -1, 1);
  std::vector<int> idx;
  for (int t = 0; t < 256; ++t) idx.insert(idx.end(), {t % 16, (t * 7) % 16});
  array ri = picks_of(idx, {256, 2});
  array li = reshape(arange(0.0, 256.0, uint32), {256, 1});
  // On the device before the measurement.
  array xg = multiply(x, array(1.0f), Device::gpu);
  array wg = multiply(w, array(1.0f), Device::gpu);
  eval({xg, wg});
  size_t before = gpu::get_active_memory();
  gpu::reset_peak_memory();
  array out = gather_mm(xg, wg, li, ri, false, Device::gpu);
  eval(out);
  EXPECT_TRUE(out.on_device());
  EXPECT_LT(gpu::get_peak_memory() - before, size_t(16) << 20);
  EXPECT_TRUE(same_on_devices(gmm, {x, w, li, ri}, gemm_tol(float32)));
}

// Grouped GEMMs run so far (none in a build without CUDA, where the GPU
// tests skip).
int64_t grouped_calls() {
#if KILN_HAS_CUDA
  return cuda::cublas::grouped_gemm_calls();
#else
  return 0;
#endif
}

TEST_F(GpuMatmul, GatherMMSortedPicksRunOneGemmPerMatrix) {
  // mlx-lm's sorted prefill: 48 tokens, 2 experts each, picks sorted by
  // expert with lhs naming each pick's token.
  std::vector<int> experts, tokens;
  for (int e = 0; e < 4; ++e) {
    for (int t = 0; t < 48; ++t) {
      if (t % 4 == e || (t * 3 + 1) % 4 == e) {
        experts.push_back(e);
        tokens.push_back(t);
      }
    }
  }
  int picks = static_cast<int>(experts.size());
  array ri = picks_of(experts, {picks});
  array li = picks_of(tokens, {picks});
  auto sorted_gmm = [](const std::vector<array>& v, Device d) {
    return gather_mm(v[0], v[1], v[2], v[3], true, d);
  };
  for (Dtype dt : gemm_dtypes()) {
    for (int m : {1, 3}) {
      array a = random_array({48, m, 40}, dt, -1, 1);
      array bt = swapaxes(random_array({4, 24, 40}, dt, -1, 1), -1, -2);
      int64_t before = grouped_calls();
      EXPECT_TRUE(same_on_devices(sorted_gmm, {a, bt, li, ri}, gemm_tol(dt)))
          << dtype_name(dt) << " m " << m;
      EXPECT_EQ(grouped_calls(), before + 1)
          << dtype_name(dt) << " m " << m;
    }
  }
  // A hint that is wrong (unsorted picks) takes the batched route, with
  // the same products.
  array a = random_array({48, 1, 40}, float32, -1, 1);
  array b = random_array({4, 40, 24}, float32, -1, 1);
  std::vector<int> shuffled = experts;
  std::swap(shuffled.front(), shuffled.back());
  int64_t before = grouped_calls();
  EXPECT_TRUE(same_on_devices(
      sorted_gmm, {a, b, li, picks_of(shuffled, {picks})}, gemm_tol(float32)));
  EXPECT_EQ(grouped_calls(), before);
}

TEST_F(GpuMatmul, SegmentedMMOneGroupedGemm) {
  auto smm = [](const std::vector<array>& v, Device d) {
    return segmented_mm(v[0], v[1], v[2], d);
  };
  // A partition, an empty, an overlapping, a clamped and an inverted
  // segment: one grouped GEMM over the non-empty ones, zeros elsewhere.
  array seg = array({0, 9, 9, 9, 9, 40, 3, 30, -5, 50, 20, 10}, {6, 2}, int32);
  for (Dtype dt : gemm_dtypes()) {
    array a = random_array({13, 40}, dt, -1, 1);
    array b = random_array({40, 11}, dt, -1, 1);
    array at = swapaxes(random_array({40, 13}, dt, -1, 1), 0, 1);
    array bt = swapaxes(random_array({11, 40}, dt, -1, 1), 0, 1);
    for (auto [x, y] : {std::pair{a, b}, std::pair{at, b}, std::pair{a, bt},
                        std::pair{at, bt}}) {
      int64_t before = grouped_calls();
      EXPECT_TRUE(same_on_devices(smm, {x, y, seg}, gemm_tol(dt)))
          << dtype_name(dt);
      EXPECT_EQ(grouped_calls(), before + 1) << dtype_name(dt);
    }
  }
}

TEST_F(GpuMatmul, GatherMMGradientsOnTheGpu) {
  // The b gradient (picks sorted on the device, one segmented product) and
  // the a gradient, against the CPU's.
  array a = random_array({24, 2, 16}, float32, -1, 1);
  array b = random_array({4, 16, 8}, float32, -1, 1);
  std::vector<int> r;
  for (int t = 0; t < 24; ++t) r.push_back((t * 7 + 3) % 4);
  array ri = picks_of(r, {24});
  auto grads = [&](const std::vector<array>& v, Device d) {
    std::function<array(const std::vector<array>&)> loss =
        [&](const std::vector<array>& in) {
          array y = gather_mm(in[0], in[1], std::nullopt, ri, false, d);
          return sum(square(y, d), false, d);
        };
    auto g = grad(loss, std::vector<int>{0, 1})({v[0], v[1]});
    return concatenate(
        std::vector<array>{reshape(g[0], {-1}, d), reshape(g[1], {-1}, d)}, 0,
        d);
  };
  EXPECT_TRUE(same_on_devices(grads, {a, b}, 1e-4));
}

} // namespace
} // namespace kiln::test
