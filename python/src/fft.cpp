// kiln.core.fft (stft and istft are added in Python: kiln/_fft.py).
#include "kiln/ops/fft.h"

#include "kiln_py.h"

namespace kiln::py {

namespace {

using SizesArg = std::optional<std::vector<int>>;
using Axes = std::optional<std::vector<int>>;

std::optional<Shape> sizes_of(const SizesArg& s) {
  if (!s) return std::nullopt;
  return Shape(s->begin(), s->end());
}

// An int or a list of them, as a list.
Axes axis_list(const AxisArg& axes) {
  if (!axes) return std::nullopt;
  if (auto* one = std::get_if<int>(&*axes)) return std::vector<int>{*one};
  return std::get<std::vector<int>>(*axes);
}

using OneAxisFn = array (*)(const array&, std::optional<int>, int, FFTNorm,
                            StreamOrDevice);
using ManyAxesFn = array (*)(const array&, const std::optional<Shape>&,
                             const std::optional<std::vector<int>>&, FFTNorm,
                             StreamOrDevice);

} // namespace

void init_fft(nb::module_& parent) {
  nb::module_ m =
      parent.def_submodule("fft", "Fast Fourier transforms (as mlx.core.fft).");
  struct OneAxis {
    const char* name;
    OneAxisFn fn;
    const char* doc;
  };
  for (const OneAxis& f :
       {OneAxis{"fft", fft::fft, "One-dimensional discrete Fourier transform."},
        OneAxis{"ifft", fft::ifft, "One-dimensional inverse discrete Fourier transform."},
        OneAxis{"rfft", fft::rfft, "One-dimensional transform of a real input: the n // 2 + 1 non-negative frequencies."},
        OneAxis{"irfft", fft::irfft, "Inverse of rfft: a real output of n (default 2 * (m - 1)) points."}}) {
    OneAxisFn fn = f.fn;
    std::string name = f.name;
    m.def(
        f.name,
        [fn, name](ArrayLike a, std::optional<int> n, int axis,
                   const std::string& norm, const StreamArg& s) {
          return fn(to_array(a), n, axis,
                    fft::norm_from_string(norm, name.c_str()), to_sod(s));
        },
        "a"_a, "n"_a = nb::none(), "axis"_a = -1, "norm"_a = "backward",
        "stream"_a = nb::none(), f.doc);
  }
  struct ManyAxes {
    const char* name;
    ManyAxesFn fn;
    bool two;
    const char* doc;
  };
  for (const ManyAxes& f :
       {ManyAxes{"fft2", fft::fftn, true, "Two-dimensional discrete Fourier transform."},
        ManyAxes{"ifft2", fft::ifftn, true, "Two-dimensional inverse discrete Fourier transform."},
        ManyAxes{"rfft2", fft::rfftn, true, "Two-dimensional transform of a real input."},
        ManyAxes{"irfft2", fft::irfftn, true, "Inverse of rfft2."},
        ManyAxes{"fftn", fft::fftn, false, "n-dimensional discrete Fourier transform (default: every axis)."},
        ManyAxes{"ifftn", fft::ifftn, false, "n-dimensional inverse discrete Fourier transform."},
        ManyAxes{"rfftn", fft::rfftn, false, "n-dimensional transform of a real input."},
        ManyAxes{"irfftn", fft::irfftn, false, "Inverse of rfftn."}}) {
    ManyAxesFn fn = f.fn;
    std::string name = f.name;
    auto call = [fn, name](ArrayLike a, const SizesArg& s, const Axes& axes,
                           const std::string& norm, const StreamArg& st) {
      if (s && !axes) {
        throw nb::value_error(("[" + name +
                               "] `axes` should not be `None` if `s` is not "
                               "`None`.")
                                  .c_str());
      }
      return fn(to_array(a), sizes_of(s), axes,
                fft::norm_from_string(norm, name.c_str()), to_sod(st));
    };
    if (f.two) {
      m.def(f.name, call, "a"_a, "s"_a = nb::none(),
            "axes"_a.none() = std::vector<int>{-2, -1}, "norm"_a = "backward",
            "stream"_a = nb::none(), f.doc);
    } else {
      m.def(f.name, call, "a"_a, "s"_a = nb::none(), "axes"_a = nb::none(),
            "norm"_a = "backward", "stream"_a = nb::none(), f.doc);
    }
  }
  m.def(
      "fftfreq",
      [](int n, double d, const StreamArg& s) {
        return fft::fftfreq(n, d, to_sod(s));
      },
      "n"_a, "d"_a = 1.0, "stream"_a = nb::none(),
      "Sample frequencies of an n-point transform with sample spacing d.");
  m.def(
      "rfftfreq",
      [](int n, double d, const StreamArg& s) {
        return fft::rfftfreq(n, d, to_sod(s));
      },
      "n"_a, "d"_a = 1.0, "stream"_a = nb::none(),
      "The n // 2 + 1 non-negative sample frequencies of rfft.");
  m.def(
      "fftshift",
      [](ArrayLike a, const AxisArg& axes, const StreamArg& s) {
        return fft::fftshift(to_array(a), axis_list(axes), to_sod(s));
      },
      "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none(),
      "Shift the zero frequency to the middle of the spectrum.");
  m.def(
      "ifftshift",
      [](ArrayLike a, const AxisArg& axes, const StreamArg& s) {
        return fft::ifftshift(to_array(a), axis_list(axes), to_sod(s));
      },
      "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none(),
      "Inverse of fftshift.");
}

} // namespace kiln::py
