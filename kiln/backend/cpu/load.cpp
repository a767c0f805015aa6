// eval_cpu of Load: the bytes read at their offset into a fresh buffer,
// then the fix-ups an eager load applies (byte order, booleans).
#include <stdexcept>

#include "kiln/core/allocator.h"
#include "kiln/io/common.h"
#include "kiln/primitives/load.h"

namespace kiln {

void Load::eval_cpu(const std::vector<array>&, array& out) {
  auto buffer = allocator::malloc(out.nbytes());
  try {
    file_->read_at(buffer.raw(), out.nbytes(), offset_, "an array");
  } catch (...) {
    allocator::free(buffer);
    throw;
  }
  out.set_data(buffer);
  io::detail::fix_loaded_bytes(out.data<char>(), out.nbytes(), out.dtype(),
                               swap_unit_);
}

std::vector<Shape> Load::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument(
      "[Load] an array read from a file has the file's shape; a shapeless "
      "compile cannot give it another.");
}

} // namespace kiln
