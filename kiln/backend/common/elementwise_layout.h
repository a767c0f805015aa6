// The output layout rule every backend's elementwise kernels follow: when
// each input holds one element or all share one contiguous layout (same
// strides and data size: row-major, transposed, column-major or a broadcast
// of contiguous data), the output inherits that layout and a flat kernel runs
// over data_size elements; otherwise the output is row-major and a strided
// kernel walks the collapsed shape.
#pragma once

#include <functional>
#include <initializer_list>

#include "kiln/core/array.h"

namespace kiln::detail {

using ArrayRefs = std::initializer_list<std::reference_wrapper<const array>>;

struct ElementwiseLayout {
  bool flat;           // the flat (contiguous) kernel applies
  const array* layout; // when flat: the input whose layout out inherits
};

inline ElementwiseLayout elementwise_layout(ArrayRefs inputs) {
  const array* layout = nullptr; // the first non-scalar input
  for (const array& in : inputs) {
    if (in.data_size() == 1) continue;
    if (!in.flags().contiguous) return {false, nullptr};
    if (layout == nullptr) {
      layout = &in;
    } else if (in.strides() != layout->strides() ||
               in.data_size() != layout->data_size()) {
      return {false, nullptr};
    }
  }
  // All scalars: one element, laid out like the first input.
  if (layout == nullptr) layout = &inputs.begin()->get();
  return {true, layout};
}

} // namespace kiln::detail
