// LayerNorm and RMSNorm over the last axis and their fused backwards, one
// row at a time. Row statistics accumulate in double; each element of the
// forward is computed in float (or double for float64) and rounded once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/copy.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

// A weight or bias: 1-d over the last axis, or a 0-d stand-in (stride 0).
int64_t param_stride(const array& p) {
  return p.ndim() == 0 ? 0 : p.strides()[0];
}

template <typename T>
void normalize(const array& x, const array& w, const array* b, array& out,
               float eps, bool rms) {
  using C = compute_t<T>;
  int64_t n = x.shape(-1);
  size_t rows = n == 0 ? 0 : x.size() / n;
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pb = b ? b->data<T>() : nullptr;
  int64_t sw = param_stride(w), sb = b ? param_stride(*b) : 0;
  T* po = out.data<T>();
  size_t grain = std::max<size_t>(1, (1 << 14) / std::max<int64_t>(n, 1));
  kiln::detail::parallel_for(rows, grain, [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const T* xr = px + r * n;
      T* orow = po + r * n;
      double mean = 0, ss = 0;
      if (!rms) {
        for (int64_t j = 0; j < n; ++j) mean += static_cast<double>(xr[j]);
        mean /= n;
      }
      for (int64_t j = 0; j < n; ++j) {
        double d = static_cast<double>(xr[j]) - mean;
        ss += d * d;
      }
      C inv =
          static_cast<C>(1.0 / std::sqrt(ss / n + static_cast<double>(eps)));
      C mu = static_cast<C>(mean);
      for (int64_t j = 0; j < n; ++j) {
        C y = (static_cast<C>(xr[j]) - mu) * inv * static_cast<C>(pw[j * sw]);
        if (pb) y += static_cast<C>(pb[j * sb]);
        orow[j] = T(y);
      }
    }
  });
}

// The fused backward (NormVjp): the statistics as the forward computes them
// (rounded to the compute type), the row sums and each element in double,
// rounded once. dweight sums g * xhat over rows column by column, from the
// rows' stored statistics, so its order does not depend on the threads.
template <typename T>
void normalize_vjp(const array& x, const array& w, const array& g, array& dx,
                   array& dw, float eps, bool rms) {
  using C = compute_t<T>;
  int64_t n = x.shape(-1);
  size_t rows = n == 0 ? 0 : x.size() / n;
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pg = g.data<T>();
  int64_t sw = param_stride(w);
  T* pdx = dx.data<T>();
  std::vector<double> row_mean(rows), row_rstd(rows);
  size_t grain = std::max<size_t>(1, (1 << 14) / std::max<int64_t>(n, 1));
  kiln::detail::parallel_for(rows, grain, [&](size_t lo, size_t hi) {
    for (size_t r = lo; r < hi; ++r) {
      const T* xr = px + r * n;
      const T* gr = pg + r * n;
      double mean = 0, ss = 0;
      if (!rms) {
        for (int64_t j = 0; j < n; ++j) mean += static_cast<double>(xr[j]);
        mean /= n;
      }
      for (int64_t j = 0; j < n; ++j) {
        double d = static_cast<double>(xr[j]) - mean;
        ss += d * d;
      }
      double rstd = static_cast<C>(
          1.0 / std::sqrt(ss / n + static_cast<double>(eps)));
      double mu = static_cast<C>(mean);
      auto gw_at = [&](int64_t j) {
        return static_cast<double>(gr[j]) * static_cast<double>(pw[j * sw]);
      };
      double sum_gw = 0, sum_gw_xhat = 0;
      for (int64_t j = 0; j < n; ++j) {
        double gw = gw_at(j);
        double xhat = (static_cast<double>(xr[j]) - mu) * rstd;
        sum_gw += gw;
        sum_gw_xhat += gw * xhat;
      }
      double mean_gw = rms ? 0.0 : sum_gw / n, mean_gw_xhat = sum_gw_xhat / n;
      for (int64_t j = 0; j < n; ++j) {
        double gw = gw_at(j);
        double xhat = (static_cast<double>(xr[j]) - mu) * rstd;
        pdx[r * n + j] = T(static_cast<C>(
            rstd * (gw - mean_gw - xhat * mean_gw_xhat)));
      }
      row_mean[r] = mu;
      row_rstd[r] = rstd;
    }
  });
  std::vector<double> col(n, 0.0);
  size_t col_grain = std::max<size_t>(1, (1 << 14) / std::max<size_t>(rows, 1));
  kiln::detail::parallel_for(n, col_grain, [&](size_t lo, size_t hi) {
    for (size_t j = lo; j < hi; ++j) {
      double acc = 0;
      for (size_t r = 0; r < rows; ++r) {
        double xhat = (static_cast<double>(px[r * n + j]) - row_mean[r]) *
                      row_rstd[r];
        acc += static_cast<double>(pg[r * n + j]) * xhat;
      }
      col[j] = acc;
    }
  });
  T* pdw = dw.data<T>();
  if (w.ndim() == 0) {
    double total = 0;
    for (double c : col) total += c;
    pdw[0] = T(static_cast<C>(total));
  } else {
    for (int64_t j = 0; j < n; ++j) pdw[j] = T(static_cast<C>(col[j]));
  }
}

void run(const char* name, const std::vector<array>& inputs, array& out,
         float eps, bool rms) {
  auto x = kiln::detail::row_major(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      normalize<T>(x, inputs[1], rms ? nullptr : &inputs[2], out, eps, rms);
    } else {
      throw std::invalid_argument(std::string("[") + name +
                                  "] unsupported dtype " +
                                  dtype_name(x.dtype()) + ".");
    }
  });
}

} // namespace

// inputs: x, weight, the cotangent g; outputs: dx, dweight.
void NormVjp::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  auto x = kiln::detail::row_major(inputs[0]);
  auto g = kiln::detail::row_major(inputs[2]);
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  dispatch_type(x.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      normalize_vjp<T>(x, inputs[1], g, outputs[0], outputs[1], eps_, rms());
    } else {
      throw std::invalid_argument(std::string("[") + name() +
                                  "] unsupported dtype " +
                                  dtype_name(x.dtype()) + ".");
    }
  });
}

void LayerNorm::eval_cpu(const std::vector<array>& inputs,
                         std::vector<array>& outputs) {
  run(name(), inputs, outputs[0], eps_, false);
}

void RMSNorm::eval_cpu(const std::vector<array>& inputs,
                       std::vector<array>& outputs) {
  run(name(), inputs, outputs[0], eps_, true);
}

} // namespace kiln::fast
