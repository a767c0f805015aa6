#include "kiln/backend/cpu/elementwise.h"

#include <stdexcept>

namespace kiln::detail {

void unsupported_dtype(const char* op, Dtype dt) {
  throw std::invalid_argument(std::string("[") + op + "] not supported for " +
                              dtype_name(dt) + ".");
}

bool set_elementwise_output(ArrayRefs inputs, array& out) {
  auto [flat, layout] = elementwise_layout(inputs);
  if (!flat) {
    out.set_data(allocator::malloc(out.nbytes()));
    return false;
  }
  // Donate an input buffer when nothing else needs it.
  for (const array& in : inputs) {
    if (&in != layout && in.data_size() == 1) continue;
    if (in.itemsize() == out.itemsize() && in.is_donatable() &&
        in.strides() == layout->strides() &&
        in.data_size() == layout->data_size()) {
      out.copy_shared_buffer(in);
      return true;
    }
  }
  out.set_data(allocator::malloc(layout->data_size() * out.itemsize()),
               layout->data_size(), layout->strides(), layout->flags());
  return true;
}

} // namespace kiln::detail
