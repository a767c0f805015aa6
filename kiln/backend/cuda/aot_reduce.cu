// Ahead-of-time reduction kernels: sum, max and min over the floating types,
// integer and boolean sums, any/all, argmax/argmin and mean's count, in
// every kernel shape with 32-bit indices, plus the second passes over their
// partials. Everything else is compiled by NVRTC at first use.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/device/reduce.cuh"
#include "kiln/backend/cuda/reduce_kernels.h"

namespace kiln::cuda {

namespace {

template <typename F>
const void* stub(F* f) {
  return reinterpret_cast<const void*>(f);
}

/** The warp, block and column kernels of one operator and dtype pair. */
template <typename Op, typename In, typename Out>
void shapes(AotTable& t, const char* op) {
  Dtype i = aot::dtype_v<In>, o = aot::dtype_v<Out>;
  constexpr int N = 16 / sizeof(In);
  aot::put(t, reduce_kernel('w', op, i, o),
           stub(&row_reduce<Op, In, Out, N, true, uint32_t>));
  aot::put(t, reduce_kernel('r', op, i, o),
           stub(&row_reduce<Op, In, Out, N, false, uint32_t>));
  aot::put(t, reduce_kernel('c', op, i, o),
           stub(&col_reduce<Op, In, Out, 1, uint32_t>));
  constexpr int V = sizeof(In) >= 2 ? 16 / sizeof(In) : 8;
  static_assert(V == 16 / sizeof(In) || sizeof(In) == 1);
  aot::put(t, reduce_kernel('C', op, i, o),
           stub(&col_reduce<Op, In, Out, V, uint32_t>));
}

/** First passes In -> Out and the second passes over the partials, which
 *  hold the accumulator type A (reduce_acc_dtype). */
template <template <typename> class OpT, typename A, typename In,
          typename Out>
void reduce(AotTable& t, const char* op) {
  shapes<OpT<A>, In, Out>(t, op);
  shapes<OpT<A>, A, Out>(t, op);
}

template <bool IsMax, typename T>
void arg_reduce(AotTable& t, const char* op) {
  Dtype d = aot::dtype_v<T>;
  aot::put(t, arg_reduce_kernel('w', op, d),
           stub(&arg_reduce_row<IsMax, T, true, uint32_t>));
  aot::put(t, arg_reduce_kernel('r', op, d),
           stub(&arg_reduce_row<IsMax, T, false, uint32_t>));
  aot::put(t, arg_reduce_kernel('c', op, d),
           stub(&arg_reduce_col<IsMax, T, uint32_t>));
}

template <typename T>
void floats(AotTable& t) {
  reduce<SumOp, float, T, T>(t, "Sum");
  reduce<MaxOp, float, T, T>(t, "Max");
  reduce<MinOp, float, T, T>(t, "Min");
  arg_reduce<true, T>(t, "ArgMax");
  arg_reduce<false, T>(t, "ArgMin");
  aot::put(t, number_of_elements_kernel(aot::dtype_v<T>),
           stub(&number_of_elements<T>));
}

} // namespace

void add_aot_reduce(AotTable& t) {
  floats<float>(t);
  floats<__half>(t);
  floats<__nv_bfloat16>(t);
  reduce<SumOp, int32_t, int32_t, int32_t>(t, "Sum");
  reduce<SumOp, int32_t, bool, int32_t>(t, "Sum");
  reduce<MaxOp, int32_t, int32_t, int32_t>(t, "Max");
  reduce<MinOp, int32_t, int32_t, int32_t>(t, "Min");
  shapes<AndOp, bool, bool>(t, "And");
  shapes<OrOp, bool, bool>(t, "Or");
}

} // namespace kiln::cuda
