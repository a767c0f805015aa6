#include "kiln/backend/cpu/copy.h"

#include <cstring>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/tiles.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/cast.h"
#include "kiln/core/thread_pool.h"

namespace kiln::detail {

namespace {

constexpr size_t copy_grain = 1 << 16;
// A 2-d transposing copy walks tiles so that both the reads and the writes
// stay within a few cache lines.
template <typename In, typename Out>
bool try_tiled_copy(const Shape& shape, const std::array<Strides, 2>& st,
                    const In* src, Out* dst) {
  if (shape.size() != 2 || st[1][1] != 1 || st[0][0] != 1) return false;
  int64_t rows = shape[0], cols = shape[1];
  if (rows < tile_side || cols < tile_side) return false;
  int64_t s_col = st[0][1], d_row = st[1][0];
  for_each_tile(rows, cols, [&](int64_t r0, int64_t r1, int64_t c0,
                                int64_t c1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = c0; c < c1; ++c) {
        dst[r * d_row + c] = cast_to<Out>(src[r + c * s_col]);
      }
    }
  });
  return true;
}

template <typename In, typename Out>
void copy_strided(const array& src, Out* dst, const Strides& dst_strides) {
  const In* s = src.data<In>();
  std::array<Strides, 2> st{src.strides(), dst_strides};
  Shape shape = collapse_dims(src.shape(), st);
  if (try_tiled_copy(shape, st, s, dst)) return;
  size_t grain = std::max<size_t>(1, copy_grain / shape.back());
  parallel_for(num_rows(shape), grain, [&](size_t b, size_t e) {
    for_each_row(shape, st, b, e, [&](const auto& off, int64_t n) {
      const In* x = s + off[0];
      Out* y = dst + off[1];
      int64_t sx = st[0].back(), sy = st[1].back();
      if constexpr (std::is_same_v<In, Out>) {
        if (sx == 1 && sy == 1) {
          std::memcpy(y, x, n * sizeof(In));
          return;
        }
      }
      for (int64_t j = 0; j < n; ++j) y[j * sy] = cast_to<Out>(x[j * sx]);
    });
  });
}

template <typename F>
void dispatch_pair(Dtype in, Dtype out, F&& f) {
  dispatch_type(in, [&](auto in_tag) {
    dispatch_type(out, [&](auto out_tag) { f(in_tag, out_tag); });
  });
}

} // namespace

void copy_row_major(const array& in, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  copy_into(in, out, out.strides(), 0);
}

array row_major(const array& a, Dtype dt) {
  if (a.dtype() == dt && a.flags().row_contiguous) return a;
  auto tmp = array::uninitialized(a.shape(), dt);
  copy_row_major(a, tmp);
  return tmp;
}

void copy_into(const array& src, array& dst, const Strides& dst_strides,
               int64_t dst_offset) {
  if (src.size() == 0) return;
  dispatch_pair(src.dtype(), dst.dtype(), [&](auto in_tag, auto out_tag) {
    using In = KILN_TYPE(in_tag);
    using Out = KILN_TYPE(out_tag);
    copy_strided<In>(src, dst.data<Out>() + dst_offset, dst_strides);
  });
}

} // namespace kiln::detail
