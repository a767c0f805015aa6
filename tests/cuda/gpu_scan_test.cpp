// GPU scans (cumsum, cumprod, cummax, cummin, logcumsumexp) against the CPU
// backend: every op and dtype family, inclusive and exclusive, forward and
// reversed, along the last, first and a middle axis of contiguous,
// transposed, sliced and broadcast inputs; line lengths across the tile
// sizes, many lines, one long line; NaN propagation; dtypes that fall back.
#include <cmath>
#include <limits>

#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuScan = GpuTest;

using ScanFn = array (*)(const array&, int, bool, bool, StreamOrDevice);

struct ScanOp {
  const char* name;
  ScanFn fn;
};

const std::vector<ScanOp>& scan_ops() {
  static const std::vector<ScanOp> ops = {{"cumsum", cumsum},
                                          {"cumprod", cumprod},
                                          {"cummax", cummax},
                                          {"cummin", cummin},
                                          {"logcumsumexp", logcumsumexp}};
  return ops;
}

bool is_prod(const ScanOp& op) { return std::string(op.name) == "cumprod"; }
bool is_sum(const ScanOp& op) { return std::string(op.name) == "cumsum"; }

// Inputs that keep each op's results finite and well conditioned: products
// of values near 1 (integers: 1 or 2, wrapping alike on both devices when
// they overflow), float sums of positive values (no cancellation), the rest
// over [-2, 2) or integers in [-50, 50).
array scan_input(const ScanOp& op, const Shape& shape, Dtype dt) {
  bool floats = issubdtype(dt, floating);
  if (is_prod(op)) {
    return floats ? random_array(shape, dt, 0.8, 1.25)
                  : random_array(shape, dt, 1, 3);
  }
  if (floats) {
    return is_sum(op) ? random_array(shape, dt, 0.25, 1)
                      : random_array(shape, dt, -2, 2);
  }
  return random_array(shape, dt, -50, 50);
}

// Float results differ from the CPU's sequential order only by rounding:
// 16-bit results by at most an ulp of the stored value (both accumulate in
// float32); wider ones by rounding that grows with the line (a wrong carry
// is off by whole terms).
double scan_tolerance(Dtype out, int64_t n) {
  double t = tolerance(out);
  if (out == float16 || out == bfloat16) return 2 * t;
  return t * std::max(4.0, 4 * std::sqrt(static_cast<double>(n)));
}

std::string scan_case(const ScanOp& op, Dtype dt, int n, bool reverse,
                      bool inclusive) {
  return std::string(op.name) + " " + dtype_name(dt) + " n " +
         std::to_string(n) + " reverse " + std::to_string(reverse) +
         " inclusive " + std::to_string(inclusive);
}

::testing::AssertionResult scan_matches(const ScanOp& op, const array& x,
                                        int axis, bool reverse,
                                        bool inclusive) {
  auto fn = [&](const std::vector<array>& v, Device d) {
    return op.fn(v[0], axis, reverse, inclusive, d);
  };
  array ref = op.fn(x, axis, reverse, inclusive, Device::cpu);
  int ax = axis < 0 ? axis + static_cast<int>(x.ndim()) : axis;
  return same_on_devices(fn, {x}, scan_tolerance(ref.dtype(), x.shape(ax)));
}

std::vector<Dtype> scan_dtypes(const ScanOp& op) {
  if (std::string(op.name) == "logcumsumexp") {
    return {float32, float16, bfloat16, float64, int32}; // ints: via float32
  }
  return {float32, float16, bfloat16, float64, int8,   int16, int32,
          int64,   uint8,   uint16,   uint32,  uint64, bool_};
}

// Every op x dtype x direction x inclusive, along both axes of each 2-d
// layout and the middle axis of a 3-d array (contiguous and transposed).
TEST_F(GpuScan, EveryOpDtypeLayoutAndDirection) {
  for (auto& op : scan_ops()) {
    for (Dtype dt : scan_dtypes(op)) {
      array x = scan_input(op, {37, 53}, dt);
      array cube = scan_input(op, {6, 45, 7}, dt);
      for (bool reverse : {false, true}) {
        for (bool inclusive : {true, false}) {
          for (auto& [layout, in] : layouts(x)) {
            for (int axis : {0, 1, -1}) {
              EXPECT_TRUE(scan_matches(op, in, axis, reverse, inclusive))
                  << op.name << " " << dtype_name(dt) << " " << layout
                  << " axis " << axis << " reverse " << reverse << " inclusive "
                  << inclusive;
            }
          }
          for (const array& in : {cube, as_transposed(cube)}) {
            EXPECT_TRUE(scan_matches(op, in, 1, reverse, inclusive))
                << op.name << " " << dtype_name(dt) << " middle axis";
          }
        }
      }
    }
  }
}

// Line lengths around the tiles (128 and 2048 elements) and far beyond, as
// one block per line (last axis; first axis of a few columns) and one
// thread per line (first axis of many columns).
TEST_F(GpuScan, LineLengths) {
  for (auto& op : scan_ops()) {
    for (Dtype dt : {float32, float16, int32}) {
      if (is_prod(op) && dt != int32) continue; // products of 1e5 floats
      for (int n : {1, 31, 128, 129, 2047, 2048, 2049, 5000, 100000}) {
        for (bool reverse : {false, true}) {
          for (bool inclusive : {true, false}) {
            std::string what = scan_case(op, dt, n, reverse, inclusive);
            EXPECT_TRUE(scan_matches(op, scan_input(op, {2, n}, dt), 1, reverse,
                                     inclusive))
                << what << " rows";
            EXPECT_TRUE(scan_matches(op, scan_input(op, {n, 3}, dt), 0, reverse,
                                     inclusive))
                << what << " few columns";
            if (n <= 129) { // one thread per column: length is no edge
              EXPECT_TRUE(scan_matches(op, scan_input(op, {n, 4100}, dt), 0,
                                       reverse, inclusive))
                  << what << " many columns";
            }
          }
        }
      }
    }
  }
}

// More lines than a grid dimension's 2^16 (the kernels loop over lines),
// along the last axis and as columns; a transposed long line.
TEST_F(GpuScan, ManyLinesAndLongTransposedLine) {
  array x = random_array({70000, 5}, float32, -2, 2);
  array ints = random_array({70000, 5}, int64, -100, 100);
  for (bool inclusive : {true, false}) {
    EXPECT_TRUE(scan_matches(scan_ops()[0], x, 1, false, inclusive));
    EXPECT_TRUE(scan_matches(scan_ops()[2], x, 1, true, inclusive));
    EXPECT_TRUE(scan_matches(scan_ops()[0], ints, 1, true, inclusive));
    EXPECT_TRUE(
        scan_matches(scan_ops()[0], transpose(ints), 0, false, inclusive));
  }
  array wide = random_array({3, 70000}, float32, 0, 1);
  EXPECT_TRUE(scan_matches(scan_ops()[0], wide, 0, false, true));
  EXPECT_TRUE(scan_matches(scan_ops()[0], as_transposed(wide), 1, true, true));
}

// Few long lines are scanned in pieces (two passes): one line of millions,
// a few lines as rows and as strided columns, every op, both directions,
// inclusive and exclusive, lengths that leave a short last piece, running
// values of 1, 4 and 8 bytes, and a NaN in a middle piece that must reach
// every later piece.
TEST_F(GpuScan, LongLinesInPieces) {
  for (auto& op : scan_ops()) {
    for (Dtype dt : {float32, int64, bfloat16, uint8}) {
      bool floats = issubdtype(dt, floating);
      if (is_prod(op) && floats) continue;
      if (std::string(op.name) == "logcumsumexp" && !floats) continue;
      for (int n : {3000001, 65536 * 4}) {
        array line = scan_input(op, {n}, dt);
        array rows = scan_input(op, {3, n / 3}, dt);
        for (bool reverse : {false, true}) {
          for (bool inclusive : {true, false}) {
            std::string what = scan_case(op, dt, n, reverse, inclusive);
            EXPECT_TRUE(scan_matches(op, line, 0, reverse, inclusive)) << what;
            EXPECT_TRUE(scan_matches(op, rows, 1, reverse, inclusive))
                << what << " rows";
            EXPECT_TRUE(
                scan_matches(op, transpose(rows), 0, reverse, inclusive))
                << what << " strided columns";
          }
        }
      }
    }
  }
  // Lines whose full tiles go through vector loads, and the same lines one
  // element off their alignment (sliced), which must not.
  for (Dtype dt : {float32, bfloat16, int64}) {
    array line = scan_input(scan_ops()[0], {1 << 20}, dt);
    array shifted = slice(line, Shape{1}, Shape{1 << 20});
    for (bool reverse : {false, true}) {
      for (bool inclusive : {true, false}) {
        std::string what = scan_case(scan_ops()[0], dt, 1 << 20, reverse,
                                     inclusive);
        EXPECT_TRUE(scan_matches(scan_ops()[0], line, 0, reverse, inclusive))
            << what;
        EXPECT_TRUE(
            scan_matches(scan_ops()[0], shifted, 0, reverse, inclusive))
            << what << " sliced by one";
        EXPECT_TRUE(scan_matches(scan_ops()[2], reshape(shifted, {3, -1}), 1,
                                 reverse, inclusive))
            << what << " cummax, rows of a sliced line";
      }
    }
  }
  std::vector<double> v = to_doubles(random_array({1 << 20}, float64, 0.25, 1));
  v[(1 << 19) + 7] = std::numeric_limits<double>::quiet_NaN();
  array with_nan = astype(array(v.begin(), {1 << 20}, float64), float32);
  for (auto& op : scan_ops()) {
    EXPECT_TRUE(scan_matches(op, with_nan, 0, false, true)) << op.name;
    EXPECT_TRUE(scan_matches(op, with_nan, 0, true, false)) << op.name;
  }
}

// NaN spreads from where it appears (in scan order) in every float op; the
// running max/min keep it, as on the CPU.
TEST_F(GpuScan, NaNPropagates) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    for (int n : {40, 3000}) {
      array x = random_array({3, n}, float64, 0.25, 1);
      std::vector<double> v = to_doubles(x);
      v[5] = nan;
      v[n + n / 2] = nan;
      v[3 * n - 2] = nan;
      array in = astype(array(v.begin(), {3, n}, float64), dt);
      for (auto& op : scan_ops()) {
        for (bool reverse : {false, true}) {
          EXPECT_TRUE(scan_matches(op, in, 1, reverse, true))
              << op.name << " " << dtype_name(dt) << " n " << n;
          EXPECT_TRUE(scan_matches(op, transpose(in), 0, reverse, false))
              << op.name << " " << dtype_name(dt) << " n " << n;
        }
      }
    }
  }
}

// Infinities: logcumsumexp of -inf stays -inf until a finite value comes.
TEST_F(GpuScan, Infinities) {
  double inf = std::numeric_limits<double>::infinity();
  array x = array({-inf, -inf, 1.0, inf, -inf, 2.0}, float32);
  for (auto& op : scan_ops()) {
    if (is_prod(op)) continue;
    EXPECT_TRUE(scan_matches(op, reshape(x, {1, 6}), 1, false, true))
        << op.name;
    EXPECT_TRUE(scan_matches(op, reshape(x, {1, 6}), 1, true, false))
        << op.name;
  }
}

TEST_F(GpuScan, EmptyAndOneElement) {
  for (auto& op : scan_ops()) {
    EXPECT_TRUE(scan_matches(op, zeros({0, 5}, float32), 0, false, true));
    EXPECT_TRUE(scan_matches(op, zeros({4, 0}, float32), 1, false, false));
    array one = random_array({1}, float32, 0.5, 1.5);
    EXPECT_TRUE(scan_matches(op, one, 0, true, true)) << op.name;
    EXPECT_TRUE(scan_matches(op, one, 0, false, false)) << op.name;
  }
}

// complex64 sums and products scan on the GPU: every layout, both
// directions, inclusive and exclusive, short, long and pieced lines.
TEST_F(GpuScan, Complex64SumsAndProducts) {
  array sums = complex_of(random_array({23, 35}, float32, 0.25, 1),
                          random_array({23, 35}, float32, 0.25, 1));
  array theta = random_array({23, 35}, float32, -3, 3);
  array prods = multiply(astype(random_array({23, 35}, float32, 0.97, 1.03),
                                complex64),
                         complex_of(cos(theta), sin(theta)));
  for (bool reverse : {false, true}) {
    for (bool inclusive : {true, false}) {
      for (int axis : {0, 1}) {
        for (auto& [layout, z] : layouts(sums)) {
          EXPECT_TRUE(scan_matches(scan_ops()[0], z, axis, reverse, inclusive))
              << "cumsum " << layout << " axis " << axis << " reverse "
              << reverse << " inclusive " << inclusive;
        }
        for (auto& [layout, z] : layouts(prods)) {
          EXPECT_TRUE(scan_matches(scan_ops()[1], z, axis, reverse, inclusive))
              << "cumprod " << layout << " axis " << axis << " reverse "
              << reverse << " inclusive " << inclusive;
        }
      }
      for (int n : {3000, 65536 * 4 + 5}) {
        array line = complex_of(random_array({n}, float32, 0.25, 1),
                                random_array({n}, float32, 0.25, 1));
        EXPECT_TRUE(scan_matches(scan_ops()[0], line, 0, reverse, inclusive))
            << "cumsum line " << n << " reverse " << reverse;
        array rows = reshape(slice(line, Shape{0}, Shape{3 * (n / 3)}),
                             {3, n / 3});
        EXPECT_TRUE(scan_matches(scan_ops()[0], transpose(rows), 0, reverse,
                                 inclusive))
            << "cumsum strided columns " << n;
      }
    }
  }
}

// complex64 cummax, cummin (ordered by real part, then imaginary part, NaN
// spreading) and logcumsumexp: every layout, both directions, inclusive and
// exclusive, ties and NaN, long lines scanned in pieces; a bad axis raises
// on the GPU as on the CPU.
TEST_F(GpuScan, Complex64MaxMinAndLogAddExp) {
  // Real parts from a few values, so ties fall to the imaginary part.
  array re = floor(random_array({23, 35}, float32, -3, 3));
  array z = complex_of(re, random_array({23, 35}, float32, -1, 1));
  for (size_t i = 2; i < scan_ops().size(); ++i) {
    const auto& op = scan_ops()[i];
    for (bool reverse : {false, true}) {
      for (bool inclusive : {true, false}) {
        for (int axis : {0, 1}) {
          for (auto& [layout, v] : layouts(z)) {
            EXPECT_TRUE(scan_matches(op, v, axis, reverse, inclusive))
                << op.name << " " << layout << " axis " << axis
                << " reverse " << reverse << " inclusive " << inclusive;
          }
        }
      }
    }
    for (int n : {3000, 65536 * 4 + 5}) {
      // Phases within an arc narrower than pi: every partial sum's phase
      // stays in it, so no association of logcumsumexp's steps can land
      // on another branch of the log (they agree modulo 2 pi only).
      array line = complex_of(random_array({n}, float32, -2, 2),
                              random_array({n}, float32, -1, 1));
      EXPECT_TRUE(scan_matches(op, line, 0, false, true))
          << op.name << " line " << n;
      EXPECT_TRUE(scan_matches(op, line, 0, true, false))
          << op.name << " reversed exclusive line " << n;
    }
  }
  // A NaN part spreads through the max and min scans from where it is.
  float nan = std::numeric_limits<float>::quiet_NaN();
  array with_nan = complex_of(array({1.0f, 3.0f, 2.0f, 5.0f, 0.0f}, {5}),
                              array({0.0f, 0.0f, nan, 0.0f, 1.0f}, {5}));
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_TRUE(scan_matches(scan_ops()[i], with_nan, 0, false, true))
        << scan_ops()[i].name << " with NaN";
  }
  EXPECT_THROW(cumsum(z, 2, false, true, Device::gpu), std::invalid_argument);
}

} // namespace
} // namespace kiln::test
