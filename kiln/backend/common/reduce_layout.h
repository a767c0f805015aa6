// How a reduction walks its input, shared by the backends: the input's
// dimensions split into the kept ones (in output order) and the reduced
// ones, each group collapsed on its own.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "kiln/backend/common/strided.h"

namespace kiln::detail {

struct ReduceLayout {
  Shape kept_shape;
  std::array<Strides, 1> kept_strides;
  Shape reduced_shape;
  std::array<Strides, 1> reduced_strides;
};

/** Splits in's dimensions at `axes`. With order_reduced, the reduced
 *  dimensions are first sorted by decreasing |stride| (a reduction may
 *  visit its elements in any order), so a transposed or column-major region
 *  collapses to one contiguous run; results then differ from the natural
 *  order only by floating-point rounding. */
inline ReduceLayout reduce_layout(const array& in, const std::vector<int>& axes,
                                  bool order_reduced = false) {
  ReduceLayout l;
  std::vector<int> reduced;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
      reduced.push_back(d);
    } else {
      l.kept_shape.push_back(in.shape(d));
      l.kept_strides[0].push_back(in.strides()[d]);
    }
  }
  if (order_reduced) {
    std::stable_sort(reduced.begin(), reduced.end(), [&](int a, int b) {
      return std::llabs(in.strides()[a]) > std::llabs(in.strides()[b]);
    });
  }
  for (int d : reduced) {
    l.reduced_shape.push_back(in.shape(d));
    l.reduced_strides[0].push_back(in.strides()[d]);
  }
  l.kept_shape = collapse_dims(l.kept_shape, l.kept_strides);
  l.reduced_shape = collapse_dims(l.reduced_shape, l.reduced_strides);
  return l;
}

} // namespace kiln::detail
