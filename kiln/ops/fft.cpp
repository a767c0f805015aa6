#include "kiln/ops/fft.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::invalid;
using detail::shape_str;

namespace detail {

array fft_node(const array& x, const std::vector<int>& axes, bool inverse,
               bool real, FFTNorm norm, int n_last, StreamOrDevice st) {
  auto p = placed<FFT>(to_stream(st), {x}, axes, inverse, real, norm,
                       n_last);
  Shape shape = p->output_shapes({x})[0];
  return array(shape, p->out_dtype(), p, {x});
}

} // namespace detail

namespace fft {

namespace {

std::string axes_str(const std::vector<int>& axes) {
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(axes[i]);
  }
  return s + ")";
}

// The shared path of the n-d transforms: checks, the input's dtype, fitting
// each transformed axis to its size, and the primitive.
array transform(const char* op, const array& a, const std::optional<Shape>& s,
                const std::optional<std::vector<int>>& axes_in, bool inverse,
                bool real, FFTNorm norm, StreamOrDevice st) {
  if (a.ndim() == 0) {
    invalid(op, "needs an array of at least one dimension; got a scalar (" +
                    dtype_name(a.dtype()) + ").");
  }
  if (s && !axes_in) {
    invalid(op, "`axes` should not be `None` if `s` is not `None` (s = " +
                    shape_str(*s) + ").");
  }
  int nd = static_cast<int>(a.ndim());
  std::vector<int> axes;
  if (axes_in) {
    for (int ax : *axes_in) {
      if (ax < -nd || ax >= nd) {
        invalid(op, "axis " + std::to_string(ax) +
                        " is out of range for an array of shape " +
                        shape_str(a.shape()) + ".");
      }
      axes.push_back(ax < 0 ? ax + nd : ax);
    }
  } else {
    for (int i = 0; i < nd; ++i) axes.push_back(i);
  }
  auto sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    invalid(op, "duplicated axis in " + axes_str(*axes_in) + ".");
  }
  if (s && s->size() != axes.size()) {
    invalid(op, "s " + shape_str(*s) + " and axes " + axes_str(*axes_in) +
                    " have different sizes.");
  }
  // The logical transform sizes.
  Shape n;
  for (size_t i = 0; i < axes.size(); ++i) {
    n.push_back(s ? (*s)[i] : a.shape(axes[i]));
  }
  if (!s && real && inverse && !axes.empty()) {
    n.back() = 2 * (a.shape(axes.back()) - 1);
  }
  for (int v : n) {
    if (v <= 0) {
      invalid(op, "invalid output size " + std::to_string(v) + " requested" +
                      " for an array of shape " + shape_str(a.shape()) +
                      (s ? "" : " (irfft of an axis of size 1 needs n)") +
                      ".");
    }
  }
  Dtype in_dtype = real && !inverse ? float32 : complex64;
  array x = real && !inverse && is_complex(a.dtype()) ? kiln::real(a, st)
                                                      : astype(a, in_dtype, st);
  if (axes.empty()) return x;
  // Fit each axis: cut or pad with zeros (irfft's last axis to n / 2 + 1).
  Shape start(nd, 0), stop = x.shape();
  std::vector<int> pad_axes;
  Shape pad_low, pad_high;
  for (size_t i = 0; i < axes.size(); ++i) {
    int want = real && inverse && i + 1 == axes.size() ? n[i] / 2 + 1 : n[i];
    int have = x.shape(axes[i]);
    if (want < have) stop[axes[i]] = want;
    if (want > have) {
      pad_axes.push_back(axes[i]);
      pad_low.push_back(0);
      pad_high.push_back(want - have);
    }
  }
  if (stop != x.shape()) x = slice(x, start, stop, st);
  if (!pad_axes.empty())
    x = pad(x, pad_axes, pad_low, pad_high, array(0), "constant", st);
  return detail::fft_node(x, axes, inverse, real, norm,
                          real && inverse ? n.back() : 0, st);
}

std::optional<Shape> one_size(std::optional<int> n) {
  if (!n) return std::nullopt;
  return Shape{*n};
}

array shift(const char* op, const array& a,
            const std::optional<std::vector<int>>& axes_in, bool inverse,
            StreamOrDevice st) {
  int nd = static_cast<int>(a.ndim());
  std::vector<int> axes;
  if (axes_in) {
    for (int ax : *axes_in) axes.push_back(detail::normalize_axis(ax, nd, op));
  } else {
    for (int i = 0; i < nd; ++i) axes.push_back(i);
  }
  if (axes.empty()) return a;
  Shape shifts;
  // fftshift rolls by n / 2, ifftshift by -(n / 2): they differ for odd n.
  for (int ax : axes) {
    int h = a.shape(ax) / 2;
    shifts.push_back(inverse ? -h : h);
  }
  return roll(a, shifts, axes, st);
}

} // namespace

FFTNorm norm_from_string(const std::string& norm, const char* op) {
  if (norm == "backward") return FFTNorm::backward;
  if (norm == "ortho") return FFTNorm::ortho;
  if (norm == "forward") return FFTNorm::forward;
  invalid(op, "Invalid norm '" + norm +
                  "'. Expected one of {'backward', 'ortho', 'forward'}.");
}

array fftn(const array& a, const std::optional<Shape>& s,
           const std::optional<std::vector<int>>& axes, FFTNorm norm,
           StreamOrDevice st) {
  return transform("fftn", a, s, axes, false, false, norm, st);
}
array ifftn(const array& a, const std::optional<Shape>& s,
            const std::optional<std::vector<int>>& axes, FFTNorm norm,
            StreamOrDevice st) {
  return transform("ifftn", a, s, axes, true, false, norm, st);
}
array rfftn(const array& a, const std::optional<Shape>& s,
            const std::optional<std::vector<int>>& axes, FFTNorm norm,
            StreamOrDevice st) {
  return transform("rfftn", a, s, axes, false, true, norm, st);
}
array irfftn(const array& a, const std::optional<Shape>& s,
             const std::optional<std::vector<int>>& axes, FFTNorm norm,
             StreamOrDevice st) {
  return transform("irfftn", a, s, axes, true, true, norm, st);
}

array fft(const array& a, std::optional<int> n, int axis, FFTNorm norm,
          StreamOrDevice st) {
  return transform("fft", a, one_size(n), std::vector<int>{axis}, false, false,
                   norm, st);
}
array ifft(const array& a, std::optional<int> n, int axis, FFTNorm norm,
           StreamOrDevice st) {
  return transform("ifft", a, one_size(n), std::vector<int>{axis}, true,
                   false, norm, st);
}
array rfft(const array& a, std::optional<int> n, int axis, FFTNorm norm,
           StreamOrDevice st) {
  return transform("rfft", a, one_size(n), std::vector<int>{axis}, false, true,
                   norm, st);
}
array irfft(const array& a, std::optional<int> n, int axis, FFTNorm norm,
            StreamOrDevice st) {
  return transform("irfft", a, one_size(n), std::vector<int>{axis}, true, true,
                   norm, st);
}

array fft2(const array& a, const std::optional<Shape>& s,
           const std::vector<int>& axes, FFTNorm norm, StreamOrDevice st) {
  return transform("fft2", a, s, axes, false, false, norm, st);
}
array ifft2(const array& a, const std::optional<Shape>& s,
            const std::vector<int>& axes, FFTNorm norm, StreamOrDevice st) {
  return transform("ifft2", a, s, axes, true, false, norm, st);
}
array rfft2(const array& a, const std::optional<Shape>& s,
            const std::vector<int>& axes, FFTNorm norm, StreamOrDevice st) {
  return transform("rfft2", a, s, axes, false, true, norm, st);
}
array irfft2(const array& a, const std::optional<Shape>& s,
             const std::vector<int>& axes, FFTNorm norm, StreamOrDevice st) {
  return transform("irfft2", a, s, axes, true, true, norm, st);
}

namespace {

void check_freq_args(const char* what, int n, double d) {
  if (n <= 0) {
    invalid(what, "n must be positive; got " + std::to_string(n) + ".");
  }
  // d = 0 would divide every frequency by zero.
  if (d == 0 || !std::isfinite(d)) {
    invalid(what, "the sample spacing d must be finite and nonzero; got " +
                      std::to_string(d) + ".");
  }
}

} // namespace

array fftfreq(int n, double d, StreamOrDevice st) {
  check_freq_args("fftfreq", n, d);
  // [0 .. ceil(n/2) - 1, -floor(n/2) .. -1]: arange rolled by its middle.
  array k = arange(0, n, 1, st);
  k = subtract(
      k,
      multiply(array(n),
               astype(greater_equal(k, array((n + 1) / 2)), int32, st), st),
      st);
  return divide(astype(k, float32, st), array(static_cast<float>(n * d)), st);
}

array rfftfreq(int n, double d, StreamOrDevice st) {
  check_freq_args("rfftfreq", n, d);
  return divide(arange(0.0, n / 2 + 1, 1.0, float32, st),
                array(static_cast<float>(n * d)), st);
}

array fftshift(const array& a, const std::optional<std::vector<int>>& axes,
               StreamOrDevice st) {
  return shift("fftshift", a, axes, false, st);
}
array ifftshift(const array& a, const std::optional<std::vector<int>>& axes,
                StreamOrDevice st) {
  return shift("ifftshift", a, axes, true, st);
}

} // namespace fft

} // namespace kiln
