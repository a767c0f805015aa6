// Discrete Fourier transforms over a set of axes (kiln::fft's ops pad or
// truncate the input and pick the dtype; this primitive only transforms).
#pragma once

#include "kiln/core/primitive.h"

namespace kiln {

/** How a transform is scaled, as NumPy's and MLX's `norm`: "backward"
 *  leaves the forward transform unscaled and divides the inverse by the
 *  number of points N; "ortho" scales both by 1/sqrt(N); "forward" divides
 *  the forward one. */
enum class FFTNorm { backward, ortho, forward };

/** Input x, transformed along `axes` (each once, non-negative, any order):
 *  - complex (real = false): complex64 in and out, same shape;
 *  - real forward (rfft): float32 in; the last of `axes` keeps its n / 2 + 1
 *    non-negative frequencies, complex64 out;
 *  - real inverse (irfft): complex64 in, holding frequencies 0 .. n / 2 of
 *    a Hermitian spectrum along the last of `axes`; float32 out of length
 *    `n_last` there.
 *  Forward is exp(-2 pi i jk / n), inverse exp(+2 pi i jk / n), scaled per
 *  `norm` by the number of points (the transformed sizes' product, with
 *  `n_last` for irfft), computed from the shapes at evaluation. */
class FFT : public UnaryPrimitive {
 public:
  FFT(Stream s, std::vector<int> axes, bool inverse, bool real, FFTNorm norm,
      int n_last = 0)
      : UnaryPrimitive(s), axes_(std::move(axes)), inverse_(inverse),
        real_(real), norm_(norm), n_last_(n_last) {}
  const char* name() const override { return "FFT"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  KILN_GPU_EVAL_UNARY
  KILN_GPU_DECLINES
  KILN_DECLARE_GRADS
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  bool is_equivalent(const Primitive& other) const override;
  void print(std::ostream& os) const override;

  /** The factor the transform of input `in` is multiplied by. */
  double scale(const array& in) const;
  /** The output dtype: float32 for irfft, else complex64. */
  Dtype out_dtype() const;
  const std::vector<int>& axes() const { return axes_; }
  bool is_inverse() const { return inverse_; }
  bool is_real() const { return real_; }
  FFTNorm scaling() const { return norm_; }
  int n_last() const { return n_last_; }

 private:
  std::vector<int> axes_;
  bool inverse_;
  bool real_;
  FFTNorm norm_;
  int n_last_;
};

} // namespace kiln
