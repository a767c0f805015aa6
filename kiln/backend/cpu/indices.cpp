#include "kiln/backend/cpu/indices.h"

#include <stdexcept>

#include "kiln/backend/common/strided.h"
#include "kiln/backend/cpu/copy.h"
#include "kiln/core/dispatch.h"

namespace kiln::detail {

std::vector<int64_t> index_values(const array& idx) {
  std::vector<int64_t> out(idx.size());
  if (idx.size() == 0) return out;
  if (!is_integral(idx.dtype())) {
    throw std::invalid_argument("[index_values] indices must be integers.");
  }
  dispatch_type(idx.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* p = idx.data<T>();
      std::array<Strides, 1> st{idx.strides()};
      Shape shape = collapse_dims(idx.shape(), st);
      size_t pos = 0;
      for_each_row(shape, st, 0, num_rows(shape),
                   [&](const auto& off, int64_t n) {
                     int64_t s = st[0].back();
                     for (int64_t j = 0; j < n; ++j) {
                       out[pos++] = static_cast<int64_t>(p[off[0] + j * s]);
                     }
                   });
    }
  });
  return out;
}

void copy_or_donate(const array& src, array& out) {
  bool dense = src.flags().contiguous && src.data_size() == src.size();
  if (dense && src.size() > 0 && src.itemsize() == out.itemsize() &&
      src.is_donatable()) {
    out.move_shared_buffer(src);
  } else {
    copy_row_major(src, out);
  }
}

} // namespace kiln::detail
