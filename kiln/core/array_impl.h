// Template members of array that need dispatch and casts.
#pragma once

#include <string>

#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"

namespace kiln {

template <typename It>
void array::init(It src) {
  set_data(allocator::malloc(nbytes()));
  dispatch_type(dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    T* dst = data<T>();
    for (size_t i = 0; i < size(); ++i, ++src) {
      dst[i] = cast_to<T>(*src);
    }
  });
  set_status(Status::available);
}

template <typename T>
T array::item() {
  if (size() != 1) {
    throw std::invalid_argument(
        "[item] only arrays of one element have an item; this one has " +
        std::to_string(size()) + ".");
  }
  eval();
  return dispatch_type(dtype(), [&](auto tag) -> T {
    using U = KILN_TYPE(tag);
    return cast_to<T>(*data<U>());
  });
}

} // namespace kiln
