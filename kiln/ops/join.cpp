// Joining, repeating and padding (declared in slicing.h).
#include <algorithm>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/slicing.h"

namespace kiln {

using detail::describe;
using detail::invalid;
using detail::shape_str;

array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) invalid("concatenate", "no arrays to concatenate.");
  const array& first = arrays[0];
  int nd = static_cast<int>(first.ndim());
  axis = detail::normalize_axis(axis, nd, "concatenate");
  Shape shape = first.shape();
  int64_t total = 0;
  Dtype dtype = first.dtype();
  for (auto& a : arrays) {
    bool ok = static_cast<int>(a.ndim()) == nd;
    for (int i = 0; ok && i < nd; ++i) {
      ok = i == axis || a.shape(i) == first.shape(i);
    }
    if (!ok) {
      invalid("concatenate", "shapes " + shape_str(first.shape()) + " and " +
                                 shape_str(a.shape()) +
                                 " differ outside the axis " +
                                 std::to_string(axis) + ".");
    }
    total += a.shape(axis);
    dtype = promote_types(dtype, a.dtype());
  }
  shape[axis] = detail::checked_dim(total, "concatenate");
  if (arrays.size() == 1) return astype(first, dtype, s);
  auto p = std::make_shared<Concatenate>(to_stream(s), axis);
  return array(std::move(shape), dtype, std::move(p), std::move(arrays));
}

array concatenate(std::vector<array> arrays, StreamOrDevice s) {
  for (auto& a : arrays) a = flatten(a, 0, -1, s);
  return concatenate(std::move(arrays), 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) invalid("stack", "no arrays to stack.");
  for (auto& a : arrays) {
    if (a.shape() != arrays[0].shape()) {
      invalid("stack", "all arrays must have the same shape; got " +
                           shape_str(arrays[0].shape()) + " and " +
                           shape_str(a.shape()) + ".");
    }
  }
  axis = detail::normalize_axis(axis, static_cast<int>(arrays[0].ndim()) + 1,
                                "stack");
  std::vector<array> expanded;
  for (auto& a : arrays) expanded.push_back(expand_dims(a, axis, s));
  return concatenate(std::move(expanded), axis, s);
}

array stack(const std::vector<array>& arrays, StreamOrDevice s) {
  return stack(arrays, 0, s);
}

array repeat(const array& a, int repeats, int axis, StreamOrDevice s) {
  axis = detail::normalize_axis(axis, static_cast<int>(a.ndim()), "repeat");
  if (repeats < 0) {
    invalid("repeat", "repeats must be non-negative, got " +
                          std::to_string(repeats) + ".");
  }
  if (repeats == 1) return a;
  // A broadcast along a new axis after `axis`, merged into it: the reshape
  // materializes the repeated elements once.
  Shape wide = a.shape();
  wide.insert(wide.begin() + axis + 1, repeats);
  Shape out = a.shape();
  out[axis] = detail::checked_dim(
      static_cast<int64_t>(out[axis]) * repeats, "repeat");
  return reshape(broadcast_to(expand_dims(a, axis + 1, s), wide, s), out, s);
}

array repeat(const array& a, int repeats, StreamOrDevice s) {
  return repeat(flatten(a, 0, -1, s), repeats, 0, s);
}

array tile(const array& a, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) invalid("tile", "reps must be non-negative.");
  }
  Shape shape = a.shape();
  size_t nd = std::max(shape.size(), reps.size());
  shape.insert(shape.begin(), nd - shape.size(), 1);
  reps.insert(reps.begin(), nd - reps.size(), 1);
  // (1, d0, 1, d1, ...) broadcast to (r0, d0, r1, d1, ...), then merged.
  Shape split, wide, out;
  for (size_t i = 0; i < nd; ++i) {
    split.insert(split.end(), {1, shape[i]});
    wide.insert(wide.end(), {reps[i], shape[i]});
    out.push_back(reps[i] * shape[i]);
  }
  return reshape(broadcast_to(reshape(a, split, s), wide, s), out, s);
}

namespace {

// Source index along an axis of size n for padded position i (which may be
// negative or past the end), for the non-constant modes.
int32_t pad_source(int64_t i, int64_t n, const std::string& mode) {
  if (mode == "edge")
    return static_cast<int32_t>(std::clamp<int64_t>(i, 0, n - 1));
  if (mode == "reflect") {
    if (n == 1) return 0;
    int64_t period = 2 * (n - 1), m = ((i % period) + period) % period;
    return static_cast<int32_t>(m < n ? m : period - m);
  }
  int64_t period = 2 * n, m = ((i % period) + period) % period;
  return static_cast<int32_t>(m < n ? m : period - 1 - m);
}

} // namespace

array pad(const array& a, const std::vector<int>& axes,
          const Shape& low_pad_size, const Shape& high_pad_size,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "symmetric") {
    invalid("pad", "unknown mode '" + mode +
                       "' (constant, edge, reflect or symmetric).");
  }
  if (axes.size() != low_pad_size.size() ||
      axes.size() != high_pad_size.size()) {
    invalid("pad", std::to_string(axes.size()) + " axes but " +
                       std::to_string(low_pad_size.size()) + " low and " +
                       std::to_string(high_pad_size.size()) +
                       " high pad sizes.");
  }
  auto sorted = detail::normalize_axes(axes, static_cast<int>(a.ndim()), "pad");
  (void)sorted; // checks range and duplicates
  Shape out_shape = a.shape(), start(a.ndim(), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    int ax = detail::normalize_axis(axes[k], static_cast<int>(a.ndim()), "pad");
    if (low_pad_size[k] < 0 || high_pad_size[k] < 0) {
      invalid("pad", "pad widths must be non-negative; got (" +
                         std::to_string(low_pad_size[k]) + ", " +
                         std::to_string(high_pad_size[k]) + ") for axis " +
                         std::to_string(ax) + ".");
    }
    out_shape[ax] += low_pad_size[k] + high_pad_size[k];
    start[ax] = low_pad_size[k];
  }
  if (mode == "constant") {
    if (pad_value.size() != 1) {
      invalid("pad", "pad_value must hold one value; got a " +
                         describe(pad_value) + ".");
    }
    if (out_shape == a.shape()) return a;
    auto fill = full(out_shape, reshape(pad_value, {}, s), a.dtype(), s);
    Shape stop = start;
    for (size_t i = 0; i < a.ndim(); ++i) stop[i] += a.shape()[i];
    return slice_update(fill, a, start, stop, s);
  }
  // The other modes gather each padded axis through a table of sources.
  array out = a;
  for (size_t k = 0; k < axes.size(); ++k) {
    int ax = detail::normalize_axis(axes[k], static_cast<int>(a.ndim()), "pad");
    int lo = low_pad_size[k], hi = high_pad_size[k], n = a.shape(ax);
    if (lo == 0 && hi == 0) continue;
    if (n == 0) {
      invalid("pad", "cannot pad the empty axis " + std::to_string(ax) +
                         " of the " + describe(a) + " in mode '" + mode + "'.");
    }
    std::vector<int32_t> src(lo + n + hi);
    for (int i = 0; i < lo + n + hi; ++i) src[i] = pad_source(i - lo, n, mode);
    out = take(out, array(src, {static_cast<int>(src.size())}, int32), ax, s);
  }
  return out;
}

array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  size_t nd = a.ndim();
  if (pad_width.size() != nd && pad_width.size() != 1) {
    invalid("pad", std::to_string(pad_width.size()) +
                       " pad widths for an array with " + std::to_string(nd) +
                       " dimensions (need 1 or " + std::to_string(nd) + ").");
  }
  std::vector<int> axes;
  Shape lows, highs;
  for (size_t i = 0; i < nd; ++i) {
    auto w = pad_width[pad_width.size() == 1 ? 0 : i];
    axes.push_back(static_cast<int>(i));
    lows.push_back(w.first);
    highs.push_back(w.second);
  }
  return pad(a, axes, lows, highs, pad_value, mode, s);
}

array pad(const array& a, const std::pair<int, int>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  return pad(a, std::vector<std::pair<int, int>>{pad_width}, pad_value, mode,
             s);
}

array pad(const array& a, int pad_width, const array& pad_value,
          const std::string& mode, StreamOrDevice s) {
  return pad(a, std::make_pair(pad_width, pad_width), pad_value, mode, s);
}

} // namespace kiln
