// Fast Fourier transforms, as mlx.core.fft: complex transforms (fft, ifft
// and their 2-d and n-d forms), real ones (rfft, irfft, ...), the
// frequency helpers and the shifts. Every transform returns complex64 (real
// inverses float32): other inputs are cast, as MLX does (no complex128).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"
#include "kiln/primitives/fft.h"

namespace kiln::fft {

/** "backward", "ortho" or "forward"; throws naming op otherwise. */
FFTNorm norm_from_string(const std::string& norm, const char* op = "fft");

/** The n-d transforms over `axes` (default: every axis; `s` needs `axes`).
 *  Each transformed axis is cut or padded with zeros to its size in `s`
 *  (default: the input's size; for irfftn's last axis 2 * (m - 1), and the
 *  input's last axis is fitted to s / 2 + 1 there). */
array fftn(const array& a, const std::optional<Shape>& s = std::nullopt,
           const std::optional<std::vector<int>>& axes = std::nullopt,
           FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array ifftn(const array& a, const std::optional<Shape>& s = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::nullopt,
            FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
/** Real input (a complex input's real part is used); the last of `axes`
 *  keeps n / 2 + 1 frequencies. */
array rfftn(const array& a, const std::optional<Shape>& s = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::nullopt,
            FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
/** Inverse of rfftn: float32 output. */
array irfftn(const array& a, const std::optional<Shape>& s = std::nullopt,
             const std::optional<std::vector<int>>& axes = std::nullopt,
             FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});

/** One axis (default the last); n cuts or pads it. */
array fft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
          FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array ifft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
           FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array rfft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
           FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array irfft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
            FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});

/** Two axes (default the last two). */
array fft2(const array& a, const std::optional<Shape>& s = std::nullopt,
           const std::vector<int>& axes = {-2, -1},
           FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array ifft2(const array& a, const std::optional<Shape>& s = std::nullopt,
            const std::vector<int>& axes = {-2, -1},
            FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array rfft2(const array& a, const std::optional<Shape>& s = std::nullopt,
            const std::vector<int>& axes = {-2, -1},
            FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});
array irfft2(const array& a, const std::optional<Shape>& s = std::nullopt,
             const std::vector<int>& axes = {-2, -1},
             FFTNorm norm = FFTNorm::backward, StreamOrDevice st = {});

/** The sample frequencies of an n-point transform with spacing d:
 *  [0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d n), float32; and
 *  the n / 2 + 1 non-negative ones of rfft. */
array fftfreq(int n, double d = 1.0, StreamOrDevice st = {});
array rfftfreq(int n, double d = 1.0, StreamOrDevice st = {});

/** Rolls the zero frequency to the middle along `axes` (default all), and
 *  back. */
array fftshift(const array& a,
               const std::optional<std::vector<int>>& axes = std::nullopt,
               StreamOrDevice st = {});
array ifftshift(const array& a,
                const std::optional<std::vector<int>>& axes = std::nullopt,
                StreamOrDevice st = {});

} // namespace kiln::fft

namespace kiln::detail {

/** The FFT primitive applied to x as given (no padding or casting), with
 *  irfft's output length n_last. */
array fft_node(const array& x, const std::vector<int>& axes, bool inverse,
               bool real, FFTNorm norm, int n_last, StreamOrDevice st);

} // namespace kiln::detail
