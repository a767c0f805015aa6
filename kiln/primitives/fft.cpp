#include "kiln/primitives/fft.h"

#include <cmath>

namespace kiln {

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[0].shape();
  if (real_ && !axes_.empty()) {
    int last = axes_.back();
    s[last] = inverse_ ? n_last_ : s[last] / 2 + 1;
  }
  return {s};
}

bool FFT::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FFT*>(&other);
  return o && o->axes_ == axes_ && o->inverse_ == inverse_ &&
         o->real_ == real_ && o->norm_ == norm_ && o->n_last_ == n_last_;
}

void FFT::print(std::ostream& os) const {
  os << (real_ ? (inverse_ ? "IRFFT" : "RFFT") : (inverse_ ? "IFFT" : "FFT"))
     << "(axes";
  for (int a : axes_) os << ' ' << a;
  os << ')';
}

Dtype FFT::out_dtype() const {
  return real_ && inverse_ ? float32 : complex64;
}

double FFT::scale(const array& in) const {
  double points = 1;
  for (size_t i = 0; i < axes_.size(); ++i) {
    bool last = i + 1 == axes_.size();
    points *= real_ && inverse_ && last ? n_last_ : in.shape(axes_[i]);
  }
  switch (norm_) {
    case FFTNorm::ortho: return 1 / std::sqrt(points);
    case FFTNorm::backward: return inverse_ ? 1 / points : 1.0;
    case FFTNorm::forward: return inverse_ ? 1.0 : 1 / points;
  }
  return 1.0;
}

} // namespace kiln
