// GPU row kernels (softmax, logsumexp, layer_norm, rms_norm, rope) against the CPU
// backend on random inputs: every float dtype and layout, row lengths on
// both sides of the warp/block switch (and not multiples of the 16-byte
// chunk), more than 65535 rows, inf/NaN, empty arrays, indices past 2^31,
// and the gradients of the fallback graphs evaluated on each device.
#include <cmath>
#include <limits>

#include "cuda/gpu_fixture.h"
#include "kiln/ops/fast.h"
#include "kiln/primitives/fast.h"

namespace kiln::test {
namespace {

using GpuRows = GpuTest;

// One row, a few elements, one warp's chunk, the longest row one warp
// holds and one past it (checked in nvrtc_headers_test.cpp), just past a
// 1024-thread block's chunks, and a long row.
const std::vector<int> lengths = {1, 3, 32, 512, 513, 4097, 70000};

int rows_for(int n) { return std::max(2, std::min(64, (1 << 17) / n)); }

using RowFn = std::function<array(const array&, Device)>;

// fn on every layout of a random (rows, n) input for each length, compared
// with the CPU at tolerance tol(dtype, n).
void check_rows(const std::string& what, Dtype dt, const RowFn& fn,
                const std::function<double(int)>& tol) {
  for (int n : lengths) {
    array x = random_array({rows_for(n), n}, dt, -3, 3);
    for (auto& [layout, in] : layouts(x)) {
      auto f = [&](const std::vector<array>& v, Device d) {
        return fn(v[0], d);
      };
      EXPECT_TRUE(same_on_devices(f, {in}, tol(n)))
          << what << " " << dtype_name(dt) << " " << layout << " n=" << n;
    }
  }
}

bool is_half(Dtype dt) { return dt == float16 || dt == bfloat16; }

TEST_F(GpuRows, SoftmaxEveryDtypeLayoutAndLength) {
  for (Dtype dt : float_dtypes()) {
    check_rows(
        "softmax precise", dt,
        [](const array& x, Device d) { return softmax(x, -1, true, d); },
        [&](int) { return tolerance(dt); });
    if (!is_half(dt)) {
      check_rows(
          "softmax", dt,
          [](const array& x, Device d) { return softmax(x, -1, false, d); },
          [&](int) { return tolerance(dt); });
    }
  }
}

TEST_F(GpuRows, ImpreciseHalfSoftmaxSumsInItsOwnType) {
  // Sums in float16/bfloat16 round at every step on both devices, but in a
  // different order (a sequential loop on the CPU, a tree on the GPU), so
  // only short rows agree closely. Long rows are held to the CPU's own
  // bound for imprecise sums against a precise result (ops/fast_test.cpp).
  for (Dtype dt : {float16, bfloat16}) {
    for (int n : lengths) {
      array x = random_array({rows_for(n), n}, dt, -3, 3);
      for (auto& [layout, in] : layouts(x)) {
        bool short_row = n <= 32;
        auto f = [&](const std::vector<array>& v, Device d) {
          return softmax(v[0], -1, d == Device::cpu && !short_row, d);
        };
        double tol = short_row ? tolerance(dt) : 0.15;
        EXPECT_TRUE(same_on_devices(f, {in}, tol))
            << dtype_name(dt) << " " << layout << " n=" << n;
      }
    }
  }
}

TEST_F(GpuRows, SoftmaxOverOtherAxesAndShapes) {
  for (Dtype dt : {float32, bfloat16}) {
    array x = random_array({5, 7, 1030}, dt);
    for (int axis : {0, 1, 2}) {
      auto f = [&](const std::vector<array>& v, Device d) {
        return softmax(v[0], axis, true, d);
      };
      EXPECT_TRUE(same_on_devices(f, {x}, tolerance(dt)))
          << dtype_name(dt) << " axis " << axis;
    }
    auto all = [&](const std::vector<array>& v, Device d) {
      return softmax(v[0], true, d);
    };
    EXPECT_TRUE(
        same_on_devices(all, {random_array({3, 4}, dt)}, tolerance(dt)));
  }
  for (Shape s : {Shape{0, 5}, Shape{4, 0}, Shape{2, 0, 3}}) {
    auto f = [&](const std::vector<array>& v, Device d) {
      return softmax(v[0], -1, false, d);
    };
    EXPECT_TRUE(same_on_devices(f, {zeros(s, float32)}, 0));
  }
  // Integers are promoted to float32 by the op.
  auto ints = [&](const std::vector<array>& v, Device d) {
    return softmax(v[0], -1, false, d);
  };
  EXPECT_TRUE(same_on_devices(ints, {random_array({3, 40}, int32, -5, 5)},
                              tolerance(float32)));
}

// Rows of n with -inf, +inf and NaN: a row with some -inf, an all -inf row
// (NaN on the CPU: exp(-inf - -inf)), a row holding +inf, and one with NaN.
array special_rows(int n, Dtype dt) {
  std::vector<double> v = to_doubles(random_array({5, n}, float32, -3, 3));
  double inf = std::numeric_limits<double>::infinity();
  for (int j = 0; j < n; j += 3) v[j] = -inf;
  for (int j = 0; j < n; ++j) v[n + j] = -inf;
  v[2 * n + n / 2] = inf;
  v[3 * n + n - 1] = std::nan("");
  return astype(array(v.begin(), {5, n}, float64), dt);
}

TEST_F(GpuRows, SoftmaxInfinitiesAndNaN) {
  for (Dtype dt : float_dtypes()) {
    for (int n : {2, 33, 1000, 5000}) {
      for (bool precise : {false, true}) {
        // Long imprecise 16-bit rows: against the precise CPU result, as in
        // ImpreciseHalfSoftmaxSumsInItsOwnType.
        bool loose = !precise && is_half(dt) && n > 32;
        auto f = [&](const std::vector<array>& v, Device d) {
          return softmax(v[0], -1, precise || (loose && d == Device::cpu), d);
        };
        EXPECT_TRUE(same_on_devices(f, {special_rows(n, dt)},
                                    loose ? 0.15 : tolerance(dt)))
            << dtype_name(dt) << " n=" << n << " precise " << precise;
      }
    }
  }
}

// logsumexp over the last axis and another axis (one LogSumExp pass per
// row) and over all axes (composed), every float dtype, layout and row
// length; the special rows
// (+inf, all -inf, NaN) and integers (as float32).
TEST_F(GpuRows, LogSumExpEveryDtypeLayoutLengthAndSpecialRow) {
  for (Dtype dt : float_dtypes()) {
    check_rows(
        "logsumexp", dt,
        [](const array& x, Device d) { return logsumexp(x, -1, false, d); },
        [&](int) { return tolerance(dt); });
    auto axis0 = [](const std::vector<array>& v, Device d) {
      return logsumexp(v[0], 0, true, d);
    };
    EXPECT_TRUE(same_on_devices(axis0, {random_array({700, 9}, dt, -3, 3)},
                                tolerance(dt)))
        << dtype_name(dt);
    auto all = [](const std::vector<array>& v, Device d) {
      return logsumexp(v[0], false, d);
    };
    EXPECT_TRUE(same_on_devices(all, {random_array({30, 70}, dt, -3, 3)},
                                tolerance(dt)))
        << dtype_name(dt);
    for (int n : {2, 33, 1000, 5000}) {
      auto f = [](const std::vector<array>& v, Device d) {
        return logsumexp(v[0], -1, false, d);
      };
      EXPECT_TRUE(same_on_devices(f, {special_rows(n, dt)}, tolerance(dt)))
          << dtype_name(dt) << " n=" << n;
    }
  }
  auto ints = [](const std::vector<array>& v, Device d) {
    return logsumexp(v[0], -1, false, d);
  };
  EXPECT_TRUE(same_on_devices(ints, {random_array({3, 40}, int32, -5, 5)},
                              tolerance(float32)));
}

TEST_F(GpuRows, ManyRows) {
  // More rows than a grid dimension holds (65535), for both variants.
  for (auto [dt, s] : {std::pair{float16, Shape{70001, 3}},
                       std::pair{float32, Shape{70001, 3}},
                       std::pair{float32, Shape{66000, 1030}}}) {
    array x = random_array(s, dt);
    array w = random_array({s[1]}, dt);
    array b = random_array({s[1]}, dt);
    std::vector<std::pair<const char*, DeviceFn>> fns = {
        {"softmax", [](const std::vector<array>& v,
                       Device d) { return softmax(v[0], -1, true, d); }},
        {"layer_norm",
         [](const std::vector<array>& v, Device d) {
           return fast::layer_norm(v[0], v[1], v[2], 1e-5f, d);
         }},
        {"rms_norm",
         [](const std::vector<array>& v, Device d) {
           return fast::rms_norm(v[0], v[1], 1e-5f, d);
         }},
        {"rope",
         [](const std::vector<array>& v, Device d) {
           auto x3 = reshape(v[0], {1, v[0].shape(0), v[0].shape(1)}, d);
           int dims = std::min(8, 2 * (v[0].shape(1) / 2));
           return fast::rope(x3, dims, false, 10000.0f, 1.0f, 3, std::nullopt,
                             d);
         }},
    };
    for (auto& [name, fn] : fns) {
      EXPECT_TRUE(same_on_devices(fn, {x, w, b}, tolerance(dt)))
          << name << " " << dtype_name(dt) << " " << s[1];
    }
  }
}

// Absent, present, sliced (stride 2) and broadcast (stride 0) parameters.
std::vector<std::pair<std::string, std::optional<array>>> params(int n,
                                                                 Dtype dt) {
  array p = random_array({2 * n}, dt, -2, 2);
  return {{"none", std::nullopt},
          {"contiguous", random_array({n}, dt, -2, 2)},
          {"sliced", slice(p, Shape{1}, Shape{2 * n}, Shape{2})},
          {"broadcast", broadcast_to(slice(p, Shape{0}, Shape{1}), {n})}};
}

TEST_F(GpuRows, LayerNormEveryDtypeLayoutLengthAndParameter) {
  for (Dtype dt : float_dtypes()) {
    for (int n : lengths) {
      array x = random_array({rows_for(n), n}, dt, -3, 3);
      auto ps = params(n, dt);
      for (auto& [layout, in] : layouts(x)) {
        for (auto& [wname, w] : ps) {
          for (auto& [bname, b] : ps) {
            // Every weight with no bias and a plain bias, every bias with a
            // plain weight.
            if (wname != "contiguous" && bname != "none" &&
                bname != "contiguous") {
              continue;
            }
            auto f = [&](const std::vector<array>& v, Device d) {
              return fast::layer_norm(v[0], w, b, 1e-5f, d);
            };
            EXPECT_TRUE(same_on_devices(f, {in}, tolerance(dt)))
                << dtype_name(dt) << " " << layout << " n=" << n << " weight "
                << wname << " bias " << bname;
          }
        }
      }
    }
  }
}

TEST_F(GpuRows, RMSNormEveryDtypeLayoutLengthAndWeight) {
  for (Dtype dt : float_dtypes()) {
    for (int n : lengths) {
      array x = random_array({rows_for(n), n}, dt, -3, 3);
      for (auto& [layout, in] : layouts(x)) {
        for (auto& [wname, w] : params(n, dt)) {
          auto f = [&](const std::vector<array>& v, Device d) {
            return fast::rms_norm(v[0], w, 1e-5f, d);
          };
          EXPECT_TRUE(same_on_devices(f, {in}, tolerance(dt)))
              << dtype_name(dt) << " " << layout << " n=" << n << " weight "
              << wname;
        }
      }
    }
  }
}

TEST_F(GpuRows, NormsPromoteEdgeValuesAndEmpty) {
  // float16 x with a float32 weight computes in float32.
  array x = random_array({6, 300}, float16);
  array w = random_array({300}, float32);
  auto f = [&](const std::vector<array>& v, Device d) {
    return fast::layer_norm(v[0], v[1], std::nullopt, 1e-5f, d);
  };
  EXPECT_TRUE(same_on_devices(f, {x, w}, tolerance(float32)));
  auto g = [&](const std::vector<array>& v, Device d) {
    return fast::rms_norm(v[0], v[1], 1e-5f, d);
  };
  EXPECT_TRUE(same_on_devices(g, {x, w}, tolerance(float32)));
  // A constant row (variance 0: eps alone) and a row with NaN.
  for (int n : {7, 2000}) {
    std::vector<double> v = to_doubles(random_array({3, n}, float32));
    for (int j = 0; j < n; ++j) v[j] = 1.5;
    v[n + n / 3] = std::nan("");
    array c = array(v.begin(), {3, n}, float32);
    auto h = [&](const std::vector<array>& in, Device d) {
      return fast::layer_norm(in[0], std::nullopt, std::nullopt, 1e-3f, d);
    };
    EXPECT_TRUE(same_on_devices(h, {c}, tolerance(float32))) << n;
    EXPECT_TRUE(same_on_devices(g, {c, ones({n})}, tolerance(float32))) << n;
  }
  for (Shape s : {Shape{0, 5}, Shape{3, 0}}) {
    auto e = [&](const std::vector<array>& in, Device d) {
      return fast::layer_norm(in[0], std::nullopt, std::nullopt, 1e-5f, d);
    };
    EXPECT_TRUE(same_on_devices(e, {zeros(s, float32)}, 0));
  }
}

struct RopeCase {
  int dims;
  bool traditional;
  bool with_freqs;
  float scale;
};

TEST_F(GpuRows, RoPEEveryOption) {
  std::vector<RopeCase> cases = {{8, false, false, 1.0f},
                                 {8, true, false, 1.0f},
                                 {6, false, false, 0.5f},
                                 {6, true, true, 2.0f},
                                 {4, false, true, 1.0f}};
  for (Dtype dt : float_dtypes()) {
    // (B, H, T, D) with D = 9: features past dims are copied.
    array x = random_array({2, 3, 37, 9}, dt);
    std::vector<std::pair<std::string, array>> views = {
        {"contiguous", x},
        {"transposed",
         transpose(random_array({2, 37, 3, 9}, dt), {0, 2, 1, 3})},
        {"sliced", slice(random_array({2, 3, 74, 9}, dt), Shape{0, 0, 1, 0},
                         Shape{2, 3, 74, 9}, Shape{1, 1, 2, 1})},
        {"broadcast",
         broadcast_to(random_array({1, 1, 37, 9}, dt), {2, 3, 37, 9})}};
    std::vector<std::pair<std::string, array>> offsets = {
        {"0", array(0, int32)},
        {"70000", array(70000, int32)},
        {"per batch", array({5, 1234}, int32)},
        {"per batch sliced",
         slice(array({3, 0, 9, 0}, int32), Shape{0}, Shape{4}, Shape{2})}};
    for (auto& c : cases) {
      array freqs = random_array({c.dims / 2}, float32, 0.5, 50);
      for (auto& [vname, in] : views) {
        for (auto& [oname, off] : offsets) {
          auto f = [&](const std::vector<array>& v, Device d) {
            std::optional<float> base;
            std::optional<array> fr;
            if (c.with_freqs) {
              fr = v[2];
            } else {
              base = 10000.0f;
            }
            return fast::rope(v[0], c.dims, c.traditional, base, c.scale, v[1],
                              fr, d);
          };
          EXPECT_TRUE(same_on_devices(f, {in, off, freqs}, tolerance(dt)))
              << dtype_name(dt) << " " << vname << " offset " << oname
              << " dims " << c.dims << " traditional " << c.traditional
              << " freqs " << c.with_freqs << " scale " << c.scale;
        }
      }
    }
  }
}

TEST_F(GpuRows, RoPEShapesAndEmpty) {
  // 3-d x, a wide head (dims == D), and an empty batch.
  auto f = [](const std::vector<array>& v, Device d) {
    return fast::rope(v[0], v[0].shape(-1), false, 500000.0f, 1.0f, 17,
                      std::nullopt, d);
  };
  EXPECT_TRUE(same_on_devices(f, {random_array({3, 129, 128}, bfloat16)},
                              tolerance(bfloat16)));
  EXPECT_TRUE(same_on_devices(f, {random_array({2, 4, 5, 256}, float32)},
                              tolerance(float32)));
  EXPECT_TRUE(same_on_devices(f, {zeros({0, 4, 8}, float32)}, 0));
}

// Gradients through each primitive's fallback graph (vjp), evaluated with
// the GPU and then the CPU as default device.
TEST_F(GpuRows, GradientsMatch) {
  using Fun = std::function<array(const std::vector<array>&)>;
  std::vector<std::pair<const char*, Fun>> funs = {
      {"softmax",
       [](const std::vector<array>& v) { return softmax(v[0], -1, true); }},
      {"layer_norm",
       [](const std::vector<array>& v) {
         return fast::layer_norm(v[0], v[1], v[2], 1e-5f);
       }},
      {"rms_norm",
       [](const std::vector<array>& v) {
         return fast::rms_norm(v[0], v[1], 1e-5f);
       }},
      {"rope",
       [](const std::vector<array>& v) {
         auto x3 = reshape(v[0], {1, v[0].shape(0), v[0].shape(1)});
         return fast::rope(x3, 6, true, 10000.0f, 1.0f, 2);
       }},
  };
  for (Dtype dt : {float32, float64, bfloat16}) {
    for (int n : {8, 1030}) {
      array x = random_array({5, n}, dt);
      array w = random_array({n}, dt);
      array b = random_array({n}, dt);
      array ct = random_array({5, n}, dt);
      for (auto& [name, fun] : funs) {
        for (int k = 0; k < 3; ++k) {
          auto f = [&](const std::vector<array>& v, Device d) {
            DefaultDeviceScope scope(d);
            auto c = reshape(ct, fun(v).shape());
            Fn outputs = [&](const std::vector<array>& in) {
              return std::vector<array>{fun(in)};
            };
            return vjp(outputs, v, {c}).second[k];
          };
          // The CPU's norms differentiate through their fused backward
          // (each gradient rounded once); the GPU's graph rounds its
          // bfloat16 intermediates.
          bool norm = std::string(name).find("norm") != std::string::npos;
          double tol = (norm && dt == bfloat16 ? 16 : 4) * tolerance(dt);
          EXPECT_TRUE(same_on_devices(f, {x, w, b}, tol))
              << name << " " << dtype_name(dt) << " n=" << n << " input " << k;
        }
      }
    }
  }
}

// The norms' fused backward kernels (LayerNormVjp / RMSNormVjp on GPU
// streams) against the CPU's fused backward, for every float dtype, layout
// of x, parameter combination (a 0-d weight when absent), row lengths on
// both sides of the warp/block switch and not multiples of the 16-byte
// chunk, more than 65535 rows and empty inputs.
TEST_F(GpuRows, NormGradientsEveryDtypeLayoutAndLength) {
  for (Dtype dt : float_dtypes()) {
    for (int n : {1, 3, 7, 64, 512, 513, 1100, 4097}) {
      array x = random_array({rows_for(n), n}, dt, -3, 3);
      array w = random_array({n}, dt, 0.5, 2);
      array b = random_array({n}, dt, -1, 1);
      array ct = random_array({rows_for(n), n}, dt, -2, 2);
      for (auto& [layout, in] : layouts(x)) {
        for (int variant = 0; variant < 4; ++variant) {
          for (int k = 0; k < 3; ++k) {
            if (variant >= 2 && k == 2) continue;  // rms_norm: no bias
            auto f = [&](const std::vector<array>& v, Device d) {
              DefaultDeviceScope scope(d);
              Fn fn = [&](const std::vector<array>& a) {
                switch (variant) {
                  case 0:
                    return std::vector<array>{
                        fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
                  case 1:
                    return std::vector<array>{fast::layer_norm(
                        a[0], std::nullopt, std::nullopt, 1e-5f)};
                  case 2:
                    return std::vector<array>{
                        fast::rms_norm(a[0], a[1], 1e-5f)};
                  default:
                    return std::vector<array>{
                        fast::rms_norm(a[0], std::nullopt, 1e-5f)};
                }
              };
              // (Which primitive computes it: NormBackwardMatchesFloat64.)
              return vjp(fn, v, {ct}).second[k];
            };
            // Both devices round each gradient once from double sums in
            // different orders (the GPU's lanes sum dweight over their rows
            // in float first): a few units in the last place, more where
            // dx cancels. The bias's gradient (input 2) is a plain sum over
            // rows, reduced in different orders on the two devices.
            bool half = dt == float16 || dt == bfloat16;
            double tol = (k == 2 ? (half ? 16 : 64) : 4) * tolerance(dt);
            EXPECT_TRUE(same_on_devices(f, {in, w, b}, tol, false))
                << dtype_name(dt) << " " << layout << " n=" << n
                << " variant " << variant << " input " << k;
          }
        }
      }
    }
  }
  // Many rows, and empty inputs.
  for (Shape s : {Shape{70001, 3}, Shape{0, 5}}) {
    array x = s[0] ? random_array(s, float32) : zeros(s, float32);
    array w = random_array({s[1]}, float32, 0.5, 2);
    array ct = s[0] ? random_array(s, float32) : zeros(s, float32);
    for (int k = 0; k < 2; ++k) {
      auto f = [&](const std::vector<array>& v, Device d) {
        DefaultDeviceScope scope(d);
        Fn fn = [&](const std::vector<array>& a) {
          return std::vector<array>{fast::layer_norm(a[0], a[1], a[1], 1e-5f)};
        };
        return vjp(fn, v, {ct}).second[k];
      };
      // dweight sums 70001 rows of both signs: each lane's ~33 rows in
      // float32 on the GPU, in double here; the partial sums grow to about
      // sqrt(rows) while the total stays near 1 (1.4e-3 apart on the H200).
      EXPECT_TRUE(same_on_devices(f, {x, w}, 1e-3, false))
          << s[0] << " rows, input " << k;
    }
  }
}

// The fused backward on the GPU against float64 gradients of the same
// inputs (computed on the CPU in float64): one rounding to the dtype, so
// within its tolerance (a few ulps). bfloat16 rows of 512 are the training
// step's shape. (The ops take 1-d weights only; the 0-d stand-in of an
// absent one is covered above.)
TEST_F(GpuRows, NormBackwardMatchesFloat64) {
  for (Dtype dt : {float16, bfloat16, float32}) {
    for (Shape s : {Shape{1, 7}, Shape{2048, 512}, Shape{300, 4100}}) {
      array x = random_array(s, dt, -3, 3);
      array w = random_array({s[1]}, dt, 0.5, 2);
      array ct = random_array(s, dt, -2, 2);
      for (bool rms : {false, true}) {
        {
          auto grads = [&](Dtype t, Device d) {
            DefaultDeviceScope scope(d);
            Fn fn = [&](const std::vector<array>& a) {
              return std::vector<array>{
                  rms ? fast::rms_norm(a[0], a[1], 1e-5f)
                      : fast::layer_norm(a[0], a[1], std::nullopt, 1e-5f)};
            };
            auto out = vjp(fn, {astype(x, t), astype(w, t)},
                           {astype(ct, t)}).second;
            EXPECT_EQ(std::string(out[0].primitive().name()),
                      rms ? "RMSNormVjp" : "LayerNormVjp");
            eval(out);
            return out;
          };
          auto got = grads(dt, Device::gpu);
          auto want = grads(float64, Device::cpu);
          double tol = 4 * tolerance(dt);
          for (int k = 0; k < 2; ++k) {
            EXPECT_TRUE(all_close(to_doubles(got[k]), to_doubles(want[k]),
                                  tol, tol))
                << dtype_name(dt) << " " << s[0] << "x" << s[1]
                << (rms ? " rms" : " layer") << " output " << k;
          }
        }
      }
    }
  }
}

TEST_F(GpuRows, IndicesPast2To31) {
  // 524289 rows of 4096 float16: row offsets pass 2^31 elements. The input
  // is built on the GPU as a sum of a row and a column; a few rows are
  // checked against the CPU on just those rows.
  int rows = (1 << 19) + 1, n = 4096;
  array row = random_array({1, n}, float16);
  array col = random_array({rows, 1}, float16);
  array x = add(row, col, Device::gpu);
  array w = random_array({n}, float16);
  array sm = softmax(x, -1, true, Device::gpu);
  array ln = fast::rms_norm(x, w, 1e-5f, Device::gpu);
  array rp = fast::rope(reshape(x, {1, rows, n}, Device::gpu), n, false,
                        10000.0f, 1.0f, 0, std::nullopt, Device::gpu);
  eval({sm, ln, rp});
  ASSERT_GT(sm.size(), size_t(1) << 31);
  for (int i : {0, rows / 2, rows - 1}) {
    auto pick = [&](const array& a) {
      return contiguous(slice(reshape(a, {rows, n}, Device::gpu), Shape{i, 0},
                              Shape{i + 1, n}, Device::gpu),
                        false, Device::gpu);
    };
    array xi = add(row, slice(col, Shape{i, 0}, Shape{i + 1, 1}), Device::cpu);
    array want_sm = softmax(xi, -1, true, Device::cpu);
    array want_ln = fast::rms_norm(xi, w, 1e-5f, Device::cpu);
    array want_rp = fast::rope(reshape(xi, {1, 1, n}), n, false, 10000.0f, 1.0f,
                               i, std::nullopt, Device::cpu);
    double tol = tolerance(float16);
    EXPECT_TRUE(all_close(to_doubles(pick(sm)), to_doubles(want_sm), tol, tol))
        << i;
    EXPECT_TRUE(all_close(to_doubles(pick(ln)), to_doubles(want_ln), tol, tol))
        << i;
    EXPECT_TRUE(all_close(to_doubles(pick(rp)), to_doubles(want_rp), tol, tol))
        << i;
  }
}

TEST_F(GpuRows, BadArgumentsRaiseOnTheGpuToo) {
  array x = random_array({4, 8}, float32);
  // complex64 is no bad argument (as MLX): composed on the GPU as on the CPU.
  auto csoftmax = [](const std::vector<array>& v, Device d) {
    return softmax(v[0], -1, false, d);
  };
  EXPECT_TRUE(same_on_devices(csoftmax, {astype(x, complex64)}, 1e-6, false));
  EXPECT_THROW(fast::layer_norm(astype(x, int32), std::nullopt, std::nullopt,
                                1e-5f, Device::gpu),
               std::invalid_argument);
  EXPECT_THROW(
      fast::rms_norm(x, random_array({7}, float32), 1e-5f, Device::gpu),
      std::invalid_argument);
  EXPECT_THROW(fast::rope(reshape(x, {1, 4, 8}), 5, false, 10000.0f, 1.0f, 0,
                          std::nullopt, Device::gpu),
               std::invalid_argument);
  EXPECT_THROW(fast::rope(reshape(x, {1, 4, 8}), 8, false, 10000.0f, 1.0f,
                          array({1, 2}, int32), std::nullopt, Device::gpu),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
