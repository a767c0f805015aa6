#include "kiln/ops/softmax.h"

#include <numeric>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/softmax.h"

namespace kiln {

array softmax(const array& a, const std::vector<int>& axes, bool precise,
              StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  auto ax = detail::normalize_axes(axes, nd, "softmax");
  auto stream = to_stream(s);
  Dtype dt = detail::at_least_float(a.dtype());
  auto x = astype(a, dt, stream);
  // complex64 composes too: its max orders by real part, then imaginary
  // part, as MLX's.
  if (ax.size() == 1 && !is_complex(dt)) {
    // The kernel works on the last axis; another axis moves there and back
    // as views.
    bool last = ax[0] == nd - 1;
    if (!last) x = moveaxis(x, ax[0], -1, stream);
    auto out =
        array(x.shape(), dt, std::make_shared<Softmax>(stream, precise), {x});
    return last ? out : moveaxis(out, -1, ax[0], stream);
  }
  // Several axes (or none, for a 0-d array), or complex values: compose
  // from reductions.
  Dtype acc = precise && (dt == float16 || dt == bfloat16) ? float32 : dt;
  auto xa = astype(x, acc, stream);
  auto m = stop_gradient(max(xa, ax, true, stream), stream);
  auto e = exp(subtract(xa, m, stream), stream);
  return astype(divide(e, sum(e, ax, true, stream), stream), dt, stream);
}

array softmax(const array& a, bool precise, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return softmax(a, axes, precise, s);
}

} // namespace kiln
