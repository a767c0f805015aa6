// eval_cpu of the sorts. Each line along the axis is copied into scratch
// (so strided inputs sort as fast as contiguous ones), sorted with a
// NaN-last ordering, and written to a row-major output. Values sort by
// their keys where key_sorts.h has a method for the dtype (counting, the
// AVX-512 sort), else by radix or comparison; independent lines are split
// across cores.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/key_sorts.h"
#include "kiln/backend/cpu/radix_sort.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/sort.h"

namespace kiln {

namespace {

constexpr size_t sort_grain = 1 << 14;

// A strict weak order in which NaN follows every number.
struct NanLast {
  template <typename T>
  bool operator()(T a, T b) const {
    using C = compute_t<T>;
    C x = static_cast<C>(a), y = static_cast<C>(b);
    if constexpr (std::is_floating_point_v<C>) {
      return x < y || (std::isnan(y) && !std::isnan(x));
    } else {
      return x < y;
    }
  }
};

// bool sorts as bytes (std::vector<bool> has no addressable elements).
template <typename T>
using storage_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// Calls line(src, dst, n, src_stride, dst_stride) for each line along axis,
// with one line functor (and so one scratch buffer) per chunk of lines.
template <typename T, typename O, typename MakeLine>
void for_each_line(const array& in, array& out, int axis,
                   MakeLine&& make_line) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  int nd = static_cast<int>(in.ndim());
  int64_t n = in.shape(axis);
  size_t lines = in.size() / n;
  const T* src = in.data<T>();
  O* dst = out.data<O>();
  detail::parallel_for(
      lines, std::max<size_t>(1, sort_grain / n), [&](size_t b, size_t e) {
        auto line = make_line();
        for (size_t l = b; l < e; ++l) {
          int64_t ioff = 0, ooff = 0;
          size_t r = l;
          for (int d = nd - 1; d >= 0; --d) {
            if (d == axis) continue;
            int64_t i = static_cast<int64_t>(r % in.shape()[d]);
            r /= in.shape()[d];
            ioff += i * in.strides()[d];
            ooff += i * out.strides()[d];
          }
          line(src + ioff, dst + ooff, n, in.strides()[axis],
               out.strides()[axis]);
        }
      });
}

// Sorts (or partitions at kth, when kth >= 0) the values of each line.
template <typename T>
void sort_values(const array& in, array& out, int axis, int kth) {
  for_each_line<T, T>(in, out, axis, [kth] {
    return [kth, v = detail::scratch_vector<storage_t<T>>(),
            s = detail::RadixScratch<detail::radix_key_t<T>>(),
            keys = detail::scratch_vector<detail::sort_key_t<T>>(),
            tmp = detail::scratch_vector<detail::sort_key_t<T>>()](
               const T* x, T* y, int64_t n, int64_t xs, int64_t ys) mutable {
      // Partitions keep nth_element: its order within each side is MLX's.
      if (kth < 0 && detail::sort_line_by_keys(x, y, n, xs, ys, keys, tmp)) {
        return;
      }
      v.resize(n);
      for (int64_t j = 0; j < n; ++j) v[j] = x[j * xs];
      if (kth < 0 && n >= detail::radix_min_length) {
        detail::radix_sort_values<T>(v.data(), n, s);
      } else if (kth >= 0) {
        std::nth_element(v.begin(), v.begin() + kth, v.end(), NanLast{});
      } else {
        std::sort(v.begin(), v.end(), NanLast{});
      }
      for (int64_t j = 0; j < n; ++j) y[j * ys] = static_cast<T>(v[j]);
    };
  });
}

// Positions that sort (stably) or partition each line.
template <typename T>
void sort_indices(const array& in, array& out, int axis, int kth) {
  for_each_line<T, uint32_t>(in, out, axis, [kth] {
    return [kth, v = detail::scratch_vector<storage_t<T>>(),
            idx = detail::scratch_vector<uint32_t>(),
            s = detail::RadixScratch<detail::radix_key_t<T>>()](
               const T* x, uint32_t* y, int64_t n, int64_t xs,
               int64_t ys) mutable {
      v.resize(n);
      idx.resize(n);
      for (int64_t j = 0; j < n; ++j) v[j] = x[j * xs];
      if (kth < 0 && n >= detail::radix_min_length) {
        detail::radix_argsort<T>(v.data(), idx, n, s);
        for (int64_t j = 0; j < n; ++j) y[j * ys] = idx[j];
        return;
      }
      std::iota(idx.begin(), idx.end(), 0u);
      auto less = [&](uint32_t a, uint32_t b) { return NanLast{}(v[a], v[b]); };
      if (kth >= 0) {
        std::nth_element(idx.begin(), idx.begin() + kth, idx.end(), less);
      } else {
        std::stable_sort(idx.begin(), idx.end(), less);
      }
      for (int64_t j = 0; j < n; ++j) y[j * ys] = idx[j];
    };
  });
}

template <typename T>
void search_sorted(const array& seq, const array& values, array& out,
                   bool right) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const T* s = seq.data<T>();
  int64_t n = seq.shape(0), ss = seq.ndim() ? seq.strides()[0] : 0;
  const T* v = values.data<T>();
  uint32_t* dst = out.data<uint32_t>();
  std::array<Strides, 2> st{values.strides(), out.strides()};
  Shape shape = detail::collapse_dims(values.shape(), st);
  NanLast less;
  // Binary search for the first element not before the value.
  auto position = [&](T x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      T e = s[mid * ss];
      bool before = right ? !less(x, e) : less(e, x);
      if (before) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return static_cast<uint32_t>(lo);
  };
  size_t rows = detail::num_rows(shape);
  size_t grain = std::max<size_t>(1, sort_grain / (shape.back() + 1));
  detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
    detail::for_each_row(shape, st, b, e, [&](const auto& off, int64_t m) {
      for (int64_t j = 0; j < m; ++j) {
        dst[off[1] + j * st[1].back()] = position(v[off[0] + j * st[0].back()]);
      }
    });
  });
}

} // namespace

void SearchSorted::eval_cpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  dispatch_real_type(inputs[0].dtype(), "searchsorted", [&](auto tag) {
    search_sorted<KILN_TYPE(tag)>(inputs[0], inputs[1], outputs[0], right_);
  });
}

void Sort::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_real_type(out.dtype(), "sort", [&](auto tag) {
    sort_values<KILN_TYPE(tag)>(inputs[0], out, axis_, -1);
  });
}

void Partition::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_real_type(out.dtype(), "partition", [&](auto tag) {
    sort_values<KILN_TYPE(tag)>(inputs[0], out, axis_,
                                kth_of(inputs[0].shape(axis_)));
  });
}

void ArgSort::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_real_type(inputs[0].dtype(), "argsort", [&](auto tag) {
    sort_indices<KILN_TYPE(tag)>(inputs[0], out, axis_, -1);
  });
}

void ArgPartition::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_real_type(inputs[0].dtype(), "argpartition", [&](auto tag) {
    sort_indices<KILN_TYPE(tag)>(inputs[0], out, axis_,
                                 kth_of(inputs[0].shape(axis_)));
  });
}

} // namespace kiln
