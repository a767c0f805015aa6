// Function transformations over flat lists of arrays. The Python layer
// (kiln/_transforms.py) flattens pytrees with kiln.utils and calls these,
// so there is one pytree implementation.
#include <set>

#include "kiln_py.h"

namespace kiln::py {

namespace {

// A Python callable held by C++ closures that may be destroyed on another
// thread (a graph freed by a background evaluation): take the GIL to drop it.
struct PyCallable {
  nb::object f;
  explicit PyCallable(nb::object o) : f(std::move(o)) {}
  ~PyCallable() {
    if (!Py_IsInitialized() || finalizing()) {
      f.release(); // the interpreter is going away: leak rather than crash
      return;
    }
    nb::gil_scoped_acquire gil;
    f.reset();
  }
  static bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
  }
};

std::vector<array> to_list(nb::handle r, const char* what) {
  if (nb::isinstance<array>(r)) return {nb::cast<array>(r)};
  try {
    return nb::cast<std::vector<array>>(r);
  } catch (nb::cast_error&) {
    throw nb::type_error((std::string(what) +
                          " must return an array or a list of arrays, got " +
                          py_type_name(r) + ".")
                             .c_str());
  }
}

Fn wrap_fn(nb::object f, const char* what) {
  auto h = std::make_shared<PyCallable>(std::move(f));
  return [h, what](const std::vector<array>& in) {
    nb::gil_scoped_acquire gil;
    return to_list(h->f(nb::cast(in)), what);
  };
}

CapturedState wrap_state(nb::handle pair) {
  auto t = nb::cast<nb::tuple>(pair);
  auto get = std::make_shared<PyCallable>(nb::borrow(t[0]));
  auto set = std::make_shared<PyCallable>(nb::borrow(t[1]));
  CapturedState st;
  st.get = [get]() {
    nb::gil_scoped_acquire gil;
    return to_list(get->f(), "compile state");
  };
  st.set = [set](const std::vector<array>& v) {
    nb::gil_scoped_acquire gil;
    set->f(nb::cast(v));
  };
  return st;
}

// A compiled flat function, callable from Python.
struct Compiled {
  Fn fn;
  std::vector<array> operator()(const std::vector<array>& in) const {
    return fn(in);
  }
};

} // namespace

void init_transforms(nb::module_& m) {
  m.def(
      "_eval", [](const std::vector<array>& a) { eval_released(a); },
      "arrays"_a);
  m.def(
      "_depends",
      [](const std::vector<array>& inputs, const std::vector<array>& deps) {
        return depends(inputs, deps);
      },
      "inputs"_a, "dependencies"_a);
  m.def(
      "_graph_to_dot",
      [](const std::vector<array>& outputs,
         const std::vector<std::pair<std::string, array>>& names) {
        return graph_to_dot(outputs, names);
      },
      "outputs"_a, "names"_a);
  m.def(
      "_array_buffer_size",
      [](const std::vector<array>& arrays) {
        // Each distinct buffer once, at the size it was allocated with.
        std::set<void*> seen;
        size_t total = 0;
        for (auto& a : arrays) {
          if (!a.is_available()) {
            throw nb::value_error(
                ("[get_array_buffer_size] arrays must be evaluated first; "
                 "got an unevaluated " +
                 detail::describe(a) + ".")
                    .c_str());
          }
          void* p = a.buffer().raw();
          if (p == nullptr || !seen.insert(p).second) continue;
          // A GPU buffer is not the host allocator's: its elements' bytes.
          total += a.on_device() ? a.data_size() * a.itemsize()
                                 : allocator::size_of(a.buffer());
        }
        return total;
      },
      "arrays"_a);
  m.def(
      "_async_eval",
      [](const std::vector<array>& a) {
        nb::gil_scoped_release release;
        async_eval(a);
      },
      "arrays"_a);
  m.def(
      "_vjp_flat",
      [](nb::object f, const std::vector<array>& primals,
         const std::vector<array>& cotangents) {
        return vjp(wrap_fn(f, "vjp: the function"), primals, cotangents);
      },
      "fun"_a, "primals"_a, "cotangents"_a);
  m.def(
      "_jvp_flat",
      [](nb::object f, const std::vector<array>& primals,
         const std::vector<array>& tangents) {
        return jvp(wrap_fn(f, "jvp: the function"), primals, tangents);
      },
      "fun"_a, "primals"_a, "tangents"_a);
  m.def(
      "_value_and_grad_flat",
      [](nb::object f, const std::vector<array>& primals,
         const std::vector<int>& argnums) {
        return value_and_grad(wrap_fn(f, "value_and_grad: the function"),
                              argnums)(primals);
      },
      "fun"_a, "primals"_a, "argnums"_a);
  m.def(
      "_vmap_flat",
      [](nb::object f, const std::vector<array>& inputs,
         const std::vector<int>& in_axes) {
        return vmap(wrap_fn(f, "vmap: the function"), in_axes)(inputs);
      },
      "fun"_a, "inputs"_a, "in_axes"_a);
  m.def(
      "_checkpoint_flat",
      [](nb::object f, const std::vector<array>& inputs) {
        return checkpoint(wrap_fn(f, "checkpoint: the function"))(inputs);
      },
      "fun"_a, "inputs"_a);
  m.def(
      "_custom_function_flat",
      [](nb::object f, nb::object fvjp, nb::object fjvp, nb::object fvmap,
         const std::vector<array>& inputs) {
        std::optional<VjpFn> v;
        std::optional<JvpFn> j;
        std::optional<VmapFn> vm;
        if (!fvjp.is_none()) {
          auto h = std::make_shared<PyCallable>(fvjp);
          v = [h](const std::vector<array>& p, const std::vector<array>& c,
                  const std::vector<array>& o) {
            nb::gil_scoped_acquire gil;
            return to_list(h->f(nb::cast(p), nb::cast(c), nb::cast(o)),
                           "the custom vjp");
          };
        }
        if (!fjvp.is_none()) {
          auto h = std::make_shared<PyCallable>(fjvp);
          j = [h](const std::vector<array>& p, const std::vector<array>& t,
                  const std::vector<int>& argnums) {
            nb::gil_scoped_acquire gil;
            return to_list(h->f(nb::cast(p), nb::cast(t), nb::cast(argnums)),
                           "the custom jvp");
          };
        }
        if (!fvmap.is_none()) {
          auto h = std::make_shared<PyCallable>(fvmap);
          vm = [h](const std::vector<array>& in, const std::vector<int>& ax) {
            nb::gil_scoped_acquire gil;
            auto r = nb::cast<std::pair<nb::object, std::vector<int>>>(
                h->f(nb::cast(in), nb::cast(ax)));
            return std::make_pair(to_list(r.first, "the custom vmap"),
                                  r.second);
          };
        }
        return custom_function(wrap_fn(f, "custom_function: the function"), v,
                               j, vm)(inputs);
      },
      "fun"_a, "vjp"_a.none(), "jvp"_a.none(), "vmap"_a.none(), "inputs"_a);

  nb::class_<Compiled>(m, "_Compiled")
      .def("__call__", &Compiled::operator(), "inputs"_a);
  m.def(
      "_compile_flat",
      [](nb::object f, bool shapeless, nb::list inputs, nb::list outputs) {
        CompileOptions o;
        o.shapeless = shapeless;
        for (nb::handle h : inputs) o.inputs.push_back(wrap_state(h));
        for (nb::handle h : outputs) o.outputs.push_back(wrap_state(h));
        return Compiled{compile(wrap_fn(f, "compile: the function"), o)};
      },
      "fun"_a, "shapeless"_a, "inputs"_a, "outputs"_a);
  m.def("disable_compile", &disable_compile,
        "Turn compilation off: compiled functions run eagerly.");
  m.def("enable_compile", &enable_compile, "Turn compilation back on.");
  m.def("_compile_enabled", &compile_enabled);
}

} // namespace kiln::py
