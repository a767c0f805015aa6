#include <cstdint>
#include <type_traits>

#include "kiln/core/cast.h"
#include "kiln/core/dispatch.h"
#include "kiln/primitives/creation.h"

namespace kiln {

void Arange::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    T* dst = out.data<T>();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // The op made start and step whole: 64-bit integer steps, wrapping
      // into T (an int32 range past INT32_MAX wraps, as MLX's).
      auto first = static_cast<uint64_t>(static_cast<int64_t>(start_));
      auto step = static_cast<uint64_t>(static_cast<int64_t>(step_));
      for (size_t i = 0; i < out.size(); ++i) {
        dst[i] = static_cast<T>(first + static_cast<uint64_t>(i) * step);
      }
    } else {
      for (size_t i = 0; i < out.size(); ++i) {
        dst[i] = cast_to<T>(start_ + static_cast<double>(i) * step_);
      }
    }
  });
}

} // namespace kiln
