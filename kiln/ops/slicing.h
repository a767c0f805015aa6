// Slicing, joining and padding. Slices, splits and as_strided are views of
// their input; the rest produce new arrays.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** A stop that runs through the end of the axis, whatever its size. */
inline constexpr int32_t slice_end = std::numeric_limits<int32_t>::max();

/** a[start:stop:strides] per axis with NumPy's rules: negative starts and
 *  stops count from the end, out-of-range bounds are clamped, and negative
 *  strides walk backwards. A view. The bounds are kept as given: under
 *  shapeless compile a new size moves those counted from the end (and
 *  slice_end). */
array slice(const array& a, Shape start, Shape stop, Shape strides,
            StreamOrDevice s = {});
array slice(const array& a, Shape start, Shape stop, StreamOrDevice s = {});
/** A window of slice_size (one entry per axis of a) whose start along axes
 *  is read from the integer array start (0-d or 1-d, one entry per axis).
 *  A negative start wraps once; the start is then clamped so the window
 *  fits (MLX reads out of bounds instead). A view. */
array slice(const array& a, const array& start, std::vector<int> axes,
            Shape slice_size, StreamOrDevice s = {});

/** src with src[start:stop:strides] replaced by update (broadcast to the
 *  window's shape, cast to src's dtype). */
array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, Shape strides, StreamOrDevice s = {});
array slice_update(const array& src, const array& update, Shape start,
                   Shape stop, StreamOrDevice s = {});
/** src with a window of update's shape replaced, starting along axes at the
 *  values of the integer array start (wrapped and clamped as the dynamic
 *  slice). update is padded with leading 1s to src's rank; a 0-d update
 *  fills the whole window of size 1 along axes, as MLX does. */
array slice_update(const array& src, const array& update, const array& start,
                   std::vector<int> axes, StreamOrDevice s = {});

/** A view of a's row-major data (a is made contiguous first) with the given
 *  shape, strides and offset, all in elements. Unlike MLX, a view that would
 *  reach outside a's data raises. */
array as_strided(const array& a, Shape shape, Strides strides, size_t offset,
                 StreamOrDevice s = {});

/** num_splits equal views along axis (the axis must divide evenly). */
std::vector<array> split(const array& a, int num_splits, int axis,
                         StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, StreamOrDevice s = {});
/** Views a[:i0], a[i0:i1], ..., a[ik:] along axis (NumPy's array_split with
 *  indices: negative ones count from the end, out-of-order ones give empty
 *  pieces). */
std::vector<array> split(const array& a, const Shape& indices, int axis,
                         StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices,
                         StreamOrDevice s = {});

/** a with the order of elements reversed along axes (all axes when none
 *  are given). A view. */
array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array flip(const array& a, int axis, StreamOrDevice s = {});
array flip(const array& a, StreamOrDevice s = {});

/** Elements shifted by shift places along axes (wrapping around); without
 *  axes the flattened array is rolled and the shape restored. One shift
 *  applies to every axis, or one shift per axis. */
array roll(const array& a, int shift, StreamOrDevice s = {});
array roll(const array& a, int shift, int axis, StreamOrDevice s = {});
array roll(const array& a, int shift, const std::vector<int>& axes,
           StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s = {});

/** The diagonal at offset of the 2-d sub-arrays over axis1 and axis2 (as
 *  NumPy): those axes are removed and the diagonal becomes the last axis. */
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
               StreamOrDevice s = {});
/** For a 1-d a, the square matrix with a on its k-th diagonal; for a 2-d a,
 *  its k-th diagonal. */
array diag(const array& a, int k = 0, StreamOrDevice s = {});

/** The slices of a along axis, each without that axis (the inverse of
 *  stack). */
std::vector<array> unstack(const array& a, int axis = 0, StreamOrDevice s = {});

/** The n-th discrete difference along axis: a[1:] - a[:-1], n times
 *  (not_equal for bool, as NumPy). */
array diff(const array& a, int n = 1, int axis = -1, StreamOrDevice s = {});

/** Join along axis; dtypes promote, all other dimensions must match. */
array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s = {});
/** Join the flattened arrays. */
array concatenate(std::vector<array> arrays, StreamOrDevice s = {});
/** Join along a new axis; all shapes must match. */
array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, StreamOrDevice s = {});

/** Each element repeated `repeats` times along axis. */
array repeat(const array& a, int repeats, int axis, StreamOrDevice s = {});
/** Repeat the elements of the flattened array. */
array repeat(const array& a, int repeats, StreamOrDevice s = {});
/** a repeated reps[i] times along each axis (NumPy's tile: the shorter of
 *  reps and a.shape is padded with leading 1s). */
array tile(const array& a, std::vector<int> reps, StreamOrDevice s = {});

/** Pad the given axes by low_pad_size before and high_pad_size after.
 *  mode: "constant" (pad_value, a scalar cast to a's dtype), "edge" (the
 *  border value), "reflect" (mirror without the border), "symmetric"
 *  (mirror with the border), as NumPy's pad. */
array pad(const array& a, const std::vector<int>& axes,
          const Shape& low_pad_size, const Shape& high_pad_size,
          const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
/** One (low, high) pair per axis, or one pair for every axis. */
array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, const std::pair<int, int>& pad_width,
          const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, int pad_width, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});

} // namespace kiln
