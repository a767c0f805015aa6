// Ahead-of-time binary and ternary kernels: arithmetic and comparisons on
// the common dtypes, and Select. Everything else is compiled by NVRTC at
// first use.
#include "kiln/backend/cuda/aot.cuh"

namespace kiln::cuda {

void add_aot_binary(AotTable& t) {
  using namespace aot;
  auto arith = [&](auto op, const char* name) {
    using Op = decltype(op);
    binary<Op, float, float>(t, name);
    binary<Op, __half, __half>(t, name);
    binary<Op, __nv_bfloat16, __nv_bfloat16>(t, name);
    binary<Op, int32_t, int32_t>(t, name);
  };
  auto compare = [&](auto op, const char* name) {
    using Op = decltype(op);
    binary<Op, float, bool>(t, name);
    binary<Op, __half, bool>(t, name);
    binary<Op, __nv_bfloat16, bool>(t, name);
    binary<Op, int32_t, bool>(t, name);
  };
  // The rows of the binary table by their aot column.
#define KILN_AOT_arith(Name) arith(Name{}, #Name);
#define KILN_AOT_compare(Name) compare(Name{}, #Name);
#define KILN_AOT_float(Name) binary<Name, float, float>(t, #Name);
#define KILN_AOT_none(Name)
#define KILN_AOT_ROW(Name, op, kind, vector, aot, ...) KILN_AOT_##aot(Name)
  KILN_BINARY_OPS(KILN_AOT_ROW)
#undef KILN_AOT_ROW
#undef KILN_AOT_none
#undef KILN_AOT_float
#undef KILN_AOT_compare
#undef KILN_AOT_arith

  auto select = [&](auto tag) {
    using T = decltype(tag);
    Dtype d = dtype_v<T>;
    constexpr int N = width<T, T>;
    put(t, ternary_kernel(d, "vvv"),
        reinterpret_cast<const void*>(
            &ternary_v<Select, T, N, false, false, false>));
    put(t, ternary_kernel(d, "g"),
        reinterpret_cast<const void*>(&ternary_g<Select, T, uint32_t>));
  };
  select(float{});
  select(__half{});
  select(__nv_bfloat16{});
}

} // namespace kiln::cuda
