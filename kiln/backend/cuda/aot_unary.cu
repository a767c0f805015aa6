// Ahead-of-time unary kernels: the common math on the floating types,
// copies (AsType) between the common dtypes, and the tiled transposing
// copies. Everything else is compiled by NVRTC at first use.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/device/transpose.cuh"

namespace kiln::cuda {

void add_aot_unary(AotTable& t) {
  using namespace aot;
  auto floats = [&](auto op, const char* name) {
    using Op = decltype(op);
    unary<Op, float, float>(t, name);
    unary<Op, __half, __half>(t, name);
    unary<Op, __nv_bfloat16, __nv_bfloat16>(t, name);
  };
  // The rows of the unary table marked aot floats.
#define KILN_AOT_floats(Name) floats(Name{}, #Name);
#define KILN_AOT_none(Name)
#define KILN_AOT_ROW(Name, op, kind, vector, aot, ...) KILN_AOT_##aot(Name)
  KILN_UNARY_OPS(KILN_AOT_ROW)
#undef KILN_AOT_ROW
#undef KILN_AOT_none
#undef KILN_AOT_floats

  auto copies_from = [&](auto in) {
    using In = decltype(in);
    unary<AsType, In, float>(t, "AsType");
    unary<AsType, In, __half>(t, "AsType");
    unary<AsType, In, __nv_bfloat16>(t, "AsType");
    unary<AsType, In, int32_t>(t, "AsType");
    unary<AsType, In, int64_t>(t, "AsType");
    unary<AsType, In, bool>(t, "AsType");
  };
  copies_from(float{});
  copies_from(__half{});
  copies_from(__nv_bfloat16{});
  copies_from(int32_t{});
  copies_from(int64_t{});
  copies_from(bool{});
  unary<AsType, uint32_t, uint32_t>(t, "AsType");
  unary<AsType, double, double>(t, "AsType");
  // Same-dtype strided copies of narrower types move 8-byte chunks
  // (elementwise.cpp's as_chunks).
  unary<AsType, uint64_t, uint64_t>(t, "AsType");
  // Transposing copies in tiles (elementwise.cpp's transposed_copy).
  put(t, transpose_kernel(uint8),
      reinterpret_cast<const void*>(&transpose_tiles<uint8_t>));
  put(t, transpose_kernel(uint16),
      reinterpret_cast<const void*>(&transpose_tiles<uint16_t>));
  put(t, transpose_kernel(uint32),
      reinterpret_cast<const void*>(&transpose_tiles<uint32_t>));
  put(t, transpose_kernel(uint64),
      reinterpret_cast<const void*>(&transpose_tiles<uint64_t>));
}

} // namespace kiln::cuda
