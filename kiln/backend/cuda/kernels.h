// Finding and launching kernels. Every kernel has a name ({v|g}{op}{dtype},
// see kernel_names.h) and an instantiation expression. The default build
// finds the common ones among the nvcc-compiled kernels (aot_*.cu); anything
// else, and everything in the KILN_CUDA_JIT build, is compiled by NVRTC from
// the same device headers at first use.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/backend/cuda/jit_module.h"
#include "kiln/backend/cuda/launch_queue.h"
#include "kiln/core/dtype.h"

namespace kiln::cuda {

/** The kernel named k.name: ahead-of-time when built so, else JIT. */
CUfunction get_kernel(const JitKernel& k);

/** A kernel found by a short key (at most 32 bytes: a family letter, the
 *  op's name, packed dtypes and variant; longer keys are left empty and
 *  find_kernel builds the JitKernel each time) before its JitKernel is built:
 *  per-op launch paths call this, and a JitKernel with its siblings is a
 *  dozen strings, which cost more than the rest of an op's bookkeeping.
 *  make() runs on the first lookup of a key only. */
class KernelKey {
 public:
  KernelKey(char family, const char* op);
  KernelKey& add(uint32_t bits); // appends 4 bytes
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[32];
  uint8_t size_ = 0;
};
/** The kernel cached under key, or null (always for an empty key). */
CUfunction cached_kernel(const KernelKey& key);
/** get_kernel(k), cached under key unless that is empty. */
CUfunction cache_kernel(const KernelKey& key, const JitKernel& k);
/** A template, so a hit builds no std::function (a heap allocation for a
 *  lambda holding more than two references). */
template <typename Make>
CUfunction find_kernel(const KernelKey& key, Make&& make) {
  if (CUfunction f = cached_kernel(key)) return f;
  return cache_kernel(key, make());
}

/** True when get_kernel would find k.name among the nvcc-compiled kernels. */
bool has_aot_kernel(const std::string& name);

/** Name -> host stub of each nvcc-compiled kernel (empty in the JIT
 *  build). Each aot_*.cu file adds its family. */
using AotTable = std::unordered_map<std::string, const void*>;
AotTable& aot_table();

/** Launches f over n work items of `per_thread` elements each, with args
 *  pointing at the kernel's parameters, on kiln stream `stream`.
 *  `programmatic`: f declares a GridDependency first (LaunchShape). */
void launch(CUfunction f, int64_t n, int per_thread, KernelArgs args,
            int stream, bool programmatic = false);
/** Launches f with `threads` per block over `blocks` blocks, or fewer (a
 *  few full waves) for a kernel that loops grid-stride over its blocks'
 *  work, on kiln stream `stream`. */
void launch_blocks(CUfunction f, int64_t blocks, int threads, KernelArgs args,
                   int stream);

/** launch_blocks for a kernel with `shared_bytes` of dynamic shared memory;
 *  past the default 48 KiB it first raises the kernel's limit (once per
 *  kernel). */
void launch_blocks_shared(CUfunction f, int64_t blocks, int threads,
                          int shared_bytes, KernelArgs args, int stream,
                          bool programmatic = false);

/** Raises f's dynamic shared memory limit to at least `bytes` when that is
 *  past the default 48 KiB (once per kernel and size). */
void allow_shared_bytes(CUfunction f, int bytes);

/** Launches f on a grid of `blocks` blocks of (bx, by) threads; for kernels
 *  that choose their own shape (reductions). */
void launch_blocks(CUfunction f, int64_t blocks, int bx, int by,
                   KernelArgs args, int stream);

/** How many blocks of `threads` threads of f one SM holds at once (the
 *  driver's occupancy calculator, asked once per kernel and block size). */
int resident_blocks(CUfunction f, int threads);

/** The device type spelled for instantiation expressions ("float",
 *  "__nv_bfloat16", "long long", "kiln::cuda::complex64_t", ...). */
const char* device_type(Dtype dt);
/** True for the dtypes every GPU kernel family handles: all but complex64,
 *  which only some elementwise kernels take (elementwise.h). */
bool gpu_supports(Dtype dt);

} // namespace kiln::cuda
