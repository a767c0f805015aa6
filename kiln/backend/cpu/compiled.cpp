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
#include "kiln/core/layout.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/compiled.h"
#include "kiln/transforms/eval.h"

namespace kiln {

namespace {

using detail::JitRole;

std::atomic<bool>& compile_check_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("KILN_COMPILE_CHECK");
    return v && *v && std::string(v) != "0";
  }()};
  return on;
}

/** Elements per chunk below which a fused loop runs on one thread. */
constexpr size_t jit_grain = 1 << 14;

// Strides of in viewed at the region's shape (a broadcast view).
Strides region_strides(const array& in, const Shape& shape) {
  if (in.shape() == shape) return in.strides();
  Strides st(shape.size(), 0);
  size_t off = shape.size() - in.ndim();
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] != 1) st[off + i] = in.strides()[i];
  }
  return st;
}

// Merges dimensions every operand walks contiguously; drops size-1 ones.
Shape collapse(const Shape& shape, std::vector<Strides>& st) {
  Shape out;
  std::vector<Strides> ost(st.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !out.empty();
    for (size_t k = 0; k < st.size() && merge; ++k) {
      merge = ost[k].back() == st[k][i] * shape[i];
    }
    for (size_t k = 0; k < st.size(); ++k) {
      if (merge) {
        ost[k].back() = st[k][i];
      } else {
        ost[k].push_back(st[k][i]);
      }
    }
    if (merge) {
      out.back() *= shape[i];
    } else {
      out.push_back(shape[i]);
    }
  }
  if (out.empty()) {
    out.push_back(1);
    for (auto& s : ost) s.push_back(0);
  }
  st = std::move(ost);
  return out;
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
  detail::JitKernelSpec spec{&c, {}, {}, true};
  std::vector<Strides> st(inputs.size());
  int layout = -1;      // first non-scalar input: the flat layout
  int first_array = -1; // first input that is not a baked constant
  Layout common{1, {true, true, true}};
  for (size_t k = 0; k < inputs.size(); ++k) {
    spec.input_dtypes.push_back(inputs[k].dtype());
    if (constants[k]) {
      spec.roles.push_back(JitRole::constant);
      continue;
    }
    if (first_array < 0) first_array = static_cast<int>(k);
    st[k] = region_strides(inputs[k], shape);
    Layout l = inputs[k].shape() == shape
                   ? Layout{inputs[k].data_size(), inputs[k].flags()}
                   : layout_of(shape, st[k]);
    if (l.data_size == 1) {
      spec.roles.push_back(JitRole::scalar);
      continue;
    }
    spec.roles.push_back(JitRole::vector);
    if (!l.flags.contiguous) {
      spec.contiguous = false;
    } else if (layout < 0) {
      layout = static_cast<int>(k);
      common = l;
    } else if (st[k] != st[layout] || l.data_size != common.data_size) {
      spec.contiguous = false;
    }
  }
  if (!spec.contiguous) {
    for (auto& r : spec.roles) {
      if (r == JitRole::vector) r = JitRole::strided;
    }
  }
  if (!detail::jit_supports(spec)) return false;

  // Collapse before building, so a region too deep for the kernel's index
  // array falls back without compiling anything.
  Shape cshape;
  std::vector<Strides> cst;
  if (!spec.contiguous) {
    cst = st;
    cst.push_back(row_major_strides(shape)); // outputs, kept row-major
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (spec.roles[k] != JitRole::strided) cst[k].assign(shape.size(), 0);
    }
    cshape = collapse(shape, cst);
    if (cshape.size() > static_cast<size_t>(detail::jit_max_dims)) return false;
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
      strides.insert(strides.end(), cst[k].begin(), cst[k].end());
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

  // Flat: outputs take the shared layout (all scalars: one element).
  if (layout < 0) layout = first_array;
  Strides ostr = layout >= 0 ? st[layout] : Strides(shape.size(), 0);
  if (layout < 0 || spec.roles[layout] == JitRole::scalar) {
    common = layout_of(shape, ostr);
    common.data_size = 1;
  }
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
    reference = unfused(inputs);
    eval(reference);
  }
  if (!eval_jit(*this, inputs, outputs)) {
    auto outs = reference.empty() ? unfused(inputs) : reference;
    eval(outs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      outputs[i].copy_shared_buffer(outs[i]);
    }
    return;
  }
  if (!reference.empty()) check_outputs(*this, outputs, reference);
}

} // namespace kiln
