// eval_cpu of gather and scatter. Index values are read once (any integer
// dtype) into element offsets; slices then move over collapsed rows. Moves
// without arithmetic copy raw elements, so they compile once per element
// size rather than once per dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/indices.h"
#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/indexing.h"

namespace kiln {

namespace {

constexpr size_t grain = 1 << 15;
constexpr int64_t dropped = std::numeric_limits<int64_t>::min();

template <typename F>
void dispatch_bytes(size_t size, F&& f) {
  switch (size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    default: return f(TypeTag<uint64_t>{});
  }
}

struct Assign {
  template <typename T>
  T operator()(T, T u) const {
    return u;
  }
};
struct SumOp {
  template <typename T>
  T operator()(T a, T b) const {
    using C = compute_t<T>;
    return cast_to<T>(static_cast<C>(a) + static_cast<C>(b));
  }
};
struct ProdOp {
  template <typename T>
  T operator()(T a, T b) const {
    using C = compute_t<T>;
    return cast_to<T>(static_cast<C>(a) * static_cast<C>(b));
  }
};
// NaN wins either way, as NumPy's maximum and minimum.
template <bool is_max>
struct ExtremeOp {
  template <typename T>
  T operator()(T a, T b) const {
    using C = compute_t<T>;
    C x = static_cast<C>(a), y = static_cast<C>(b);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return a;
      if (std::isnan(y)) return b;
    }
    return (is_max ? y > x : y < x) ? b : a;
  }
};

// Calls f(tag, op) with the element type (raw bytes for None) and functor.
template <typename F>
void dispatch_reduce(ScatterReduce r, Dtype dt, const char* name, F&& f) {
  if (r == ScatterReduce::None) {
    dispatch_bytes(dt.size, [&](auto tag) { f(tag, Assign{}); });
  } else if (r == ScatterReduce::Sum || r == ScatterReduce::Prod) {
    dispatch_type(dt, [&](auto tag) {
      if (r == ScatterReduce::Sum) {
        f(tag, SumOp{});
      } else {
        f(tag, ProdOp{});
      }
    });
  } else {
    dispatch_real_type(dt, name, [&](auto tag) {
      if (r == ScatterReduce::Max) {
        f(tag, ExtremeOp<true>{});
      } else {
        f(tag, ExtremeOp<false>{});
      }
    });
  }
}

// Offsets of the elements of shape under strides, in row-major order.
std::vector<int64_t> element_offsets(const Shape& shape, const Strides& s) {
  std::vector<int64_t> out;
  out.reserve(shape_size(shape));
  if (shape_size(shape) == 0) return out;
  std::array<Strides, 1> st{s};
  Shape cs = detail::collapse_dims(shape, st);
  detail::for_each_row(cs, st, 0, detail::num_rows(cs),
                       [&](const auto& off, int64_t n) {
                         for (int64_t j = 0; j < n; ++j) {
                           out.push_back(off[0] + j * st[0].back());
                         }
                       });
  return out;
}

// Element offset of each index position's slice start. Negative values wrap
// once; a gather clamps the start so the slice fits, a scatter marks
// starts whose slice would not fit as dropped.
std::vector<int64_t> slice_starts(const std::vector<array>& inputs,
                                  size_t num_idx, const std::vector<int>& axes,
                                  const array& a, const Shape& slice,
                                  bool clamp) {
  size_t n = num_idx == 0 ? 1 : inputs[1].size();
  std::vector<int64_t> base(n, 0);
  for (size_t k = 0; k < num_idx; ++k) {
    auto vals = detail::index_values(inputs[k + 1]);
    int ax = axes[k];
    int64_t dim = a.shape(ax), hi = dim - slice[ax], stride = a.strides()[ax];
    for (size_t i = 0; i < n; ++i) {
      if (base[i] == dropped) continue;
      int64_t v = vals[i] < 0 ? vals[i] + dim : vals[i];
      if (clamp) {
        base[i] += std::clamp<int64_t>(v, 0, hi) * stride;
      } else if (v < 0 || v > hi) {
        base[i] = dropped;
      } else {
        base[i] += v * stride;
      }
    }
  }
  return base;
}

template <typename U>
void gather(const array& src, array& out, const std::vector<int64_t>& base,
            const Shape& slice) {
  std::array<Strides, 2> st{src.strides(), row_major_strides(slice)};
  Shape shape = detail::collapse_dims(slice, st);
  int64_t inner = shape.back(), sx = st[0].back();
  std::vector<int64_t> rows;
  detail::for_each_row(
      shape, st, 0, detail::num_rows(shape),
      [&](const auto& off, int64_t) { rows.push_back(off[0]); });
  const U* s = src.data<U>();
  U* d = out.data<U>();
  size_t nrows = rows.size();
  if (nrows == 1 && inner == 1) {
    detail::parallel_for(base.size(), grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) d[i] = s[base[i] + rows[0]];
    });
    return;
  }
  // Output row t is row t % nrows of index position t / nrows.
  size_t g = std::max<size_t>(1, grain / inner);
  detail::parallel_for(base.size() * nrows, g, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const U* x = s + base[t / nrows] + rows[t % nrows];
      U* y = d + t * inner;
      if (sx == 1) {
        std::memcpy(y, x, inner * sizeof(U));
      } else {
        for (int64_t j = 0; j < inner; ++j) y[j] = x[j * sx];
      }
    }
  });
}

template <typename T, typename Op>
void scatter(const array& upd, array& out, const std::vector<int64_t>& base,
             const Shape& slice, Op op) {
  size_t idx_nd = upd.ndim() - out.ndim();
  const Strides& us = upd.strides();
  std::array<Strides, 2> st{out.strides(),
                            Strides(us.begin() + idx_nd, us.end())};
  Shape shape = detail::collapse_dims(slice, st);
  int64_t inner = shape.back(), so = st[0].back(), su = st[1].back();
  std::vector<std::array<int64_t, 2>> rows;
  detail::for_each_row(shape, st, 0, detail::num_rows(shape),
                       [&](const auto& off, int64_t) { rows.push_back(off); });
  auto ubase =
      element_offsets(Shape(upd.shape().begin(), upd.shape().begin() + idx_nd),
                      Strides(us.begin(), us.begin() + idx_nd));
  T* d = out.data<T>();
  const T* u = upd.data<T>();
  // Index positions run in order (later updates see earlier ones); a large
  // slice is split across cores instead.
  bool split = rows.size() > 1 && rows.size() * inner >= 2 * grain;
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] == dropped) continue;
    auto body = [&](size_t rb, size_t re) {
      for (size_t r = rb; r < re; ++r) {
        T* y = d + base[i] + rows[r][0];
        const T* x = u + ubase[i] + rows[r][1];
        for (int64_t j = 0; j < inner; ++j)
          y[j * so] = op(y[j * so], x[j * su]);
      }
    };
    if (split) {
      detail::parallel_for(rows.size(), std::max<size_t>(1, grain / inner),
                           body);
    } else {
      body(0, rows.size());
    }
  }
}

} // namespace

void Gather::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array& src = inputs[0];
  Shape sizes = slice_sizes(src.shape());
  auto base = slice_starts(inputs, inputs.size() - 1, axes_, src, sizes, true);
  dispatch_bytes(out.itemsize(), [&](auto tag) {
    gather<KILN_TYPE(tag)>(src, out, base, sizes);
  });
}

void Scatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& upd = inputs.back();
  detail::copy_or_donate(inputs[0], out);
  if (upd.size() == 0) return;
  Shape slice(upd.shape().end() - out.ndim(), upd.shape().end());
  auto base = slice_starts(inputs, inputs.size() - 2, axes_, out, slice, false);
  dispatch_reduce(reduce_, out.dtype(), name(), [&](auto tag, auto op) {
    scatter<KILN_TYPE(tag)>(upd, out, base, slice, op);
  });
}

void GatherAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array& src = inputs[0];
  auto vals = detail::index_values(inputs[1]);
  int64_t dim = src.shape(axis_), astride = src.strides()[axis_];
  std::array<Strides, 1> st{src.strides()};
  st[0][axis_] = 0;
  Shape shape = detail::collapse_dims(out.shape(), st);
  int64_t inner = shape.back(), sx = st[0].back();
  dispatch_bytes(out.itemsize(), [&](auto tag) {
    using U = KILN_TYPE(tag);
    const U* s = src.data<U>();
    U* d = out.data<U>();
    size_t g = std::max<size_t>(1, grain / inner);
    detail::parallel_for(detail::num_rows(shape), g, [&](size_t b, size_t e) {
      size_t pos = b * inner;
      detail::for_each_row(shape, st, b, e, [&](const auto& off, int64_t n) {
        for (int64_t j = 0; j < n; ++j, ++pos) {
          int64_t v = vals[pos] < 0 ? vals[pos] + dim : vals[pos];
          v = std::clamp<int64_t>(v, 0, dim - 1);
          d[pos] = s[off[0] + j * sx + v * astride];
        }
      });
    });
  });
}

void ScatterAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  detail::copy_or_donate(inputs[0], out);
  if (upd.size() == 0) return;
  auto vals = detail::index_values(idx);
  int64_t dim = out.shape(axis_), ostride = out.strides()[axis_];
  std::array<Strides, 2> st{out.strides(), upd.strides()};
  st[0][axis_] = 0;
  Shape shape = detail::collapse_dims(upd.shape(), st);
  int64_t so = st[0].back(), su = st[1].back();
  dispatch_reduce(reduce_, out.dtype(), name(), [&](auto tag, auto op) {
    using T = KILN_TYPE(tag);
    T* d = out.data<T>();
    const T* u = upd.data<T>();
    size_t pos = 0;
    detail::for_each_row(
        shape, st, 0, detail::num_rows(shape), [&](const auto& off, int64_t n) {
          for (int64_t j = 0; j < n; ++j, ++pos) {
            int64_t v = vals[pos] < 0 ? vals[pos] + dim : vals[pos];
            if (v < 0 || v >= dim) continue;
            T& y = d[off[0] + j * so + v * ostride];
            y = op(y, u[off[1] + j * su]);
          }
        });
  });
}

} // namespace kiln
