#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"
#include "kiln/primitives/creation.h"

namespace kiln {

void Arange::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    T* dst = out.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      dst[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
    }
  });
}

} // namespace kiln
