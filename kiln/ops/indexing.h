// Gather, scatter and the indexing ops built on them. Index arrays may have
// any integer dtype; negative values count from the end of their axis.
// Index values are not bounds-checked (as MLX), but they never reach outside
// an array: reads clamp into range, writes out of range are dropped.
#pragma once

#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** Slices of a of size slice_sizes (one entry per axis of a) starting at the
 *  index values along axes (one index array per axis, broadcast together)
 *  and at 0 elsewhere. The result's shape is the broadcast index shape
 *  followed by slice_sizes. */
array gather(const array& a, const std::vector<array>& indices,
             const std::vector<int>& axes, const Shape& slice_sizes,
             StreamOrDevice s = {});
array gather(const array& a, const array& indices, int axis,
             const Shape& slice_sizes, StreamOrDevice s = {});

/** a with slices of updates written at the index values along axes (as
 *  gather's starts). updates has the broadcast index shape followed by one
 *  slice dimension per axis of a; it is cast to a's dtype. For repeated
 *  indices the last update wins (scatter) or all are combined.
 *  Gradients: only the update that scatter kept gets one (overwritten
 *  values and dropped slices get zero); scatter_max / scatter_min split
 *  the gradient equally among the source value and the updates that tie
 *  with the result. */
array scatter(const array& a, const std::vector<array>& indices,
              const array& updates, const std::vector<int>& axes,
              StreamOrDevice s = {});
array scatter(const array& a, const array& indices, const array& updates,
              int axis, StreamOrDevice s = {});
array scatter_add(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_add(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});
array scatter_prod(const array& a, const std::vector<array>& indices,
                   const array& updates, const std::vector<int>& axes,
                   StreamOrDevice s = {});
array scatter_prod(const array& a, const array& indices, const array& updates,
                   int axis, StreamOrDevice s = {});
array scatter_max(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_max(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});
array scatter_min(const array& a, const std::vector<array>& indices,
                  const array& updates, const std::vector<int>& axes,
                  StreamOrDevice s = {});
array scatter_min(const array& a, const array& indices, const array& updates,
                  int axis, StreamOrDevice s = {});

/** Elements of a at indices along axis: the result's shape is a's with that
 *  axis replaced by the indices' shape. */
array take(const array& a, const array& indices, int axis,
           StreamOrDevice s = {});
/** take from the flattened a. */
array take(const array& a, const array& indices, StreamOrDevice s = {});
/** The sub-array at one index along axis (a view); the index is checked
 *  against the axis and raises when out of range. */
array take(const array& a, int index, int axis, StreamOrDevice s = {});
array take(const array& a, int index, StreamOrDevice s = {});

/** out[..., j, ...] = a[..., indices[..., j, ...], ...] along axis.
 *  indices has a's rank and broadcasts with a on the other axes. */
array take_along_axis(const array& a, const array& indices, int axis,
                      StreamOrDevice s = {});
/** take_along_axis of the flattened a and indices. */
array take_along_axis(const array& a, const array& indices,
                      StreamOrDevice s = {});
/** a with values written at indices along axis (values broadcast to the
 *  indices' shape). */
array put_along_axis(const array& a, const array& indices, const array& values,
                     int axis, StreamOrDevice s = {});
/** put_along_axis that adds the values (repeated indices accumulate). */
array scatter_add_axis(const array& a, const array& indices,
                       const array& values, int axis, StreamOrDevice s = {});

/** a with the positions where mask (a prefix of a's shape, broadcast over
 * the trailing axes) is true replaced, in row-major order, by the values
 * (count, trailing...) or one row of them broadcast: NumPy's a[mask] = v. */
array masked_scatter(const array& a, const array& mask, const array& values,
                     StreamOrDevice s = {});

} // namespace kiln
