// SegmentedMM on the CPU: one BLAS GEMM per segment over its columns of a
// and rows of b, read in place when their layout suits BLAS (a slice of
// either keeps its strides).
#include <algorithm>
#include <climits>
#include <stdexcept>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/indices.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

template <typename T, typename G>
void run_segmented_mm(const array& a, const array& b,
                      const std::vector<int64_t>& raw, array& out) {
  int64_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  const Strides& as = a.strides();
  const Strides& bs = b.strides();
  T* o = out.data<T>();
  std::vector<G> a_conv, b_conv, c_conv;
  for (int64_t s = 0; s < out.shape(0); ++s) {
    auto [start, end] =
        SegmentedMM::bounds(static_cast<uint32_t>(raw[2 * s]),
                            static_cast<uint32_t>(raw[2 * s + 1]), k);
    T* dst = o + s * m * n;
    if (end == start) {
      std::fill(dst, dst + m * n, T(0));
      continue;
    }
    int64_t len = end - start;
    auto A = detail::gemm_operand<G>(ap + start * as[1], m, len, as[0], as[1],
                                     a_conv);
    auto B = detail::gemm_operand<G>(bp + start * bs[0], len, n, bs[0], bs[1],
                                     b_conv);
    G* c = reinterpret_cast<G*>(dst);
    if constexpr (!std::is_same_v<T, G>) {
      c_conv.resize(static_cast<size_t>(m * n));
      c = c_conv.data();
    }
    detail::gemm(A.trans, B.trans, static_cast<int>(m), static_cast<int>(n),
                 static_cast<int>(len), G(1), A.ptr, A.ld, B.ptr, B.ld, G(0),
                 c, static_cast<int>(n));
    if constexpr (!std::is_same_v<T, G>) {
      for (int64_t i = 0; i < m * n; ++i) dst[i] = cast_to<T>(c[i]);
    }
  }
}

} // namespace

void SegmentedMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  if (a.shape(0) > INT_MAX || a.shape(1) > INT_MAX || b.shape(1) > INT_MAX) {
    throw std::invalid_argument(
        "[segmented_mm] matrix dimensions exceed INT_MAX.");
  }
  auto raw = detail::index_values(inputs[2]);
  detail::dispatch_real_gemm("segmented_mm", out.dtype(), [&](auto t, auto g) {
    run_segmented_mm<decltype(t), decltype(g)>(a, b, raw, out);
  });
}

} // namespace kiln
