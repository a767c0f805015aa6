// The .mlxfn rows of the linear algebra, FFT, gathered and quantized
// matrix product families: round trips from C++ on fresh inputs, and
// parameters or inputs that do not make sense, which raise naming the
// primitive (the crossing with MLX itself is python/tests/test_export.py).
#include <gtest/gtest.h>

#include <string>

#include "kiln/io/mlxfn_ops.h"
#include "kiln/kiln.h"
#include "tests/test_utils.h"

namespace kiln {
namespace {

namespace m = detail::mlxfn;

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

// f exported on example inputs, then run on fresh ones against f itself.
void expect_round_trip(const char* file, const ExportedFn& f, const Args& example,
                       const Args& fresh, float tol = 1e-5f) {
  auto path = temp_path(file);
  export_function(path, f, example);
  auto got = import_function(path)(fresh);
  auto want = f(fresh, {});
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(allclose(got[k], want[k], tol, tol).item<bool>()) << file << " " << k;
  }
}

array spd(int n) {
  array a = random::normal({n, n});
  return add(matmul(a, transpose(a)), multiply(array(float(n)), eye(n)));
}

TEST(MlxfnFamilies, LinearAlgebraRoundTrips) {
  ExportedFn f = [](const Args& a, const Kwargs&) {
    auto [w, v] = linalg::eigh(a[0], "U");
    auto [q, r] = linalg::qr(a[0]);
    return std::vector<array>{w, matmul(q, r), linalg::inv(a[0]),
                              linalg::cholesky(a[0], true),
                              linalg::svd(a[0], false)[0],
                              linalg::solve(a[0], a[1])};
  };
  expect_round_trip("mlxfn_linalg.mlxfn", f, {spd(4), ones({4, 2})},
                    {spd(4), random::normal({4, 2})}, 1e-4f);
}

TEST(MlxfnFamilies, FFTAndGatherMMRoundTrips) {
  ExportedFn f = [](const Args& a, const Kwargs&) {
    return std::vector<array>{fft::irfft(fft::rfft(a[0]), 7),
                              gather_mm(a[1], a[2], a[3], a[4])};
  };
  array i = array({1u, 0u, 1u}), j = array({0u, 0u, 1u});
  expect_round_trip("mlxfn_fft.mlxfn", f,
                    {ones({3, 7}), ones({2, 2, 3}), ones({2, 3, 4}), i, j},
                    {random::normal({3, 7}), random::normal({2, 2, 3}),
                     random::normal({2, 3, 4}), j, i},
                    1e-4f);
}

TEST(MlxfnFamilies, QuantizedRoundTrips) {
  array w = random::normal({32, 64});
  auto [wq, scales, biases] = quantize(w, 32, 4);
  auto [fq, fscales] = quantize_fp(w, 32, 4, "mxfp4");
  ExportedFn f = [=](const Args& a, const Kwargs&) {
    return std::vector<array>{
        quantized_matmul(a[0], wq, scales, biases, true, 32, 4),
        quantized_matmul_fp(a[0], fq, fscales, true, 32, 4, "mxfp4"),
        dequantize(wq, scales, biases, 32, 4)};
  };
  expect_round_trip("mlxfn_quantized.mlxfn", f, {ones({2, 64})},
                    {random::normal({2, 64})}, 1e-4f);
}

TEST(MlxfnFamilies, MeanAndVarCountsRoundTrip) {
  ExportedFn f = [](const Args& a, const Kwargs&) {
    return std::vector<array>{add(mean(a[0], std::vector<int>{0}), var(a[0], std::vector<int>{0}, false, 1))};
  };
  expect_round_trip("mlxfn_counts.mlxfn", f, {ones({5, 3})},
                    {random::normal({5, 3})});
}

// A node built straight from the table with the given parameters.
void expect_rejected(const std::string& name, m::State st, std::vector<array> in,
                     Dtype out = float32) {
  m::NodeInfo info{{Shape{}}, {out}, false};
  try {
    m::build(name, st, in, info, default_stream(Device::cpu));
    ADD_FAILURE() << name << " accepted parameters that make no sense";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(MlxfnFamilies, NonsenseParametersRaiseNamingTheOp) {
  array x = ones({4, 4}), c = astype(ones({4, 4}), complex64);
  auto flags = [](std::vector<int64_t> axes, int a, int b, int c2) {
    return m::State{m::list(axes), m::integer(a), m::integer(b), m::integer(c2)};
  };
  expect_rejected("FFT", flags({5}, 0, 0, 0), {c});         // axis out of range
  expect_rejected("FFT", flags({1, 1}, 0, 0, 0), {c});      // repeated axis
  expect_rejected("FFT", flags({1}, 0, 0, 0), {x});         // wrong dtype
  expect_rejected("Eigh", {m::text("X"), m::integer(1)}, {x});
  expect_rejected("Inverse", {m::integer(0), m::integer(0)}, {ones({4})});
  expect_rejected("Quantize", {m::Value{}, m::integer(64), m::integer(4),
                               m::integer(9), m::integer(0)}, {x});
  expect_rejected("QuantizedMatmul", {m::integer(32), m::integer(4),
                                      m::integer(1), m::integer(1)}, {x, x});
  expect_rejected("GatherQMM", {m::integer(64), m::integer(4), m::integer(0),
                                m::integer(1), m::integer(0), m::integer(0)}, {x});
  expect_rejected("NumberOfElements", {m::list(std::vector<int>{3}), m::integer(0),
                                       m::dtype_value(float32)}, {x});
  expect_rejected("BlockMaskedMM", {m::integer(32)}, {x, x, ones({3, 3}, bool_)});
  expect_rejected("GatherMM", {m::integer(0), m::integer(0)}, {x, x});
  // A mask of another shape, a mask that is not boolean, values whose batch
  // differs; a Depends with more outputs than inputs.
  array a = ones({1, 4, 4}), mask = astype(ones({1, 4, 4}), bool_);
  expect_rejected("MaskedScatter", {}, {a, astype(ones({1, 16}), bool_), ones({1, 16})});
  expect_rejected("MaskedScatter", {}, {a, ones({1, 4, 4}), ones({1, 16})});
  expect_rejected("MaskedScatter", {}, {a, mask, ones({2, 16})});
  m::NodeInfo two{{Shape{}, Shape{}}, {float32, float32}, false};
  EXPECT_THROW(m::build("Depends", {}, {x}, two, default_stream(Device::cpu)),
               std::invalid_argument);
}

// The norms' VJP nodes against the gradients of the norms written out in
// elementwise ops and reductions (autodiff of those, not the fused norms'
// own backward), with a weight (and bias) and with none (MLX passes a
// scalar then).
TEST(MlxfnFamilies, NormVJPNodesMatchTheComposedNormsGradients) {
  auto cpu = default_stream(Device::cpu);
  array x = random::normal({3, 5, 16}), g = random::normal({3, 5, 16});
  array w = random::normal({16}), b = random::normal({16});
  array eps(1e-5f);
  auto close = [](const array& a, const array& b2) {
    EXPECT_TRUE(allclose(a, b2, 1e-4, 1e-5).item<bool>());
  };
  for (bool weighted : {true, false}) {
    array wr = weighted ? w : array(1.0f), br = weighted ? b : array(0.0f);
    auto rms = vjp(
        [&](const std::vector<array>& p) {
          array n = rsqrt(add(mean(square(p[0]), {-1}, true), eps));
          return std::vector<array>{multiply(multiply(p[0], n), p[1])};
        },
        {x, wr}, {g}).second;
    m::NodeInfo info2{{x.shape(), wr.shape()}, {float32, float32}, false};
    auto node = m::build("RMSNormVJP", {m::Value{}, m::real(1e-5)},
                         {x, wr, g}, info2, cpu);
    close(node[0], rms[0]);
    if (weighted) close(node[1], rms[1]);
    else close(node[1], zeros_like(wr));
    auto ln = vjp(
        [&](const std::vector<array>& p) {
          array xc = subtract(p[0], mean(p[0], {-1}, true));
          array n = rsqrt(add(mean(square(xc), {-1}, true), eps));
          return std::vector<array>{add(multiply(multiply(xc, n), p[1]), p[2])};
        },
        {x, wr, br}, {g}).second;
    m::NodeInfo info3{{x.shape(), wr.shape(), br.shape()},
                      {float32, float32, float32}, false};
    auto lnode = m::build("LayerNormVJP", {m::Value{}, m::real(1e-5)},
                          {x, wr, br, g}, info3, cpu);
    close(lnode[0], ln[0]);
    if (weighted) {
      close(lnode[1], ln[1]);
      close(lnode[2], ln[2]);
    } else {
      close(lnode[1], zeros_like(wr));
      close(lnode[2], zeros_like(br));
    }
  }
}

TEST(MlxfnFamilies, MaskedScatterTakesTheValuesInOrderPerBatch) {
  // Two batches (as a vmap leaves them): the k-th true position of each
  // takes that batch's k-th value; the extra values go unused.
  array a = zeros({2, 3}), values = reshape(arange(0.0, 8.0, 1.0), {2, 4});
  array mask = array({true, false, true, false, true, true}, {2, 3});
  m::NodeInfo info{{Shape{2, 3}}, {float32}, false};
  auto out = m::build("MaskedScatter", {}, {a, mask, values}, info,
                      default_stream(Device::cpu));
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want = {0, 0, 1, 0, 4, 5};
  auto got = out[0];
  eval(got);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got.data<float>()[i], want[i]) << i;
}

TEST(MlxfnFamilies, OrthoFFTRaisesOnExport) {
  ExportedFn f = [](const Args& a, const Kwargs&) {
    return std::vector<array>{fft::fft(a[0], std::nullopt, -1, FFTNorm::ortho)};
  };
  EXPECT_THROW(export_function(temp_path("mlxfn_ortho.mlxfn"), f,
                               {astype(ones({8}), complex64)}),
               std::invalid_argument);
}

} // namespace
} // namespace kiln
