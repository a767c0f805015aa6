// Asynchronous copies from global to shared memory (`cp.async`, sm_80 and
// later), shared by the attention kernels and the quantized GEMM: a copy
// of zero bytes fills its destination with zeros, so tiles past the end of
// a matrix need no branch around the copy.
#pragma once

namespace kiln::cuda {

/** 16 bytes from global src to shared dst, or zeros when !valid (no bytes
 *  are read then; src need only be a valid address). */
__device__ __forceinline__ void copy16_async(void* dst, const void* src,
                                             bool valid) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s),
               "l"(src), "r"(n)
               : "memory");
}

/** 4 bytes from global src to shared dst, or zeros when !valid, as
 *  copy16_async. */
__device__ __forceinline__ void copy4_async(void* dst, const void* src,
                                            bool valid) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s),
               "l"(src), "r"(n)
               : "memory");
}

/** Closes this thread's group of copies started since the last one. */
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/** Waits until at most N of this thread's copy groups are in flight. */
template <int N>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

} // namespace kiln::cuda
