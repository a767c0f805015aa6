// GPU reductions (sum, prod, max, min, all, any), argmax/argmin and the
// count behind mean/var against the CPU backend on random inputs: every
// reduce type, dtype family, layout and axis pattern, the sizes that pick
// each kernel shape (warp, block, column, split into partials), empty and
// one-element reductions, NaNs, ties, the 64-bit index variants, complex64
// sums, products, all and any, the CPU fallbacks and the error paths.
#include <cmath>
#include <functional>
#include <limits>

#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuReduce = GpuTest;

using ReduceFn = std::function<array(const array&, const std::vector<int>&,
                                     bool, Device)>;

struct ReduceCase {
  const char* name;
  ReduceFn fn;
};

const std::vector<ReduceCase>& reductions() {
  static const std::vector<ReduceCase> cases = {
      {"sum",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return sum(x, ax, k, d);
       }},
      {"prod",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return prod(x, ax, k, d);
       }},
      {"max",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return kiln::max(x, ax, k, d);
       }},
      {"min",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return kiln::min(x, ax, k, d);
       }},
      {"all",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return all(x, ax, k, d);
       }},
      {"any",
       [](const array& x, const std::vector<int>& ax, bool k, Device d) {
         return any(x, ax, k, d);
       }},
  };
  return cases;
}

std::vector<Dtype> real_dtypes() {
  std::vector<Dtype> v;
  for (Dtype d : all_dtypes()) {
    if (d != complex64) v.push_back(d);
  }
  return v;
}

// Inputs that keep each reduction well conditioned: products of values near
// 1 (floats) or small integers (whose products wrap identically on both
// devices), sums of positive floats (no cancellation), signed values
// elsewhere.
array input_for(const std::string& op, const Shape& shape, Dtype dt) {
  bool is_float = issubdtype(dt, floating);
  if (op == "prod") {
    return is_float ? random_array(shape, dt, 0.9, 1.1)
                    : random_array(shape, dt, -3, 3);
  }
  if (op == "sum" && is_float) return random_array(shape, dt, 0.0, 1.0);
  return random_array(shape, dt, -50, 50);
}

// Float sums and products round differently in another order; float16 and
// bfloat16 round once at the end, on both devices.
double tolerance_for(const std::string& op, Dtype dt, int64_t n_reduced) {
  if (!issubdtype(dt, floating) || op == "max" || op == "min" ||
      op == "all" || op == "any") {
    return 0;
  }
  if (dt == float32) return 2e-6 * std::max<double>(1, std::sqrt(n_reduced));
  return tolerance(dt);
}

// float32 sums and products compare with the CPU computing in float64 and
// rounding once: the CPU's float32 column loop adds sequentially, with an
// error growing with the length that the GPU's tree does not share.
::testing::AssertionResult same_reduction(const ReduceCase& c,
                                          const array& x,
                                          const std::vector<int>& axes,
                                          bool keepdims, double tol) {
  std::string op = c.name;
  bool widen = x.dtype() == float32 && (op == "sum" || op == "prod");
  auto fn = [&](const std::vector<array>& v, Device d) {
    if (!widen || d == Device::gpu) return c.fn(v[0], axes, keepdims, d);
    return astype(c.fn(astype(v[0], float64, d), axes, keepdims, d), float32,
                  d);
  };
  return same_on_devices(fn, {x}, tol);
}

std::string axes_str(const std::vector<int>& axes) {
  std::string s = "(";
  for (int a : axes) s += std::to_string(a) + ",";
  return s + ")";
}

TEST_F(GpuReduce, EveryTypeDtypeAndLayout2d) {
  // all, the contiguous axis, the strided axis; with and without keepdims.
  const std::vector<std::vector<int>> patterns = {{0, 1}, {1}, {0}};
  for (Dtype dt : real_dtypes()) {
    for (auto& c : reductions()) {
      array x = input_for(c.name, {37, 53}, dt);
      for (auto& [layout, in] : layouts(x)) {
        for (auto& axes : patterns) {
          int64_t n = 1;
          for (int a : axes) n *= in.shape(a);
          double tol = tolerance_for(c.name, dt, n);
          for (bool keepdims : {false, true}) {
            EXPECT_TRUE(same_reduction(c, in, axes, keepdims, tol))
                << c.name << " " << dtype_name(dt) << " " << layout << " "
                << axes_str(axes) << (keepdims ? " keepdims" : "");
          }
        }
      }
    }
  }
}

TEST_F(GpuReduce, AxisPatterns4d) {
  // First, middle, last, several non-adjacent, all but one; over row-major,
  // permuted, sliced (every other element of each axis) and broadcast
  // inputs.
  const std::vector<std::vector<int>> patterns = {
      {0}, {1}, {2}, {3}, {0, 2}, {1, 3}, {0, 3}, {0, 1, 3}, {1, 2, 3},
      {0, 1, 2, 3}};
  for (Dtype dt : {float32, bfloat16, int32, bool_}) {
    for (auto& c : reductions()) {
      array x = input_for(c.name, {6, 7, 10, 9}, dt);
      array wide = input_for(c.name, {12, 14, 20, 18}, dt);
      std::vector<std::pair<std::string, array>> ins = {
          {"contiguous", x},
          {"permuted", transpose(input_for(c.name, {10, 6, 9, 7}, dt),
                                 {1, 3, 0, 2})},
          {"sliced", slice(wide, Shape{0, 0, 0, 0}, Shape{12, 14, 20, 18},
                           Shape{2, 2, 2, 2})},
          {"broadcast", broadcast_to(input_for(c.name, {6, 1, 10, 1}, dt),
                                     {6, 7, 10, 9})},
      };
      for (auto& [layout, in] : ins) {
        for (auto& axes : patterns) {
          int64_t n = 1;
          for (int a : axes) n *= in.shape(a);
          EXPECT_TRUE(same_reduction(c, in, axes, false,
                                     tolerance_for(c.name, dt, n)))
              << c.name << " " << dtype_name(dt) << " " << layout << " "
              << axes_str(axes);
        }
      }
    }
  }
}

TEST_F(GpuReduce, SizesPickEveryKernelShape) {
  // (shape, axes): one element; fewer than a vector; a warp's row; long
  // rows split over blocks; all-reduces split into partials; rows of one
  // element; 70000 rows (more than a 16-bit grid dimension) one way and the
  // other; columns long enough to split; misaligned row starts (odd rows).
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{1}, {0}},
      {{7}, {0}},
      {{1000}, {0}},
      {{(1 << 20) + 3}, {0}},
      {{3, (1 << 20) + 3}, {1}},
      {{(1 << 20) + 3, 3}, {0}},
      {{70000, 1}, {1}},
      {{70000, 13}, {1}},
      {{70000, 13}, {0}},
      {{13, 70000}, {0}},
      {{1001, 1003}, {1}},
      {{5, 4099}, {1}},
      {{4099, 5}, {0}},
      {{2, 3000, 2}, {0, 2}},
  };
  for (auto& [shape, axes] : cases) {
    for (Dtype dt : {float32, float16, bfloat16, int32, int8, float64}) {
      for (auto& c : reductions()) {
        std::string op = c.name;
        if (op == "prod" && issubdtype(dt, floating)) continue; // overflows
        array x = input_for(op, shape, dt);
        int64_t n = 1;
        for (int a : axes) n *= shape[a];
        EXPECT_TRUE(same_reduction(c, x, axes, false,
                                   tolerance_for(op, dt, n)))
            << op << " " << dtype_name(dt) << " shape " << shape.size()
            << "-d " << shape[0] << " axes " << axes_str(axes);
      }
    }
  }
}

TEST_F(GpuReduce, ColumnVectorLoads) {
  // Column reductions whose kept run takes 16-byte loads of several columns
  // per thread (a bias gradient's (8192, 2048) -> (2048,)), next to ones
  // that cannot: a tail of columns past the last whole vector, rows that
  // start misaligned (a sliced base or an odd row length), reduced
  // dimensions that do not collapse into one run (permuted), and the
  // second pass over partials.
  struct Case {
    std::string name;
    array x;
    std::vector<int> axes;
  };
  for (Dtype dt : {bfloat16, float16, float32, float64, int8, int32}) {
    for (auto& c : reductions()) {
      std::string op = c.name;
      if (op == "prod" && issubdtype(dt, floating)) continue; // overflows
      array wide = input_for(op, {3000, 40}, dt);
      std::vector<Case> cases = {
          {"bias gradient", input_for(op, {8192, 2048}, dt), {0}},
          {"3-d over two axes", input_for(op, {32, 256, 64}, dt), {0, 1}},
          {"vectors and a tail", input_for(op, {1000, 27}, dt), {0}},
          {"one vector of columns", input_for(op, {777, 8}, dt), {0}},
          {"sliced base", slice(wide, Shape{0, 1}, Shape{3000, 33}), {0}},
          {"sliced aligned", slice(wide, Shape{0, 8}, Shape{3000, 40}), {0}},
          {"permuted", transpose(input_for(op, {100, 6, 48}, dt), {1, 0, 2}),
           {0, 1}},
          {"kept outer", input_for(op, {4, 500, 16}, dt), {1}},
      };
      for (auto& k : cases) {
        int64_t n = 1;
        for (int a : k.axes) n *= k.x.shape(a);
        EXPECT_TRUE(same_reduction(c, k.x, k.axes, false,
                                   tolerance_for(op, dt, n)))
            << op << " " << dtype_name(dt) << " " << k.name;
      }
    }
  }
}

TEST_F(GpuReduce, Float16SumOfManyElements) {
  // Accumulated in float32 on both devices; the sum (about 31000) fits in
  // float16, whose rounding is the only difference allowed.
  for (Dtype dt : {float16, bfloat16}) {
    array x = random_array({(1 << 20) + 3}, dt, 0.0, 0.06);
    auto fn = [](const std::vector<array>& v, Device d) {
      return sum(v[0], false, d);
    };
    EXPECT_TRUE(same_on_devices(fn, {x}, tolerance(dt))) << dtype_name(dt);
    array y = random_array({4096, 300}, dt, 0.0, 1.0);
    auto cols = [](const std::vector<array>& v, Device d) {
      return sum(v[0], 0, false, d);
    };
    EXPECT_TRUE(same_on_devices(cols, {y}, tolerance(dt))) << dtype_name(dt);
  }
}

TEST_F(GpuReduce, EmptyReductionsGiveTheIdentity) {
  for (Dtype dt : {float32, float16, int32, uint8, bool_}) {
    array x = random_array({5, 0}, dt);
    for (auto& c : reductions()) {
      std::string op = c.name;
      if (op == "max" || op == "min") continue; // no identity: an error
      EXPECT_TRUE(same_reduction(c, x, {1}, false, 0)) << op;
      EXPECT_TRUE(same_reduction(c, x, {0, 1}, true, 0)) << op;
      // Nothing to reduce into: an empty output.
      EXPECT_TRUE(same_reduction(c, x, {0}, false, 0)) << op;
    }
  }
}

array with_nans(const Shape& shape, Dtype dt) {
  array x = random_array(shape, float64);
  std::vector<double> v = to_doubles(x);
  // A NaN in some rows only (rows 1, 4, 7...), two in row 4; so some
  // columns hold one or more NaNs too.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  size_t cols = shape.back();
  for (size_t r = 1; r * cols < v.size(); r += 3) {
    v[r * cols + (r * 7) % cols] = nan;
  }
  if (v.size() > 4 * cols + 2) v[4 * cols + 1] = nan;
  return astype(array(v, shape, float64), dt);
}

TEST_F(GpuReduce, NaNsPropagateAsOnTheCpu) {
  for (Dtype dt : float_dtypes()) {
    for (Shape shape : {Shape{9, 33}, Shape{9, 5000}}) {
      array x = with_nans(shape, dt);
      for (auto& c : reductions()) {
        if (std::string(c.name) == "prod") continue;
        for (auto axes : {std::vector<int>{1}, std::vector<int>{0},
                          std::vector<int>{0, 1}}) {
          int64_t n = 1;
          for (int a : axes) n *= x.shape(a);
          // The tolerance grows with the count: a float32 row of 5000
          // values that nearly cancels was off by 6e-6 relative.
          EXPECT_TRUE(same_reduction(c, x, axes, false,
                                     tolerance_for(c.name, dt, n)))
              << c.name << " " << dtype_name(dt) << axes_str(axes);
        }
      }
    }
  }
}

TEST_F(GpuReduce, MeanVarLogsumexp) {
  for (Dtype dt : {float32, float16, bfloat16, int32}) {
    array x = random_array({67, 129}, dt, -2, 2);
    for (auto& [layout, in] : layouts(x)) {
      for (auto axes : {std::vector<int>{0}, std::vector<int>{1},
                        std::vector<int>{0, 1}}) {
        double tol = dt == int32 ? 1e-5 : tolerance(dt) * 4;
        auto mean_fn = [&](const std::vector<array>& v, Device d) {
          return mean(v[0], axes, false, d);
        };
        auto var_fn = [&](const std::vector<array>& v, Device d) {
          return var(v[0], axes, true, 1, d);
        };
        auto lse_fn = [&](const std::vector<array>& v, Device d) {
          return logsumexp(v[0], axes, false, d);
        };
        std::string what = dtype_name(dt) + " " + layout + axes_str(axes);
        EXPECT_TRUE(same_on_devices(mean_fn, {in}, tol)) << "mean " << what;
        EXPECT_TRUE(same_on_devices(var_fn, {in}, tol)) << "var " << what;
        EXPECT_TRUE(same_on_devices(lse_fn, {in}, tol)) << "lse " << what;
      }
    }
  }
  // ddof past the count divides by zero on both devices.
  array y = random_array({3, 2}, float32);
  auto var_big_ddof = [](const std::vector<array>& v, Device d) {
    return var(v[0], {1}, false, 5, d);
  };
  EXPECT_TRUE(same_on_devices(var_big_ddof, {y}, 0));
}

TEST_F(GpuReduce, ArgReduceEveryDtypeAndLayout) {
  for (Dtype dt : real_dtypes()) {
    // A narrow range makes ties: the first index must win on both devices.
    array x = random_array({37, 53}, dt, -3, 3);
    for (auto& [layout, in] : layouts(x)) {
      for (int axis : {0, 1}) {
        for (bool keepdims : {false, true}) {
          auto amax = [&](const std::vector<array>& v, Device d) {
            return argmax(v[0], axis, keepdims, d);
          };
          auto amin = [&](const std::vector<array>& v, Device d) {
            return argmin(v[0], axis, keepdims, d);
          };
          EXPECT_TRUE(same_on_devices(amax, {in}, 0))
              << "argmax " << dtype_name(dt) << " " << layout << axis;
          EXPECT_TRUE(same_on_devices(amin, {in}, 0))
              << "argmin " << dtype_name(dt) << " " << layout << axis;
        }
      }
      auto flat = [&](const std::vector<array>& v, Device d) {
        return argmax(v[0], false, d);
      };
      EXPECT_TRUE(same_on_devices(flat, {in}, 0)) << dtype_name(dt) << layout;
    }
  }
}

TEST_F(GpuReduce, ArgReduceShapesTiesAndNaNs) {
  // Long rows (a block per output), many outputs down a strided axis (a
  // thread per output), few outputs down a strided axis (a warp each),
  // 70000 short rows, misaligned rows; integer ties; NaNs (the first wins).
  const std::vector<std::pair<Shape, int>> cases = {
      {{3, 100003}, 1}, {{100, 20000}, 0}, {{5000, 7}, 0},
      {{70000, 3}, 1},  {{1, 1}, 0},       {{1001, 1003}, 1},
      {{70000, 3}, 0},
  };
  for (auto& [shape, axis] : cases) {
    for (Dtype dt : {float32, float16, int8, uint32}) {
      array x = random_array(shape, dt, -4, 4);
      auto amax = [&](const std::vector<array>& v, Device d) {
        return argmax(v[0], axis, false, d);
      };
      auto amin = [&](const std::vector<array>& v, Device d) {
        return argmin(v[0], axis, false, d);
      };
      EXPECT_TRUE(same_on_devices(amax, {x}, 0)) << dtype_name(dt) << axis;
      EXPECT_TRUE(same_on_devices(amin, {x}, 0)) << dtype_name(dt) << axis;
    }
  }
  for (Dtype dt : float_dtypes()) {
    for (Shape shape : {Shape{9, 33}, Shape{9, 5000}, Shape{20000, 9}}) {
      array x = with_nans(shape, dt);
      for (int axis : {0, 1}) {
        auto amax = [&](const std::vector<array>& v, Device d) {
          return argmax(v[0], axis, false, d);
        };
        auto amin = [&](const std::vector<array>& v, Device d) {
          return argmin(v[0], axis, false, d);
        };
        EXPECT_TRUE(same_on_devices(amax, {x}, 0)) << dtype_name(dt);
        EXPECT_TRUE(same_on_devices(amin, {x}, 0)) << dtype_name(dt);
      }
    }
  }
}

TEST_F(GpuReduce, SixtyFourBitIndices) {
  // A broadcast view of 65600 x 65600 (4.3e9 elements, one row of data):
  // past 2^32, so the 64-bit index variants run (column, block-row and arg
  // kernels), reading one cached row of uint8 values.
  constexpr int n = 65600;
  array row = reshape(
      astype(remainder(arange(0, n, 1), array(251)), uint8), {1, n});
  array big = broadcast_to(row, {n, n}, Device::gpu);
  array col_sums = sum(big, 0, false, Device::gpu);
  array row_max = kiln::max(big, 1, false, Device::gpu);
  array arg = argmax(big, 1, false, Device::gpu);
  eval({col_sums, row_max, arg});
  EXPECT_EQ(col_sums.dtype(), uint32);
  std::vector<double> r = to_doubles(row), c = to_doubles(col_sums);
  ASSERT_EQ(c.size(), size_t(n));
  for (int j = 0; j < n; ++j) ASSERT_EQ(c[j], r[j] * n) << j;
  std::vector<double> m = to_doubles(row_max), a = to_doubles(arg);
  ASSERT_EQ(m.size(), size_t(n));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(m[i], 250) << i;
    ASSERT_EQ(a[i], 250) << i; // the first of the row's 250s
  }
}

// complex64 sums against float64 sums of the real and imaginary parts (an
// independent reference, rounded once), and products, all and any against
// the CPU's, over every layout, axis pattern and kernel shape.
TEST_F(GpuReduce, Complex64SumsProductsAllAndAny) {
  auto parts_sum = [](const array& z, const std::vector<int>& axes) {
    auto part = [&](const array& p) {
      return astype(sum(astype(p, float64, Device::cpu), axes, false,
                        Device::cpu),
                    float32, Device::cpu);
    };
    return complex_of(part(real(z, Device::cpu)), part(imag(z, Device::cpu)),
                      Device::cpu);
  };
  auto check_sum = [&](const array& z, const std::vector<int>& axes,
                       const std::string& what) {
    int64_t n = 1;
    for (int a : axes) n *= z.shape(a);
    auto fn = [&](const std::vector<array>& v, Device d) {
      return d == Device::gpu ? sum(v[0], axes, false, d)
                              : parts_sum(v[0], axes);
    };
    EXPECT_TRUE(same_on_devices(fn, {z}, 2e-6 * std::max<double>(
                                                    1, std::sqrt(n))))
        << "sum " << what << " " << axes_str(axes);
  };
  // Sums of parts in [0, 1) (no cancellation); products of values of
  // modulus near 1; all/any with exact zeros, real-only and imaginary-only
  // values mixed in.
  array sums = complex_of(random_array({37, 53}, float32, 0, 1),
                          random_array({37, 53}, float32, 0, 1), Device::cpu);
  array theta = random_array({37, 53}, float32, -3, 3);
  array radius = random_array({37, 53}, float32, 0.97, 1.03);
  array prods = multiply(astype(radius, complex64),
                         complex_of(cos(theta), sin(theta), Device::cpu));
  array pick = random_array({37, 53}, int32, 0, 4);
  array zero = zeros({37, 53}, complex64);
  array mixed = where(equal(pick, array(0)), zero,
                      where(equal(pick, array(1)), astype(real(prods), complex64),
                            where(equal(pick, array(2)),
                                  complex_of(zeros({37, 53}, float32),
                                             imag(prods), Device::cpu),
                                  prods)));
  const std::vector<std::vector<int>> patterns = {{0, 1}, {1}, {0}};
  for (auto& [layout, z] : layouts(sums)) {
    for (auto& axes : patterns) check_sum(z, axes, layout);
  }
  for (auto& [layout, z] : layouts(prods)) {
    for (auto& axes : patterns) {
      auto fn = [&](const std::vector<array>& v, Device d) {
        return prod(v[0], axes, false, d);
      };
      // Each product's rounding is relative, and the two devices multiply
      // in other orders: the error walks as sqrt(n) (all 1,961 factors:
      // 5.7e-5 relative seen on an H200).
      int64_t n = 1;
      for (int a : axes) n *= z.shape(a);
      EXPECT_TRUE(same_on_devices(fn, {z}, 5e-6 * std::sqrt(double(n))))
          << "prod " << layout << " " << axes_str(axes);
    }
  }
  for (auto& [layout, z] : layouts(mixed)) {
    for (auto& axes : patterns) {
      for (bool keepdims : {false, true}) {
        auto fa = [&](const std::vector<array>& v, Device d) {
          return all(v[0], axes, keepdims, d);
        };
        auto fo = [&](const std::vector<array>& v, Device d) {
          return any(v[0], axes, keepdims, d);
        };
        EXPECT_TRUE(same_on_devices(fa, {z}, 0)) << "all " << layout;
        EXPECT_TRUE(same_on_devices(fo, {z}, 0)) << "any " << layout;
      }
    }
  }
  // The kernel shapes: a warp's row, long rows split into partials, the
  // all-reduce of a long array, many short rows both ways, long columns
  // split, and a row start off the vector alignment.
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{1000}, {0}},          {{3, (1 << 18) + 3}, {1}},
      {{(1 << 20) + 3}, {0}}, {{70000, 13}, {1}},
      {{70000, 13}, {0}},     {{13, 70000}, {0}},
      {{4099, 5}, {0}}};
  for (auto& [shape, axes] : cases) {
    array z = complex_of(random_array(shape, float32, 0, 1),
                         random_array(shape, float32, 0, 1), Device::cpu);
    check_sum(z, axes, "shape " + std::to_string(shape[0]));
  }
  array line = complex_of(random_array({4099}, float32, 0, 1),
                          random_array({4099}, float32, 0, 1), Device::cpu);
  check_sum(slice(line, Shape{1}, Shape{4099}), {0}, "sliced by one");
  // mean divides the sum on the device.
  auto mean_fn = [&](const std::vector<array>& v, Device d) {
    return d == Device::gpu ? mean(v[0], 1, false, d)
                            : divide(parts_sum(v[0], {1}),
                                     array(complex64_t(53, 0)), Device::cpu);
  };
  EXPECT_TRUE(same_on_devices(mean_fn, {sums}, 1e-5));
}

TEST_F(GpuReduce, FallbacksMatchTheCpu) {
  // 23 dimensions reduced every other one do not collapse to 10: they run
  // on the CPU and give its answers.
  array x = random_array(Shape(23, 2), int32, -50, 50);
  std::vector<int> odd;
  for (int a = 1; a < 23; a += 2) odd.push_back(a);
  auto many = [&](const std::vector<array>& v, Device d) {
    return sum(v[0], odd, false, d);
  };
  EXPECT_TRUE(same_on_devices(many, {x}, 0));
}

TEST_F(GpuReduce, ErrorsAsOnTheCpu) {
  array x = random_array({4, 0}, float32);
  EXPECT_THROW(kiln::max(x, 1, false, Device::gpu), std::invalid_argument);
  EXPECT_THROW(argmin(x, 1, false, Device::gpu), std::invalid_argument);
  // complex64 extremes are no error (as MLX): compositions of real
  // reductions, ordered by real part, then imaginary part.
  array z = complex_of(random_array({5, 3}, int32, -2, 2),
                       random_array({5, 3}, float32), Device::cpu);
  auto zmin = [](const std::vector<array>& v, Device d) {
    return kiln::min(v[0], 0, false, d);
  };
  auto zarg = [](const std::vector<array>& v, Device d) {
    return argmax(v[0], 1, false, d);
  };
  EXPECT_TRUE(same_on_devices(zmin, {z}, 0, false));
  EXPECT_TRUE(same_on_devices(zarg, {as_transposed(z)}, 0, false));
  EXPECT_THROW(sum(random_array({3}, float32), 1, false, Device::gpu),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
