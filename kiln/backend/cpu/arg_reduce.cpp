// ArgMax / ArgMin along one axis: the first extreme value wins, and a NaN
// counts as the extreme (as NumPy). Lines split across the thread pool;
// contiguous float32 lines take the SIMD search of extremes.h.
#include <algorithm>
#include <cmath>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/backend/cpu/extremes.h"
#include "kiln/primitives/reduction.h"

namespace kiln {

namespace {

/** Index of the first extreme (the first NaN, if any) of the n values at
 *  p, read with stride `stride`. */
template <typename T, bool is_max>
uint32_t arg_extreme(const T* p, int64_t n, int64_t stride) {
  using C = detail::ct<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {
      return is_max ? detail::argmax_run_f32(p, static_cast<size_t>(n))
                    : detail::argmin_run_f32(p, static_cast<size_t>(n));
    }
  }
  C best = static_cast<C>(p[0]);
  uint32_t best_i = 0;
  for (int64_t i = 1; i < n; ++i) {
    C v = static_cast<C>(p[i * stride]);
    bool better;
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(best)) break;
      better = std::isnan(v) || (is_max ? v > best : v < best);
    } else {
      better = is_max ? v > best : v < best;
    }
    if (better) {
      best = v;
      best_i = static_cast<uint32_t>(i);
    }
  }
  return best_i;
}

template <typename T, bool is_max>
void arg_reduce(const array& in, array& out, int axis) {
  out.set_data(allocator::malloc(out.nbytes()));
  uint32_t* dst = out.data<uint32_t>();
  const T* src = in.data<T>();
  int64_t n = in.shape(axis), stride = in.strides()[axis];
  // Walk the other dims in row-major order (matching out).
  Shape oshape = in.shape();
  oshape[axis] = 1;
  std::array<Strides, 1> st{in.strides()};
  st[0][axis] = 0;
  Shape shape = detail::collapse_dims(oshape, st);
  size_t rows = detail::num_rows(shape);
  int64_t inner = shape.back();
  size_t grain = std::max<size_t>(
      1, detail::elementwise_grain / static_cast<size_t>(std::max<int64_t>(
                                          1, n * inner)));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    size_t pos = b * static_cast<size_t>(inner);
    detail::for_each_row(shape, st, b, e, [&](const auto& off, int64_t m) {
      for (int64_t j = 0; j < m; ++j, ++pos) {
        dst[pos] = arg_extreme<T, is_max>(src + off[0] + j * st[0].back(), n,
                                          stride);
      }
    });
  });
}

} // namespace

void ArgReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  dispatch_real_type(in.dtype(), name(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if (type_ == ArgMax) {
      arg_reduce<T, true>(in, out, axis_);
    } else {
      arg_reduce<T, false>(in, out, axis_);
    }
  });
}

} // namespace kiln
