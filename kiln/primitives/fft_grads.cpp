// Transformation rules of the FFT primitive. Every transform is linear, so
// jvp applies it to the tangent and vjp applies its adjoint, in MLX's
// convention for complex values (the gradient of a real function of z is
// d/dx + i d/dy, so a complex-linear map A sends the cotangent back through
// its conjugate transpose A^H).
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fft.h"
#include "kiln/ops/slicing.h"
#include "kiln/primitives/fft.h"

namespace kiln {

namespace {

// The norm whose scale in the other direction equals this one's: the
// adjoint of the unscaled forward DFT is the unscaled inverse one.
FFTNorm adjoint_norm(FFTNorm n) {
  switch (n) {
    case FFTNorm::backward: return FFTNorm::forward;
    case FFTNorm::forward: return FFTNorm::backward;
    default: return n;
  }
}

} // namespace

std::vector<array> FFT::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>&,
                            const std::vector<array>&) {
  const array& x = primals[0];
  StreamOrDevice s = stream();
  FFTNorm adj = adjoint_norm(norm_);
  array c = cotangents[0];
  if (!real_) {
    // (sigma F)^H = sigma F^-1 unscaled: the other direction, same scale.
    return {detail::fft_node(astype(c, complex64, s), axes_, !inverse_, false,
                             adj, 0, s)};
  }
  int last = axes_.back();
  if (!inverse_) {
    // rfft keeps frequencies 0 .. n / 2 of the complex transform of a real
    // x: its adjoint pads the cotangent back to n with zeros, applies the
    // unscaled inverse and keeps the real part (x is real).
    int n = x.shape(last);
    int have = c.shape(last);
    c = pad(astype(c, complex64, s), std::vector<int>{last}, Shape{0},
            Shape{n - have}, array(0), "constant", s);
    return {kiln::real(
        detail::fft_node(c, axes_, true, false, adj, 0, s), s)};
  }
  // irfft reads each frequency k of 1 .. (n - 1) / 2 twice (as itself and as
  // its conjugate at n - k), frequency 0 and, for even n, n / 2 once and
  // only their real parts: its adjoint is the forward real transform of the
  // cotangent with those frequencies counted twice.
  array g = detail::fft_node(astype(c, float32, s), axes_, false, true, adj,
                             0, s);
  int m = g.shape(last);
  int twice_end = n_last_ % 2 == 0 ? m - 1 : m; // [1, twice_end) doubled
  Shape ones_shape(g.ndim(), 1);
  ones_shape[last] = m;
  std::vector<float> w(m, 1.0f);
  for (int k = 1; k < twice_end; ++k) w[k] = 2.0f;
  return {multiply(g, array(w, ones_shape, float32), s)};
}

std::vector<array> FFT::jvp(const std::vector<array>& primals,
                            const std::vector<array>& tangents,
                            const std::vector<int>&) {
  Dtype in = real_ && !inverse_ ? float32 : complex64;
  array t = real_ && !inverse_ && is_complex(tangents[0].dtype())
                ? kiln::real(tangents[0], stream())
                : astype(tangents[0], in, stream());
  return {detail::fft_node(t, axes_, inverse_, real_, norm_, n_last_,
                           stream())};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int b = axes[0];
  std::vector<int> shifted;
  for (int a : axes_) shifted.push_back(b >= 0 && a >= b ? a + 1 : a);
  return {{detail::fft_node(inputs[0], shifted, inverse_, real_, norm_,
                            n_last_, stream())},
          {b}};
}

} // namespace kiln
