// Compiled::eval_gpu: a fused region runs as one NVRTC kernel generated for
// its layout variant (compiled_source.h). The layout decision is the CPU's
// (backend/common/compiled_region.h), so outputs get the same strides and
// data size on both devices; a strided decision whose inputs are row-major,
// per-row or per-column over (rows, n) runs as the rows kernel. Regions the
// generator cannot take (complex64, more than max_ndim dimensions after
// collapsing, more than max_strided_inputs strided inputs) run op by op,
// each op's own eval_gpu (its kernel, or its fallback).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/compiled_source.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/compiled.h"

namespace kiln::cuda {

namespace {

using detail::JitRole;

/** Strided inputs a generated kernel takes (the fuse stage allows 24
 *  external inputs; a region with more falls back). */
constexpr size_t max_strided_inputs = 32;

/** What a launch needs. */
struct FusedLaunch {
  CUfunction f;
  int per_thread; // elements per thread access
};

/** A region's kernels on this GPU, one per variant met so far, by signature
 *  (each input's dtype and role, the rows kernel's vector width, the index
 *  width). Kept with the Compiled
 *  primitive, so a repeated call does a short comparison instead of building
 *  a key and source. */
struct RegionKernels {
  std::vector<std::pair<std::string, FusedLaunch>> variants;
};

std::mutex& region_kernels_mutex() {
  static std::mutex m;
  return m;
}

std::string signature(const detail::JitKernelSpec& spec, bool large) {
  std::string sig;
  sig.reserve(2 * spec.roles.size() + 2);
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    sig += static_cast<char>(spec.input_dtypes[k].val);
    sig += static_cast<char>(spec.roles[k]);
  }
  sig += static_cast<char>(spec.rows_width); // 0 unless the rows kernel
  sig += large ? 'L' : 's';
  return sig;
}

FusedLaunch kernel_for(const Compiled& c, const detail::JitKernelSpec& spec,
                       bool large) {
  std::string sig = signature(spec, large);
  {
    std::lock_guard<std::mutex> lock(region_kernels_mutex());
    if (auto* rk = static_cast<RegionKernels*>(c.backend_cache().get())) {
      for (auto& [vsig, found] : rk->variants) {
        if (vsig == sig) return found;
      }
    }
  }
  // Fused kernels are always JIT (never in the AOT table); jit_function
  // compiles each name once, also under concurrent first use.
  CUfunction f = jit_function(fused_kernel(spec, large));
  int per_thread = spec.contiguous ? fused_vec_width(spec) *
                                         fused_vectors_per_thread(spec)
                   : spec.rows_width > 0
                       ? spec.rows_width * fused_vectors_per_thread(spec)
                       : 1;
  std::lock_guard<std::mutex> lock(region_kernels_mutex());
  auto& slot = c.backend_cache();
  if (!slot) slot = std::make_shared<RegionKernels>();
  auto& variants = static_cast<RegionKernels*>(slot.get())->variants;
  FusedLaunch made{f, per_thread};
  for (auto& v : variants) {
    if (v.first == sig) return made; // another thread got here first
  }
  variants.emplace_back(std::move(sig), made);
  return made;
}

/** Whether a's strides are row_major_strides(a.shape()), size-1 dimensions
 *  too (an output given a's buffer takes its strides), without building
 *  them. */
bool has_row_major_strides(const array& a) {
  int64_t expect = 1;
  for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
    if (a.strides()[d] != expect) return false;
    expect *= std::max<int64_t>(a.shape()[d], 1);
  }
  return true;
}

/** Runs the region on the GPU; false when it must run on the CPU. */
bool eval_compiled(const Compiled& c, const std::vector<array>& inputs,
                   std::vector<array>& outputs, const Stream& s) {
  const Shape& shape = outputs[0].shape();
  if (outputs[0].size() == 0) {
    for (auto& o : outputs) set_device_output(o, s);
    return true;
  }
  detail::CompiledLayout lay = detail::compiled_layout(c, inputs, shape);
  detail::JitKernelSpec& spec = lay.spec;
  if (!detail::jit_supports(spec)) return false;
  bool rows = detail::rows_layout(lay);
  size_t strided_inputs = 0;
  for (auto r : spec.roles) strided_inputs += r == JitRole::strided;
  if (!spec.contiguous && !rows &&
      (lay.shape.size() > static_cast<size_t>(max_ndim) ||
       strided_inputs > max_strided_inputs)) {
    return false;
  }
  bool large = !spec.contiguous && outputs[0].size() > UINT32_MAX;

  // Parameters in the kernel's order: array inputs, outputs, n, then the
  // row length or the strided layout.
  std::vector<void*> ptrs;
  ptrs.reserve(inputs.size() + outputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (spec.roles[k] != JitRole::constant) {
      ptrs.push_back(device_ptr(inputs[k], s));
    }
  }
  // In the flat and rows kernels, an array input that nothing else holds
  // can become an output (as on the CPU for the flat loop): every element is
  // loaded by the thread that stores its position, before the store, and
  // read by no one after it (row and column inputs are read by many
  // threads: never). The rows kernel's outputs are row-major, so only a
  // row-major input of the region's shape can be one; the output then has
  // the strides and data size the CPU gives it.
  std::vector<bool> donated(inputs.size(), false);
  for (auto& o : outputs) {
    bool done = false;
    for (size_t k = 0; (spec.contiguous || rows) && k < inputs.size() && !done;
         ++k) {
      const array& in = inputs[k];
      bool same_layout =
          spec.contiguous
              ? in.strides() == lay.out_strides &&
                    in.data_size() == lay.flat.data_size
              : in.shape() == shape && in.data_size() == o.size() &&
                    has_row_major_strides(in);
      if (spec.roles[k] == JitRole::vector && !donated[k] && same_layout &&
          donate_device_buffer(in, o, s)) {
        donated[k] = done = true;
      }
    }
    if (!done && spec.contiguous) {
      set_device_output(o, lay.flat.data_size, lay.out_strides,
                        lay.flat.flags, s);
    } else if (!done) {
      set_device_output(o, s);
    }
    ptrs.push_back(o.raw_data_ptr());
  }
  int64_t n = spec.contiguous ? static_cast<int64_t>(lay.flat.data_size)
                              : static_cast<int64_t>(outputs[0].size());
  int64_t cols = rows ? static_cast<int64_t>(lay.shape[1]) : 0;
  if (rows) {
    // Vectors when they stay in one row and every vector access (vector and
    // column inputs, outputs) is aligned; else one element at a time.
    int width = fused_vec_width(spec);
    bool aligned = cols % width == 0;
    size_t p = 0;
    for (size_t k = 0; k < inputs.size() && aligned; ++k) {
      auto r = spec.roles[k];
      if (r == JitRole::constant) continue;
      aligned = (r != JitRole::vector && r != JitRole::column) ||
                reinterpret_cast<uintptr_t>(ptrs[p]) %
                        (inputs[k].itemsize() * width) ==
                    0;
      ++p;
    }
    for (size_t o = 0; o < outputs.size() && aligned; ++o) {
      aligned = reinterpret_cast<uintptr_t>(ptrs[p + o]) %
                    (outputs[o].itemsize() * width) ==
                0;
    }
    spec.rows_width = aligned ? width : 1;
  }
  FusedLaunch kernel = kernel_for(c, spec, large);
  Strided<max_strided_inputs> layout{};
  if (!spec.contiguous && !rows) {
    layout.ndim = static_cast<int>(lay.shape.size());
    size_t slot = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (spec.roles[k] != JitRole::strided) continue;
      for (size_t d = 0; d < lay.shape.size(); ++d) {
        layout.strides[slot][d] = lay.strides[k][d];
      }
      ++slot;
    }
    for (size_t d = 0; d < lay.shape.size(); ++d) {
      layout.shape[d] = lay.shape[d];
    }
  }
  std::vector<void*> args;
  args.reserve(ptrs.size() + 2);
  for (auto& p : ptrs) args.push_back(&p);
  args.push_back(&n);
  if (rows) {
    args.push_back(&cols);
  } else if (!spec.contiguous) {
    args.push_back(&layout);
  }
  int per_thread = kernel.per_thread;
  if (!spec.contiguous && !rows && layout.ndim > 0 &&
      layout.shape[layout.ndim - 1] % strided_run_length == 0) {
    per_thread = strided_run_length; // the kernel's row runs
  }
  // Fused kernels declare a GridDependency (compiled_source.cpp).
  launch(kernel.f, n, per_thread, args, s.index, true);
  return true;
}

} // namespace

} // namespace kiln::cuda

namespace kiln {

void Compiled::eval_gpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  if (cuda::eval_compiled(*this, inputs, outputs, stream())) return;
  // As the CPU does for regions its generator cannot take: the region's
  // ops one by one, on the region's stream.
  eval_unfused(inputs, outputs);
}

} // namespace kiln
