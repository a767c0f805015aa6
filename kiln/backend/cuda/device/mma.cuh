// The warp-level tensor-core product that the attention kernels
// (device/flash_attention.cuh, flash_attention_bwd.cuh) and the quantized
// matmul (device/quantized.cuh) share: `mma.sync.aligned.m16n8k16.row.col
// .f32.{f16|bf16}` (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"). With g = lane / 4 and t = lane % 4:
//   A (16 x 16, 4 registers of two T): register 0 row g, columns 2t and
//     2t + 1; register 1 row g + 8, the same columns; registers 2 and 3 the
//     same rows at columns 2t + 8 and 2t + 9. The lower half of a register
//     holds the lower column.
//   B (16 x 8, 2 registers): column g, rows 2t and 2t + 1 (register 0) and
//     2t + 8 and 2t + 9 (register 1).
//   C (16 x 8, 4 floats): rows g (0, 1) and g + 8 (2, 3), columns 2t and
//     2t + 1.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

/** c += a b for one m16n8k16 step: a the A fragment (16 x 16 of T), b0 and
 *  b1 the B fragment (16 x 8 of T), c the float C fragment (16 x 8). */
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4],
                                         unsigned b0, unsigned b1) {
  if constexpr (is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(is_same_v<T, __nv_bfloat16>);
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, "
        "%3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

} // namespace kiln::cuda
