// RoPE: angles are tabulated once per (offset, position) in double, then
// every row of x rotates its first dims features with the table.
#include <cmath>

#include "kiln/backend/cpu/copy.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

template <typename T>
void rotate(const array& x, const std::vector<double>& cos_t,
            const std::vector<double>& sin_t, int dims, bool traditional,
            bool per_batch, array& out) {
  using C = compute_t<T>;
  int64_t D = x.shape(-1), T_ = x.shape(-2), B = x.shape(0);
  int64_t half = dims / 2;
  size_t rows = x.size() / D;
  int64_t rows_per_batch = static_cast<int64_t>(rows) / B;
  const T* px = x.data<T>();
  T* po = out.data<T>();
  size_t grain = std::max<size_t>(1, (1 << 14) / D);
  kiln::detail::parallel_for(rows, grain, [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      int64_t t = static_cast<int64_t>(r) % T_;
      int64_t b = per_batch ? static_cast<int64_t>(r) / rows_per_batch : 0;
      const double* c = cos_t.data() + (b * T_ + t) * half;
      const double* s = sin_t.data() + (b * T_ + t) * half;
      const T* xr = px + r * D;
      T* orow = po + r * D;
      for (int64_t j = 0; j < half; ++j) {
        int64_t i1 = traditional ? 2 * j : j;
        int64_t i2 = traditional ? 2 * j + 1 : j + half;
        C x1 = static_cast<C>(xr[i1]), x2 = static_cast<C>(xr[i2]);
        C cj = static_cast<C>(c[j]), sj = static_cast<C>(s[j]);
        orow[i1] = T(x1 * cj - x2 * sj);
        orow[i2] = T(x1 * sj + x2 * cj);
      }
      for (int64_t i = dims; i < D; ++i) orow[i] = xr[i];
    }
  });
}

} // namespace

void RoPE::eval_cpu(const std::vector<array>& inputs,
                    std::vector<array>& outputs) {
  array x = kiln::detail::row_major(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array& offset = inputs[1];
  int half = dims_ / 2;
  std::vector<double> inv(half);
  for (int j = 0; j < half; ++j) {
    if (inputs.size() == 3) {
      const float* f = inputs[2].data<float>();
      inv[j] = 1.0 / static_cast<double>(f[j * inputs[2].strides()[0]]);
    } else {
      inv[j] = std::exp(-j * std::log(static_cast<double>(base_)) / half);
    }
  }
  bool per_batch = offset.size() > 1;
  int64_t n_off = per_batch ? offset.size() : 1, T_ = x.shape(-2);
  int64_t ostride = offset.ndim() == 0 ? 0 : offset.strides()[0];
  std::vector<double> cos_t(n_off * T_ * half), sin_t(cos_t.size());
  for (int64_t b = 0; b < n_off; ++b) {
    double off = offset.data<int32_t>()[b * ostride];
    for (int64_t t = 0; t < T_; ++t) {
      double pos = (t + off) * static_cast<double>(scale_);
      for (int j = 0; j < half; ++j) {
        cos_t[(b * T_ + t) * half + j] = std::cos(pos * inv[j]);
        sin_t[(b * T_ + t) * half + j] = std::sin(pos * inv[j]);
      }
    }
  }
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      rotate<T>(x, cos_t, sin_t, dims_, traditional_, per_batch, out);
    } else {
      throw std::invalid_argument("[RoPE] unsupported dtype " +
                                  dtype_name(x.dtype()) + ".");
    }
  });
}

} // namespace kiln::fast
