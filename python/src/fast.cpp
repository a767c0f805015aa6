// kiln.core.fast: fused normalization, rotary embedding and attention, and
// custom CUDA kernels.
#include "kiln_py.h"

namespace kiln::py {

namespace {

// A custom kernel's arguments from Python: arrays or scalars, shapes as
// sequences of ints, dtypes, and template arguments as (name, value) pairs
// with a bool, int or Dtype value.
std::vector<array> kernel_inputs(nb::handle inputs) {
  std::vector<array> out;
  for (nb::handle h : inputs) out.push_back(to_array(h));
  return out;
}

std::vector<Shape> kernel_shapes(nb::handle shapes, const char* op) {
  std::vector<Shape> out;
  for (nb::handle h : shapes) {
    out.push_back(to_shape(cast_arg<ShapeArg>(h, op, "output_shapes")));
  }
  return out;
}

std::vector<Dtype> kernel_dtypes(nb::handle dtypes, const char* op) {
  std::vector<Dtype> out;
  for (nb::handle h : dtypes) {
    out.push_back(cast_arg<Dtype>(h, op, "output_dtypes"));
  }
  return out;
}

fast::TemplateArgs template_args(nb::handle t) {
  fast::TemplateArgs out;
  if (t.is_none()) return out;
  for (nb::handle item : t) {
    auto pair = cast_arg<std::pair<std::string, nb::object>>(
        item, "cuda_kernel", "template (a list of (name, value) pairs)");
    nb::handle v = pair.second;
    if (PyBool_Check(v.ptr())) {
      out.emplace_back(pair.first, nb::cast<bool>(v));
    } else if (PyLong_Check(v.ptr())) {
      out.emplace_back(pair.first, cast_arg<int>(v, "cuda_kernel", "template"));
    } else if (nb::isinstance<Dtype>(v)) {
      out.emplace_back(pair.first, nb::cast<Dtype>(v));
    } else {
      throw nb::type_error(("[cuda_kernel] template argument '" + pair.first +
                            "' must be a bool, an int or a Dtype, not " +
                            py_type_name(v) + ".")
                               .c_str());
    }
  }
  return out;
}

nb::list as_list(const std::vector<array>& arrays) {
  nb::list l;
  for (const array& a : arrays) l.append(a);
  return l;
}

const char* cuda_kernel_doc = R"(A custom CUDA kernel from the body of its function.

The signature is generated from the inputs (``const T* name``, and
``name_shape``, ``name_strides`` and ``name_ndim`` where the body uses them)
and the outputs (``T* name``); template arguments become ``using`` and
``constexpr`` lines at the top of the body; ``header`` goes before the
function. NVRTC compiles it at its first evaluation, cached in memory and
on disk like kiln's own kernels. Returns a callable taking, by keyword:
inputs, output_shapes, output_dtypes, grid (in threads, not blocks),
threadgroup, template, init_value, verbose and stream; it returns the list
of outputs. GPU only; no gradient or batching rule.)";

const char* precompiled_doc = R"(Runs the kernel ``name`` of a precompiled module
(PTX text or a cubin, as bytes). Its parameters are the inputs' pointers,
the outputs' pointers, then the scalars (bool, int or float). The grid is in
threads, not blocks.)";

} // namespace

void init_fast(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fast", "Fused ops for transformers.");
  m.def(
      "rms_norm",
      [](ArrayLike x, ArrayLike weight, float eps, const StreamArg& s) {
        return fast::rms_norm(to_array(x), opt_array(weight), eps, to_sod(s));
      },
      "x"_a, "weight"_a.none(), "eps"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Root-mean-square normalization.");
  m.def(
      "layer_norm",
      [](ArrayLike x, ArrayLike weight, nb::handle bias, float eps,
         const StreamArg& s) {
        return fast::layer_norm(to_array(x), opt_array(weight), opt_array(bias),
                                eps, to_sod(s));
      },
      "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, nb::kw_only(),
      "stream"_a = nb::none(), "Layer normalization over the last axis.");
  m.def(
      "rope",
      [](ArrayLike a, int dims, bool traditional, std::optional<float> base,
         float scale, nb::handle offset, nb::handle freqs, const StreamArg& s) {
        array x = to_array(a);
        if (PyLong_Check(offset.ptr())) {
          return fast::rope(x, dims, traditional, base, scale,
                            cast_arg<int>(offset, "rope", "offset"),
                            opt_array(freqs), to_sod(s));
        }
        return fast::rope(x, dims, traditional, base, scale, to_array(offset),
                          opt_array(freqs), to_sod(s));
      },
      "a"_a, "dims"_a, nb::kw_only(), "traditional"_a, "base"_a.none(),
      "scale"_a, "offset"_a, "freqs"_a = nb::none(), "stream"_a = nb::none(),
      "Rotary position embedding.");
  m.def(
      "scaled_dot_product_attention",
      [](ArrayLike q, ArrayLike k, ArrayLike v, float scale, nb::handle mask,
         nb::handle sinks, bool force_fused, const StreamArg& s) {
        std::string mode;
        std::optional<array> mask_arr;
        if (PyUnicode_Check(mask.ptr())) {
          mode = nb::cast<std::string>(mask);
        } else if (!mask.is_none()) {
          mode = "array";
          mask_arr = to_array(mask);
        }
        return fast::scaled_dot_product_attention(
            to_array(q), to_array(k), to_array(v), scale, mode, mask_arr,
            opt_array(sinks), force_fused, to_sod(s));
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "force_fused"_a = false, "stream"_a = nb::none(),
      "softmax(scale * q @ k^T + mask) @ v.");
  m.def(
      "cuda_kernel",
      [](const std::string& name, const std::vector<std::string>& input_names,
         const std::vector<std::string>& output_names,
         const std::string& source, const std::string& header,
         bool ensure_row_contiguous, int shared_memory) {
        auto kernel =
            fast::cuda_kernel(name, input_names, output_names, source, header,
                              ensure_row_contiguous, shared_memory);
        return nb::cpp_function(
            [kernel](nb::handle inputs, nb::handle output_shapes,
                     nb::handle output_dtypes, std::tuple<int, int, int> grid,
                     std::tuple<int, int, int> threadgroup, nb::handle tmpl,
                     std::optional<float> init_value, bool verbose,
                     const StreamArg& s) {
              const char* op = "cuda_kernel";
              return as_list(kernel(
                  kernel_inputs(inputs), kernel_shapes(output_shapes, op),
                  kernel_dtypes(output_dtypes, op), grid, threadgroup,
                  template_args(tmpl), init_value, verbose, to_sod(s)));
            },
            nb::kw_only(), "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
            "grid"_a, "threadgroup"_a, "template"_a = nb::none(),
            "init_value"_a = nb::none(), "verbose"_a = false,
            "stream"_a = nb::none(), "Runs the kernel: the list of outputs.");
      },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a,
      "header"_a = "", "ensure_row_contiguous"_a = true,
      "shared_memory"_a = 0, cuda_kernel_doc);
  // MLX's metal_kernel off Apple silicon: the kernel object is made, and
  // running it raises (so a program that only defines one still imports).
  m.def(
      "metal_kernel",
      [](const std::string& name, const std::vector<std::string>&,
         const std::vector<std::string>&, const std::string&,
         const std::string&, bool, bool, nb::handle) {
        return nb::cpp_function(
            [name](nb::handle, nb::handle, nb::handle, nb::handle, nb::handle,
                   nb::handle, nb::handle, bool, const StreamArg&) -> nb::list {
              throw std::runtime_error(
                  "[metal_kernel] kiln has no Metal backend (kernel '" + name +
                  "'); fast.cuda_kernel runs CUDA kernels on NVIDIA GPUs.");
            },
            nb::kw_only(), "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
            "grid"_a, "threadgroup"_a, "template"_a = nb::none(),
            "init_value"_a = nb::none(), "verbose"_a = false,
            "stream"_a = nb::none(), "Raises: kiln has no Metal backend.");
      },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a,
      "header"_a = "", "ensure_row_contiguous"_a = true,
      "atomic_outputs"_a = false, "compile_options"_a = nb::none(),
      "A custom Metal kernel, as MLX's off Apple silicon: running it raises.");
  m.def(
      "precompiled_cuda_kernel",
      [](const std::string& name, nb::bytes compiled_source, nb::handle inputs,
         nb::handle output_shapes, nb::handle output_dtypes, nb::handle scalars,
         std::tuple<int, int, int> grid, std::tuple<int, int, int> threadgroup,
         int shared_memory, std::optional<float> init_value,
         bool ensure_row_contiguous, const StreamArg& s) {
        const char* op = "precompiled_cuda_kernel";
        std::vector<fast::ScalarArg> values;
        for (nb::handle v : scalars) {
          if (PyBool_Check(v.ptr())) {
            values.push_back(nb::cast<bool>(v));
          } else if (PyLong_Check(v.ptr())) {
            values.push_back(cast_arg<int>(v, op, "scalars"));
          } else if (PyFloat_Check(v.ptr())) {
            values.push_back(nb::cast<float>(v));
          } else {
            throw nb::type_error(
                ("[precompiled_cuda_kernel] a scalar must be a bool, an int "
                 "or a float, not " + py_type_name(v) + ".")
                    .c_str());
          }
        }
        return as_list(fast::precompiled_cuda_kernel(
            name,
            std::string(static_cast<const char*>(compiled_source.data()),
                        compiled_source.size()),
            kernel_inputs(inputs), kernel_shapes(output_shapes, op),
            kernel_dtypes(output_dtypes, op), values, grid, threadgroup,
            shared_memory, init_value, ensure_row_contiguous, to_sod(s)));
      },
      nb::kw_only(), "name"_a, "compiled_source"_a, "inputs"_a,
      "output_shapes"_a, "output_dtypes"_a, "scalars"_a, "grid"_a,
      "threadgroup"_a, "shared_memory"_a = 0, "init_value"_a = nb::none(),
      "ensure_row_contiguous"_a = false, "stream"_a = nb::none(),
      precompiled_doc);
  m.def(
      "cross_entropy",
      [](ArrayLike logits, ArrayLike targets, const StreamArg& s) {
        return fast::cross_entropy(to_array(logits), to_array(targets),
                                   to_sod(s));
      },
      "logits"_a, "targets"_a, nb::kw_only(), "stream"_a = nb::none(),
      "logsumexp(logits, -1) - logits[..., targets], in float32.");
  m.def(
      "gated_delta_update",
      [](ArrayLike q, ArrayLike k, ArrayLike v, ArrayLike gamma, ArrayLike beta,
         nb::handle initial_state, nb::handle mask, const StreamArg& s) {
        auto [out, state] = fast::gated_delta_update(
            to_array(q), to_array(k), to_array(v), to_array(gamma),
            to_array(beta), opt_array(initial_state), opt_array(mask),
            to_sod(s));
        nb::list l;
        l.append(out);
        l.append(state);
        return l;
      },
      "q"_a, "k"_a, "v"_a, "gamma"_a, "beta"_a, "initial_state"_a = nb::none(),
      "mask"_a = nb::none(), "stream"_a = nb::none(),
      "The gated delta rule over time: [output, final state].");
}

} // namespace kiln::py
