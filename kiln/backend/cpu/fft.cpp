// The FFT primitive on the CPU: the input is copied row-major into the
// output's complex buffer (or a complex scratch), then each transformed
// axis is transformed in place, line by line with a cached plan
// (fft_plan.h), lines spread over the thread pool. The last axis's lines
// are contiguous; other axes are transformed a block of neighbouring
// columns at a time, gathered into contiguous lines, so that each row of
// the block is one run of memory.
#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <tuple>
#include <vector>

#include "kiln/backend/cpu/copy.h"
#include "kiln/backend/cpu/fft_plan.h"
#include "kiln/core/allocator.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/fft.h"

namespace kiln {

namespace {

using cfloat = std::complex<float>;
using detail::parallel_for;

// Columns gathered per block for a non-last axis: 16 complex64 values are
// two cache lines of each row.
constexpr int64_t block_columns = 16;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// Enough lines per chunk that a chunk does at least ~64K points of work.
size_t grain_for(int64_t n) {
  return static_cast<size_t>(
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(n, 1)));
}

void scale_run(cfloat* p, int64_t n, float scale) {
  if (scale == 1.0f) return;
  float* f = reinterpret_cast<float*>(p);
  for (int64_t j = 0; j < 2 * n; ++j) f[j] *= scale;
}

// Transforms every line along `axis` of the row-major buffer `data` of
// `shape` in place, times `scale`.
void transform_axis(cfloat* data, const Shape& shape, int axis, bool inverse,
                    float scale) {
  int64_t n = shape[axis];
  int64_t outer = product(shape, 0, axis);
  int64_t inner = product(shape, axis + 1, shape.size());
  if (n == 0 || outer * inner == 0) return;
  auto plan = cpu::fft_plan(n, inverse);
  if (inner == 1) {
    parallel_for(outer, grain_for(n), [&](size_t lo, size_t hi) {
      std::vector<cfloat> scratch(plan->scratch_size());
      for (size_t l = lo; l < hi; ++l) {
        cfloat* p = data + l * n;
        plan->execute(p, 1, p, 1, scratch.data());
        scale_run(p, n, scale);
      }
    });
    return;
  }
  int64_t blocks_per_row = (inner + block_columns - 1) / block_columns;
  int64_t tasks = outer * blocks_per_row;
  parallel_for(tasks, std::max<size_t>(1, grain_for(n) / block_columns),
               [&](size_t lo, size_t hi) {
    std::vector<cfloat> scratch(plan->scratch_size());
    std::vector<cfloat> lines(n * block_columns);
    for (size_t t = lo; t < hi; ++t) {
      int64_t o = t / blocks_per_row;
      int64_t c0 = (t % blocks_per_row) * block_columns;
      int64_t width = std::min(block_columns, inner - c0);
      cfloat* base = data + o * n * inner + c0;
      for (int64_t j = 0; j < n; ++j) {
        const cfloat* row = base + j * inner;
        for (int64_t c = 0; c < width; ++c) lines[c * n + j] = row[c];
      }
      for (int64_t c = 0; c < width; ++c) {
        cfloat* p = lines.data() + c * n;
        plan->execute(p, 1, p, 1, scratch.data());
      }
      for (int64_t j = 0; j < n; ++j) {
        cfloat* row = base + j * inner;
        for (int64_t c = 0; c < width; ++c) row[c] = lines[c * n + j] * scale;
      }
    }
  });
}

// exp(-2 pi i k / n) for k = 0 .. n / 2, in double then rounded: the
// twiddles that join the two halves of a real transform of even n, made
// once per length.
std::shared_ptr<const std::vector<cfloat>> half_twiddles(int64_t n) {
  static std::mutex m;
  static std::map<int64_t, std::shared_ptr<const std::vector<cfloat>>> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  auto w = std::make_shared<std::vector<cfloat>>(n / 2 + 1);
  for (int64_t k = 0; k <= n / 2; ++k) {
    double a = -2 * std::numbers::pi * static_cast<double>(k) / n;
    (*w)[k] = cfloat(static_cast<float>(std::cos(a)),
                     static_cast<float>(std::sin(a)));
  }
  if (cache.size() >= 64) cache.erase(cache.begin());
  cache.emplace(n, w);
  return w;
}

// What the real transforms along the last axis share: n real points per
// line and m = n / 2 + 1 frequencies, the lines before and after the axis,
// and the plan (of n / 2 points for even n, the half-length route, with
// its twiddles; of n for odd n).
struct RealLines {
  RealLines(const Shape& shape, int axis, int64_t n_points, bool inverse)
      : n(n_points), m(n_points / 2 + 1), h(n_points / 2),
        outer(product(shape, 0, axis)),
        inner(product(shape, axis + 1, shape.size())), half(n_points % 2 == 0),
        plan(cpu::fft_plan(half ? h : n, inverse)),
        twiddles(half ? half_twiddles(n) : nullptr) {}
  std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool> sizes() const {
    return {n, m, h, outer, inner, half};
  }
  int64_t n, m, h, outer, inner;
  bool half;
  std::shared_ptr<const cpu::FftPlan> plan;
  std::shared_ptr<const std::vector<cfloat>> twiddles;
};

// rfft along the last of the axes: each real line of n (row-major `x`)
// becomes its n / 2 + 1 non-negative frequencies in `out`. An even n takes
// the usual half-length route: the even and odd samples as the real and
// imaginary parts of n / 2 complex values, one transform of those, and a
// pass that separates the two halves' spectra (Z_k and conj(Z_{h-k})) and
// joins them with the twiddles. Odd n transforms the line as complex.
void real_forward_last(const float* x, const Shape& in_shape, int axis,
                       cfloat* out, float scale) {
  RealLines r(in_shape, axis, in_shape[axis], false);
  auto [n, m, h, outer, inner, half] = r.sizes();
  auto& plan = r.plan;
  auto& tw = r.twiddles;
  parallel_for(outer * inner, grain_for(n), [&](size_t lo, size_t hi) {
    std::vector<cfloat> scratch(plan->scratch_size());
    std::vector<cfloat> line(half ? h + 1 : n);
    std::vector<cfloat> joined(inner == 1 ? 0 : m);
    for (size_t l = lo; l < hi; ++l) {
      int64_t o = l / inner, i = l % inner;
      const float* src = x + o * n * inner + i;
      cfloat* dst = out + o * m * inner + i;
      if (!half) {
        for (int64_t j = 0; j < n; ++j) line[j] = cfloat(src[j * inner], 0.0f);
        plan->execute(line.data(), 1, line.data(), 1, scratch.data());
        for (int64_t k = 0; k < m; ++k) dst[k * inner] = line[k] * scale;
        continue;
      }
      float* f = reinterpret_cast<float*>(line.data());
      for (int64_t j = 0; j < n; ++j) f[j] = src[j * inner];
      plan->execute(line.data(), 1, line.data(), 1, scratch.data());
      line[h] = line[0];
      // In floats, through restrict pointers: the output cannot alias the
      // line, so nothing is reloaded after each store.
      float* __restrict res = inner == 1
                                  ? reinterpret_cast<float*>(dst)
                                  : reinterpret_cast<float*>(joined.data());
      const float* __restrict z = f;
      const float* __restrict w = reinterpret_cast<const float*>(tw->data());
      const float sc = scale;
      for (int64_t k = 0; k <= h; ++k) {
        float zr = z[2 * k], zi = z[2 * k + 1];
        float cr = z[2 * (h - k)], ci = -z[2 * (h - k) + 1]; // conj(Z_{h-k})
        // even = (Z_k + conj(Z_{h-k})) / 2; odd = (Z_k - conj(Z_{h-k})) / 2i.
        float er = 0.5f * (zr + cr), ei = 0.5f * (zi + ci);
        float odr = 0.5f * (zi - ci), odi = -0.5f * (zr - cr);
        float wr = w[2 * k], wi = w[2 * k + 1];
        res[2 * k] = (er + wr * odr - wi * odi) * sc;
        res[2 * k + 1] = (ei + wr * odi + wi * odr) * sc;
      }
      if (inner != 1) {
        for (int64_t k = 0; k <= h; ++k) dst[k * inner] = joined[k];
      }
    }
  });
}

// irfft along the last of the axes: each line of n / 2 + 1 frequencies
// (row-major complex `x`) of a Hermitian spectrum of n points becomes n
// real values. An even n reverses the half-length route (the even and odd
// samples' spectra from X_k and conj(X_{h-k}), one inverse transform of
// n / 2 points, whose real and imaginary parts are the even and odd
// samples); an odd n extends the spectrum to n points and transforms it.
// The imaginary parts of frequency 0 and (even n) n / 2 drop out, as a
// real output has none.
void real_inverse_last(const cfloat* x, const Shape& in_shape, int axis,
                       int64_t n_out, float* out, float scale) {
  RealLines r(in_shape, axis, n_out, true);
  auto [n, m, h, outer, inner, half] = r.sizes();
  auto& plan = r.plan;
  auto& tw = r.twiddles;
  int64_t m_in = in_shape[axis]; // n / 2 + 1 as the op fits it
  parallel_for(outer * inner, grain_for(n), [&](size_t lo, size_t hi) {
    std::vector<cfloat> scratch(plan->scratch_size());
    std::vector<cfloat> spec(h + 1);
    std::vector<cfloat> line(half ? h : n);
    for (size_t l = lo; l < hi; ++l) {
      int64_t o = l / inner, i = l % inner;
      const cfloat* src = x + o * m_in * inner + i;
      float* dst = out + o * n * inner + i;
      for (int64_t k = 0; k <= h; ++k) {
        spec[k] = k < m_in ? src[k * inner] : cfloat(0.0f);
      }
      spec[0] = spec[0].real();
      if (half) spec[h] = spec[h].real();
      if (!half) {
        for (int64_t k = 0; k <= h; ++k) line[k] = spec[k];
        for (int64_t k = h + 1; k < n; ++k) line[k] = std::conj(line[n - k]);
        plan->execute(line.data(), 1, line.data(), 1, scratch.data());
        for (int64_t j = 0; j < n; ++j) dst[j * inner] = line[j].real() * scale;
        continue;
      }
      // Z_k = (X_k + conj(X_{h-k})) + i conj(w_k) (X_k - conj(X_{h-k})), in
      // floats through restrict pointers (see real_forward_last).
      {
        const float* __restrict x2 =
            reinterpret_cast<const float*>(spec.data());
        const float* __restrict w = reinterpret_cast<const float*>(tw->data());
        float* __restrict zl = reinterpret_cast<float*>(line.data());
        for (int64_t k = 0; k < h; ++k) {
          float xr = x2[2 * k], xi = x2[2 * k + 1];
          float cr = x2[2 * (h - k)], ci = -x2[2 * (h - k) + 1];
          float sr = xr + cr, si = xi + ci, dr = xr - cr, di = xi - ci;
          float wr = w[2 * k], wi = w[2 * k + 1];
          float dwr = dr * wr + di * wi, dwi = di * wr - dr * wi;
          zl[2 * k] = sr - dwi;
          zl[2 * k + 1] = si + dwr;
        }
      }
      plan->execute(line.data(), 1, line.data(), 1, scratch.data());
      const float* __restrict y = reinterpret_cast<const float*>(line.data());
      const float sc = scale;
      if (inner == 1) {
        for (int64_t j = 0; j < n; ++j) dst[j] = y[j] * sc;
      } else {
        for (int64_t j = 0; j < n; ++j) dst[j * inner] = y[j] * sc;
      }
    }
  });
}

} // namespace

void FFT::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  float scale = static_cast<float>(this->scale(in));
  // The axes transformed as complex lines, and where the scale goes: once,
  // on the last pass over the data.
  std::vector<int> complex_axes = axes_;
  if (real_) complex_axes.pop_back();
  if (!real_) {
    detail::copy_into(in, out, out.strides(), 0);
    auto* data = out.data<cfloat>();
    for (size_t i = 0; i < complex_axes.size(); ++i) {
      bool last = i + 1 == complex_axes.size();
      transform_axis(data, out.shape(), complex_axes[i], inverse_,
                     last ? scale : 1.0f);
    }
    return;
  }
  int axis = axes_.back();
  if (!inverse_) {
    array x = detail::row_major(in, float32);
    real_forward_last(x.data<float>(), x.shape(), axis, out.data<cfloat>(),
                      complex_axes.empty() ? scale : 1.0f);
    for (size_t i = 0; i < complex_axes.size(); ++i) {
      bool last = i + 1 == complex_axes.size();
      transform_axis(out.data<cfloat>(), out.shape(), complex_axes[i], false,
                     last ? scale : 1.0f);
    }
    return;
  }
  // irfft: the complex inverse along the other axes first, on a copy (a
  // row-major input with none is read as it is).
  array tmp = in;
  if (complex_axes.empty()) {
    tmp = detail::row_major(in, complex64);
  } else {
    tmp = array::uninitialized(in.shape(), complex64);
    detail::copy_row_major(in, tmp);
  }
  for (int ax : complex_axes) {
    transform_axis(tmp.data<cfloat>(), tmp.shape(), ax, true, 1.0f);
  }
  real_inverse_last(tmp.data<cfloat>(), tmp.shape(), axis, n_last_,
                    out.data<float>(), scale);
}

} // namespace kiln
