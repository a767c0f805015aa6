#include "kiln/backend/cpu/elementwise.h"

#include <stdexcept>

namespace kiln::detail {

void unsupported_dtype(const char* op, Dtype dt) {
  throw std::invalid_argument(std::string("[") + op + "] not supported for " +
                              dtype_name(dt) + ".");
}

bool set_elementwise_output(ArrayRefs inputs, array& out) {
  const array* layout = nullptr; // the first non-scalar input
  bool flat = true;
  for (const array& in : inputs) {
    if (in.data_size() == 1) continue;
    if (!in.flags().contiguous) {
      flat = false;
      break;
    }
    if (layout == nullptr) {
      layout = &in;
    } else if (in.strides() != layout->strides() ||
               in.data_size() != layout->data_size()) {
      flat = false;
      break;
    }
  }
  if (!flat) {
    out.set_data(allocator::malloc(out.nbytes()));
    return false;
  }
  if (layout == nullptr) {
    // All scalars: one element, laid out like the first input.
    layout = &inputs.begin()->get();
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
