// Compiled (fused) regions on the GPU against the same functions uncompiled
// on the CPU: every region case and dtype in each layout (the outputs'
// strides and data size too), scalar inputs, edge sizes, shapeless calls at
// new shapes, the seed's bias cast before addmm, regions run op by op, and
// the rows kernel's regions (per-row and per-column broadcasts: the backward
// of LayerNorm, softmax and cross-entropy) at every width and alignment.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <climits>

#include "cuda/fused_regions.h"
#include "cuda/gpu_fixture.h"
#include "kiln/backend/cuda/jit_module.h"

namespace kiln::test {
namespace {

using GpuCompiled = GpuTest;

// Chains round at every op in 16-bit floats, and the GPU's math functions
// differ from the CPU's by an ulp: a few ulps of slack.
double chain_tolerance(Dtype d) { return 8 * tolerance(d); }

// Output `o` of f compiled (shapeless or not) and run on the GPU, against f
// uncompiled on the CPU.
::testing::AssertionResult fused_matches(const Fn& f,
                                         const std::vector<array>& in,
                                         double tol, const Fn& compiled,
                                         size_t o = 0) {
  auto fn = [&](const std::vector<array>& v, Device d) {
    DefaultDeviceScope scope(d);
    return d == Device::gpu ? compiled(v)[o] : f(v)[o];
  };
  return same_on_devices(fn, in, tol);
}

::testing::AssertionResult fused_matches(const Fn& f,
                                         const std::vector<array>& in,
                                         double tol) {
  auto cf = compile(f);
  size_t outputs = f(in).size();
  for (size_t o = 0; o < outputs; ++o) {
    auto r = fused_matches(f, in, tol, cf, o);
    if (!r) return r << " (output " << o << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(GpuCompiled, EveryRegionDtypeAndLayout) {
  for (auto& c : region_cases()) {
    for (Dtype dt : c.dtypes) {
      array x = random_array({37, 53}, dt, c.lo, c.hi);
      array y = random_array({37, 53}, dt, c.lo, c.hi);
      auto xs = layouts(x), ys = layouts(y);
      for (size_t l = 0; l < xs.size(); ++l) {
        // Both in one layout (the flat kernel, output inheriting it), then
        // x in that layout beside a row-major y (strided, unless both are
        // row-major).
        EXPECT_TRUE(fused_matches(c.f, {xs[l].second, ys[l].second},
                                  chain_tolerance(dt)))
            << c.name << " " << dtype_name(dt) << " both " << xs[l].first;
        EXPECT_TRUE(fused_matches(c.f, {xs[l].second, y}, chain_tolerance(dt)))
            << c.name << " " << dtype_name(dt) << " x " << xs[l].first;
      }
    }
  }
}

TEST_F(GpuCompiled, ScalarInputsBroadcast) {
  for (auto& c : region_cases()) {
    for (Dtype dt : c.dtypes) {
      array x = random_array({19, 33}, dt, c.lo, c.hi);
      array s = random_array({1}, dt, c.lo, c.hi);
      EXPECT_TRUE(fused_matches(c.f, {x, s}, chain_tolerance(dt)))
          << c.name << " " << dtype_name(dt) << " (x, scalar)";
      EXPECT_TRUE(fused_matches(c.f, {s, x}, chain_tolerance(dt)))
          << c.name << " " << dtype_name(dt) << " (scalar, x)";
      // Both one element: a one-element output.
      EXPECT_TRUE(fused_matches(c.f, {s, random_array({1}, dt, c.lo, c.hi)},
                                chain_tolerance(dt)))
          << c.name << " " << dtype_name(dt) << " (scalar, scalar)";
    }
  }
}

TEST_F(GpuCompiled, EdgeSizes) {
  auto& tanh_fma = region_cases()[0];
  for (Dtype dt : float_dtypes()) {
    // Empty; one element; lengths that are no multiple of the vector width
    // or of a block's share; past the grid's step; > 2^16 rows (strided).
    for (Shape s : {Shape{0, 5}, Shape{1, 1}, Shape{3, 7}, Shape{1, 1021},
                    Shape{1 << 20 | 5, 3}, Shape{70001, 3}}) {
      array x = random_array(s, dt), y = random_array(s, dt);
      EXPECT_TRUE(fused_matches(tanh_fma.f, {x, y}, chain_tolerance(dt)))
          << dtype_name(dt) << " " << s[0] << "x" << s[1];
      if (s[0] > 1 && s[1] > 1) {
        EXPECT_TRUE(fused_matches(tanh_fma.f, {as_transposed(x), y},
                                  chain_tolerance(dt)))
            << dtype_name(dt) << " transposed " << s[0] << "x" << s[1];
      }
    }
  }
}

TEST_F(GpuCompiled, MisalignedViewsTakeTheElementPath) {
  // Contiguous views starting 1..3 elements into their buffer: 16-byte
  // accesses would be misaligned, the kernel must go element by element.
  auto& tanh_fma = region_cases()[0];
  for (Dtype dt : {float32, bfloat16, float64}) {
    array big = random_array({4099}, dt), other = random_array({4099}, dt);
    for (int off : {1, 2, 3}) {
      array x = slice(big, Shape{off}, Shape{off + 4093});
      array y = slice(other, Shape{3 - off}, Shape{4096 - off});
      EXPECT_TRUE(fused_matches(tanh_fma.f, {x, y}, chain_tolerance(dt)))
          << dtype_name(dt) << " offset " << off;
    }
  }
}

TEST_F(GpuCompiled, ShapelessNewShapesReuseTheKernel) {
  auto& tanh_fma = region_cases()[0];
  auto cf = compile(tanh_fma.f, true);
  auto check = [&](const Shape& s) {
    array x = random_array(s, float32), y = random_array(s, float32);
    EXPECT_TRUE(fused_matches(tanh_fma.f, {x, y}, chain_tolerance(float32), cf))
        << s.size() << "-d";
  };
  check({8, 16});
  auto before = cuda::jit_stats();
  check({33, 7});   // same rank, new shape: no new kernel
  check({1000, 3}); // the same
  auto after = cuda::jit_stats();
  EXPECT_EQ(after.compiles + after.disk_hits,
            before.compiles + before.disk_hits);
  // A transposed input at a new shape is the strided variant, also shared.
  array x = random_array({12, 9}, float32), y = random_array({12, 9}, float32);
  EXPECT_TRUE(fused_matches(tanh_fma.f, {as_transposed(y), x},
                            chain_tolerance(float32), cf));
  before = cuda::jit_stats();
  array a = random_array({40, 6}, float32), b = random_array({40, 6}, float32);
  EXPECT_TRUE(fused_matches(tanh_fma.f, {as_transposed(b), a},
                            chain_tolerance(float32), cf));
  after = cuda::jit_stats();
  EXPECT_EQ(after.compiles + after.disk_hits,
            before.compiles + before.disk_hits);
}

TEST_F(GpuCompiled, ShapelessMismatchStillRaises) {
  auto w = random_array({2, 3}, float32);
  auto cf = compile(
      [w](const std::vector<array>& in) {
        return std::vector<array>{exp(in[0]) + w * array(2.0f)};
      },
      true);
  DefaultDeviceScope scope(Device::gpu);
  eval(cf({random_array({2, 3}, float32)}));
  EXPECT_THROW(cf({random_array({4, 5}, float32)}), std::invalid_argument);
}

TEST_F(GpuCompiled, SeedBiasCastThenAddmm) {
  // The seed: parameters cast to bfloat16 inside the compiled step, then a
  // Linear layer (addmm with the bias). Compiled on the GPU equals
  // uncompiled, and the cast bias stays a vector (data size N).
  array x = random_array({64, 32}, bfloat16, -1, 1);
  array w = random_array({48, 32}, float32, -1, 1);
  array b = random_array({48}, float32, -1, 1);
  Fn step = [](const std::vector<array>& in) {
    // The bias's scale and cast form a fused region of the bias's shape.
    array wb = astype(in[1], bfloat16);
    array bb = astype(in[2] * array(0.5f), bfloat16);
    return std::vector<array>{addmm(bb, in[0], transpose(wb)),
                              broadcast_to(bb, {64, 48})};
  };
  auto cf = compile(step);
  EXPECT_TRUE(fused_matches(step, {x, w, b}, 2e-2, cf, 0));
  EXPECT_TRUE(fused_matches(step, {x, w, b}, 0, cf, 1));
  DefaultDeviceScope scope(Device::gpu);
  array bias = cf({x, w, b})[1];
  eval({bias});
  EXPECT_EQ(bias.data_size(), 48u);
}

TEST_F(GpuCompiled, TooManyDimsRunOpByOp) {
  // Eleven dimensions that no collapsing merges (x reversed, y row-major):
  // past the strided kernel's limit, so the region runs op by op, with the
  // same result.
  Shape s(11, 2);
  array x = random_array(s, float32), y = random_array(s, float32);
  array xr = transpose(x); // reversed axes
  auto& tanh_fma = region_cases()[0];
  EXPECT_TRUE(fused_matches(tanh_fma.f, {xr, y}, chain_tolerance(float32)));
}

TEST_F(GpuCompiled, ComplexRegionsRunOpByOp) {
  // complex64 values have no fused kernel: the region's ops run one by one
  // (on the GPU where they have complex kernels), as uncompiled.
  array z = complex_random({17, 33}, -2, 2);
  array w = complex_random({17, 33}, -2, 2);
  Fn f = [](const std::vector<array>& v) {
    array p = multiply(v[0], conjugate(v[1]));
    return std::vector<array>{add(p, exp(v[0])), abs(p)};
  };
  Fn cf = compile(f);
  EXPECT_TRUE(fused_matches(f, {z, w}, 2e-5, cf, 0));
  EXPECT_TRUE(fused_matches(f, {as_transposed(z), w}, 2e-5, cf, 1));
}

TEST_F(GpuCompiled, RepeatedCallsCompileOnce) {
  auto& c = region_cases()[1];
  auto cf = compile(c.f);
  array x = random_array({64, 64}, float16), y = random_array({64, 64}, float16);
  EXPECT_TRUE(fused_matches(c.f, {x, y}, chain_tolerance(float16), cf));
  auto before = cuda::jit_stats();
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(fused_matches(c.f, {x, y}, chain_tolerance(float16), cf));
  }
  auto after = cuda::jit_stats();
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.disk_hits, before.disk_hits);
}

std::string shape_text(const Shape& s) {
  std::string t;
  for (auto d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t;
}

TEST_F(GpuCompiled, RowsRegionsEveryCaseDtypeAndSize) {
  for (auto& c : rows_cases()) {
    for (Dtype dt : c.dtypes) {
      // Rows of a multiple of every vector width; of none (one element at a
      // time); one column (the region collapses otherwise); more than a
      // grid step; one row; empty; 2-d.
      for (Shape s : {Shape{4, 6, 64}, Shape{3, 5, 37}, Shape{5, 7, 1},
                      Shape{3, 2, 1000}, Shape{1, 1, 24}, Shape{0, 4, 8},
                      Shape{33, 40}}) {
        EXPECT_TRUE(
            fused_matches(c.f, rows_inputs(c, s, dt), chain_tolerance(dt)))
            << c.name << " " << dtype_name(dt) << " " << shape_text(s);
      }
    }
  }
}

TEST_F(GpuCompiled, RowsRegionsPastSixtyFiveThousandRows) {
  for (auto& c : rows_cases()) {
    for (Dtype dt : c.dtypes) {
      for (Shape s : {Shape{70001, 24}, Shape{2, 40001, 13}}) {
        EXPECT_TRUE(
            fused_matches(c.f, rows_inputs(c, s, dt), chain_tolerance(dt)))
            << c.name << " " << dtype_name(dt) << " " << shape_text(s);
      }
    }
  }
}

TEST_F(GpuCompiled, RowsRegionsMisalignedBasesGoElementByElement) {
  // (x - mean) * rstd * w * g with rows of 64: vectors would fit, but a
  // base one element into its buffer forbids 16-byte accesses.
  auto& ln = rows_cases()[0];
  const int rows = 48, n = 64;
  for (Dtype dt : ln.dtypes) {
    auto in = rows_inputs(ln, {rows, n}, dt);
    // A full input one element into a flat buffer (a row-major view).
    array flat = random_array({rows * n + 1}, dt);
    auto shifted_x = in;
    shifted_x[0] = reshape(slice(flat, Shape{1}, Shape{rows * n + 1}),
                           {rows, n});
    EXPECT_TRUE(fused_matches(ln.f, shifted_x, chain_tolerance(dt)))
        << dtype_name(dt) << " shifted x";
    // A per-column weight one element into its buffer.
    auto shifted_w = in;
    shifted_w[3] = slice(random_array({n + 1}, dt), Shape{1}, Shape{n + 1});
    EXPECT_TRUE(fused_matches(ln.f, shifted_w, chain_tolerance(dt)))
        << dtype_name(dt) << " shifted w";
    // A per-row value one element in: scalar loads, vectors stay.
    auto shifted_mean = in;
    shifted_mean[1] =
        slice(random_array({rows + 1, 1}, dt), Shape{1, 0}, Shape{rows + 1, 1});
    EXPECT_TRUE(fused_matches(ln.f, shifted_mean, chain_tolerance(dt)))
        << dtype_name(dt) << " shifted mean";
  }
}

TEST_F(GpuCompiled, RowsRegionsWithOtherLayoutsStayStrided) {
  // A transposed full input, a per-(batch, column) mean and a strided
  // weight take the strided kernel, with the same results.
  auto& ln = rows_cases()[0];
  for (Dtype dt : ln.dtypes) {
    auto in = rows_inputs(ln, {4, 6, 32}, dt);
    auto transposed = in;
    transposed[0] = as_transposed(in[0]);
    EXPECT_TRUE(fused_matches(ln.f, transposed, chain_tolerance(dt)))
        << dtype_name(dt) << " transposed x";
    auto mid = in;
    mid[1] = random_array({4, 1, 32}, dt);
    EXPECT_TRUE(fused_matches(ln.f, mid, chain_tolerance(dt)))
        << dtype_name(dt) << " (4, 1, 32) mean";
    auto sliced = in;
    sliced[3] = slice(random_array({64}, dt), Shape{0}, Shape{64}, Shape{2});
    EXPECT_TRUE(fused_matches(ln.f, sliced, chain_tolerance(dt)))
        << dtype_name(dt) << " strided w";
  }
}

TEST_F(GpuCompiled, RowsRegionsShapelessNewShapes) {
  auto& ln = rows_cases()[0];
  auto cf = compile(ln.f, true);
  auto check = [&](const Shape& s) {
    EXPECT_TRUE(fused_matches(ln.f, rows_inputs(ln, s, float32),
                              chain_tolerance(float32), cf))
        << shape_text(s);
  };
  check({4, 6, 64});
  auto before = cuda::jit_stats();
  check({3, 5, 40}); // rows of a multiple of the width: the same kernel
  check({70001, 1, 8});
  auto after = cuda::jit_stats();
  EXPECT_EQ(after.compiles + after.disk_hits,
            before.compiles + before.disk_hits);
  check({9, 1, 37}); // one element at a time: another kernel, then reused
  before = cuda::jit_stats();
  check({2, 3, 13});
  after = cuda::jit_stats();
  EXPECT_EQ(after.compiles + after.disk_hits,
            before.compiles + before.disk_hits);
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
