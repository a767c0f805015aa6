// Compiled::eval_cpu: a fused region runs as one generated kernel (see
// jit_source.h, jit_compiler.h). Layout follows the elementwise drivers: when
// every non-scalar input shares one contiguous layout, the flat kernel runs
// over data_size and the outputs inherit that layout (an input buffer may be
// donated); otherwise a strided kernel writes row-major outputs.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "kiln/backend/cpu/jit_compiler.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/env.h"
#include "kiln/core/layout.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/compiled.h"

namespace kiln {

namespace {

using detail::JitRole;

std::atomic<bool>& compile_check_flag() {
  static std::atomic<bool> on{env::flag("KILN_COMPILE_CHECK", false)};
  return on;
}

/** Elements per chunk below which a fused loop runs on one thread. */
constexpr size_t jit_grain = 1 << 14;

// The strided kernel's inputs that step by one or by zero along the
// innermost collapsed axis (a row-major input, one broadcast along that
// axis) get roles that spell the stride into the loop.
void specialize_inner_strides(detail::CompiledLayout& lay) {
  if (lay.spec.contiguous) return;
  for (size_t k = 0; k < lay.spec.roles.size(); ++k) {
    if (lay.spec.roles[k] != JitRole::strided || lay.strides[k].empty()) {
      continue;
    }
    int64_t inner = lay.strides[k].back();
    if (inner == 1) lay.spec.roles[k] = JitRole::inner_unit;
    if (inner == 0) lay.spec.roles[k] = JitRole::inner_repeat;
  }
}

// Runs the region through a generated kernel; false when none is available.
bool eval_jit(const Compiled& c, const std::vector<array>& inputs,
              std::vector<array>& outputs) {
  const Shape& shape = outputs[0].shape();
  if (outputs[0].size() == 0) {
    for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
    return true;
  }
  auto& constants = c.constants();
  detail::CompiledLayout lay = detail::compiled_layout(c, inputs, shape);
  specialize_inner_strides(lay);
  const detail::JitKernelSpec& spec = lay.spec;
  if (!detail::jit_supports(spec)) return false;
  // A region too deep for the kernel's index array falls back without
  // compiling anything.
  const Shape& cshape = lay.shape;
  if (!spec.contiguous &&
      cshape.size() > static_cast<size_t>(detail::jit_max_dims)) {
    return false;
  }
  detail::JitKernel fn = detail::jit_kernel(spec);
  if (!fn) return false;

  std::vector<const void*> in_ptrs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    in_ptrs.push_back(constants[k] ? nullptr : inputs[k].data<void>());
  }
  std::vector<void*> out_ptrs;
  if (!spec.contiguous) {
    for (auto& o : outputs) {
      o.set_data(allocator::malloc(o.nbytes()));
      out_ptrs.push_back(o.data<void>());
    }
    int ndim = static_cast<int>(cshape.size());
    std::vector<int64_t> dims(cshape.begin(), cshape.end());
    std::vector<int64_t> strides;
    for (size_t k = 0; k < inputs.size(); ++k) {
      strides.insert(strides.end(), lay.strides[k].begin(),
                     lay.strides[k].end());
    }
    int64_t inner = dims.back();
    size_t rows = outputs[0].size() / static_cast<size_t>(inner);
    size_t grain = std::max<size_t>(1, jit_grain / static_cast<size_t>(inner));
    detail::parallel_for(rows, grain, [&](size_t b, size_t e) {
      fn(in_ptrs.data(), out_ptrs.data(), dims.data(), strides.data(), ndim,
         static_cast<int64_t>(b), static_cast<int64_t>(e));
    });
    return true;
  }

  // Flat: outputs take the shared layout.
  int layout = lay.layout_input;
  const Strides& ostr = lay.out_strides;
  const Layout& common = lay.flat;
  std::vector<bool> donated(inputs.size(), false);
  for (auto& o : outputs) {
    bool done = false;
    for (size_t k = 0; k < inputs.size() && !done; ++k) {
      const array& in = inputs[k];
      // Candidates share the layout: the array inputs, or in the all-scalar
      // case the layout input itself.
      bool shares = spec.roles[k] == JitRole::vector ||
                    (static_cast<int>(k) == layout &&
                     spec.roles[k] == JitRole::scalar && in.shape() == shape);
      if (shares && !donated[k] && in.itemsize() == o.itemsize() &&
          in.is_donatable()) {
        o.copy_shared_buffer(in, ostr, common.flags, common.data_size);
        donated[k] = done = true;
      }
    }
    if (!done) {
      o.set_data(allocator::malloc(common.data_size * o.itemsize()),
                 common.data_size, ostr, common.flags);
    }
    out_ptrs.push_back(o.data<void>());
  }
  detail::parallel_for(common.data_size, jit_grain, [&](size_t b, size_t e) {
    fn(in_ptrs.data(), out_ptrs.data(), nullptr, nullptr, 0,
       static_cast<int64_t>(b), static_cast<int64_t>(e));
  });
  return true;
}

// Elements of a (any layout) as doubles, in row-major order.
std::vector<double> values(const array& a) {
  std::vector<double> out;
  out.reserve(a.size());
  if (a.size() == 0) return out;
  dispatch_type(a.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (!is_complex_v<T>) {
      const T* p = a.data<T>();
      std::vector<int32_t> idx(a.ndim(), 0);
      int64_t off = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        out.push_back(static_cast<double>(static_cast<compute_t<T>>(p[off])));
        for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
          off += a.strides()[d];
          if (++idx[d] < a.shape()[d]) break;
          off -= a.strides()[d] * a.shape()[d];
          idx[d] = 0;
        }
      }
    }
  });
  return out;
}

// KILN_COMPILE_CHECK: the fused outputs against the unfused ones.
void check_outputs(const Compiled& c, const std::vector<array>& got,
                   const std::vector<array>& want) {
  for (size_t o = 0; o < got.size(); ++o) {
    Dtype d = got[o].dtype();
    double rtol = 0, atol = 0;
    if (d == float16) rtol = 1e-2, atol = 1e-3;
    if (d == bfloat16) rtol = 5e-2, atol = 1e-2;
    if (d == float32) rtol = 1e-4, atol = 1e-6;
    if (d == float64) rtol = 1e-9, atol = 1e-12;
    auto g = values(got[o]), w = values(want[o]);
    for (size_t i = 0; i < g.size(); ++i) {
      bool same = g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])) ||
                  std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
      if (same) continue;
      std::ostringstream os;
      os << "[compile] KILN_COMPILE_CHECK: fused region ";
      c.print(os);
      auto& op = c.ops()[c.outputs()[o]];
      os << " output " << o << " (" << op.primitive->name() << ", "
         << dtype_name(d) << ") differs from its unfused ops at element " << i
         << ": got " << g[i] << ", expected " << w[i] << ".";
      throw std::runtime_error(os.str());
    }
  }
}

} // namespace

void detail::set_compile_check(bool on) { compile_check_flag() = on; }

void Compiled::eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  std::vector<array> reference;
  if (compile_check_flag()) {
    // Before the kernel runs: it may take over an input's buffer.
    reference = run_unfused(inputs);
  }
  if (!eval_jit(*this, inputs, outputs)) {
    auto outs = reference.empty() ? run_unfused(inputs) : reference;
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].copy_shared_buffer(outs[i]);
    }
    return;
  }
  if (!reference.empty()) check_outputs(*this, outputs, reference);
}

} // namespace kiln
