// export_function, import_function, exporter and FunctionExporter, with
// MLX's signatures: example inputs are positional and keyword arrays, or one
// tuple/list of arrays and/or one dict of them.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "kiln/io/function_export.h"
#include "kiln_py.h"

namespace kiln::py {

namespace {

std::pair<Args, Kwargs> export_inputs(const nb::args& args,
                                      const nb::kwargs& kwargs,
                                      const std::string& prefix) {
  auto fail = [&]() {
    throw nb::value_error(
        (prefix + " Inputs can either be a variable number of positional and "
                  "keyword arrays or a single tuple and/or dictionary of "
                  "arrays.")
            .c_str());
  };
  auto as_arrays = [&](nb::handle seq, Args& out) {
    for (auto x : seq) {
      if (!nb::isinstance<array>(x)) fail();
      out.push_back(nb::cast<array>(x));
    }
  };
  auto as_kwargs = [&](nb::handle d, Kwargs& out) {
    for (auto [k, v] : nb::cast<nb::dict>(d)) {
      if (!nb::isinstance<nb::str>(k) || !nb::isinstance<array>(v)) fail();
      out.insert_or_assign(nb::cast<std::string>(k), nb::cast<array>(v));
    }
  };
  Args a;
  Kwargs kw;
  as_kwargs(kwargs, kw);
  if (args.size() == 0) return {a, kw};
  if (nb::isinstance<array>(args[0])) {
    as_arrays(args, a);
    return {a, kw};
  }
  if (kwargs.size() != 0 || args.size() > 2) fail();
  auto seq_or_dict = [&](nb::handle x, bool dict_ok) {
    if (nb::isinstance<nb::tuple>(x) || nb::isinstance<nb::list>(x)) {
      as_arrays(x, a);
    } else if (dict_ok && nb::isinstance<nb::dict>(x)) {
      as_kwargs(x, kw);
    } else {
      fail();
    }
  };
  if (args.size() == 1) {
    seq_or_dict(args[0], true);
  } else {
    if (!(nb::isinstance<nb::tuple>(args[0]) || nb::isinstance<nb::list>(args[0])) ||
        !nb::isinstance<nb::dict>(args[1])) {
      fail();
    }
    as_arrays(args[0], a);
    as_kwargs(args[1], kw);
  }
  return {a, kw};
}

ExportedFn wrap(nb::callable fun) {
  return [fun = std::move(fun)](const Args& args, const Kwargs& kwargs) {
    nb::gil_scoped_acquire gil;
    nb::dict kw;
    for (auto& [k, v] : kwargs) kw[nb::str(k.c_str())] = nb::cast(v);
    nb::list pos;
    for (auto& a : args) pos.append(nb::cast(a));
    nb::object out = fun(*nb::tuple(pos), **kw);
    std::vector<array> outs;
    if (nb::isinstance<array>(out)) {
      outs.push_back(nb::cast<array>(out));
      return outs;
    }
    if (nb::isinstance<nb::tuple>(out) || nb::isinstance<nb::list>(out)) {
      for (auto x : out) {
        if (!nb::isinstance<array>(x)) {
          throw nb::value_error(
              "[export_function] Outputs can be either a single array, a "
              "tuple, or a list of arrays.");
        }
        outs.push_back(nb::cast<array>(x));
      }
      return outs;
    }
    throw nb::value_error(
        "[export_function] Outputs can be either a single array, a tuple, or "
        "a list of arrays.");
  };
}

// MLX's callback form: one call per part of the graph, in MLX's order.
void call_back(nb::handle callback, const ExportedGraph& g) {
  auto arrays = [](const std::vector<ExportedArray>& v) {
    nb::list l;
    for (auto& a : v) {
      nb::list shape;
      for (auto d : a.shape) shape.append(d);
      l.append(nb::make_tuple(a.name, nb::tuple(shape), nb::cast(a.dtype)));
    }
    return l;
  };
  auto record = [&](const char* type, const char* key, nb::object value) {
    nb::dict d;
    d["type"] = type;
    d[key] = value;
    return d;
  };
  callback(record("inputs", "inputs", arrays(g.inputs)));
  nb::list keywords;
  for (auto& [k, n] : g.keyword_inputs) keywords.append(nb::make_tuple(k, n));
  callback(record("keyword_inputs", "keywords", keywords));
  callback(record("outputs", "outputs", arrays(g.outputs)));
  nb::list constants;
  for (auto& [n, c] : g.constants) constants.append(nb::make_tuple(n, nb::cast(c)));
  callback(record("constants", "constants", constants));
  for (auto& p : g.primitives) {
    nb::dict d;
    d["type"] = "primitive";
    d["inputs"] = arrays(p.inputs);
    d["outputs"] = arrays(p.outputs);
    d["name"] = p.name;
    nb::list args;
    for (auto& v : p.arguments) {
      std::visit(
          [&](auto&& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              nb::list l;
              for (auto i : x) l.append(i);
              args.append(l);
            } else {
              args.append(nb::cast(x));
            }
          },
          v);
    }
    d["arguments"] = args;
    callback(d);
  }
}

// The exporter keeps the function alive; the context manager closes it.
struct PyExporter {
  FunctionExporter exporter;
  nb::object fun;
};

} // namespace

void init_export(nb::module_& m) {
  m.def(
      "export_function",
      [](nb::object file, nb::callable fun, nb::args args, bool shapeless,
         std::optional<nb::object> metadata, nb::kwargs kwargs) {
        std::string meta;
        if (metadata && !metadata->is_none()) {
          if (!nb::isinstance<nb::str>(*metadata)) {
            throw nb::type_error("[export_function] metadata must be a str.");
          }
          meta = nb::cast<std::string>(*metadata);
        }
        if (!nb::isinstance<nb::str>(file)) {
          if (!PyCallable_Check(file.ptr())) {
            throw nb::type_error(
                "[export_function] the first argument is a file path or a "
                "callback.");
          }
          if (!meta.empty()) {
            throw nb::value_error(
                "[export_function] The metadata argument is only supported "
                "when exporting to a file, not when using a callback.");
          }
          auto [a, kw] = export_inputs(args, kwargs, "[export_function]");
          call_back(file, export_graph(wrap(std::move(fun)), a, kw, shapeless));
          return;
        }
        auto [a, kw] = export_inputs(args, kwargs, "[export_function]");
        export_function(nb::cast<std::string>(file), wrap(std::move(fun)), a,
                        kw, shapeless, meta);
      },
      nb::arg("file_or_callback"), nb::arg("fun"), nb::arg("args"),
      nb::kw_only(), nb::arg("shapeless") = false,
      nb::arg("metadata") = nb::none(), nb::arg("kwargs"),
      nb::sig("def export_function(file_or_callback: str | Callable, fun: "
              "Callable, *args, shapeless: bool = False, metadata: str | None "
              "= None, **kwargs) -> None"),
      "Export a function traced on example inputs to a file in MLX's "
      ".mlxfn layout. Read it back with import_function, from Python or C++.");

  m.def(
      "import_function",
      [](const std::string& file, bool return_metadata) -> nb::object {
        auto imported = import_function(file);
        std::string meta = imported.metadata();
        auto fn = nb::cpp_function(
            [imported = std::move(imported)](nb::args args, nb::kwargs kwargs) {
              auto [a, kw] =
                  export_inputs(args, kwargs, "[import_function::call]");
              std::vector<array> outs;
              {
                nb::gil_scoped_release release;
                outs = imported(a, kw);
              }
              nb::list l;
              for (auto& o : outs) l.append(nb::cast(o));
              return nb::tuple(l);
            });
        if (return_metadata) return nb::make_tuple(fn, meta);
        return fn;
      },
      nb::arg("file"), nb::arg("return_metadata") = false,
      nb::sig("def import_function(file: str, return_metadata: bool = False) "
              "-> Callable | tuple[Callable, str]"),
      "Import a function exported by export_function (kiln's or MLX's). "
      "It returns a tuple of arrays.");

  nb::class_<PyExporter>(m, "FunctionExporter",
                         "Exports several traces of one function to a file; "
                         "made by exporter().")
      .def("close", [](PyExporter& e) { e.exporter.close(); })
      .def("__enter__", [](nb::object self) { return self; })
      .def(
          "__exit__",
          [](PyExporter& e, nb::args) { e.exporter.close(); })
      .def("__call__", [](PyExporter& e, nb::args args, nb::kwargs kwargs) {
        auto [a, kw] = export_inputs(args, kwargs, "[export_function]");
        e.exporter(a, kw);
      });

  m.def(
      "exporter",
      [](const std::string& file, nb::callable fun, bool shapeless,
         std::optional<std::string> metadata) {
        return PyExporter{
            kiln::exporter(file, wrap(fun), shapeless, metadata.value_or("")),
            fun};
      },
      nb::arg("file"), nb::arg("fun"), nb::kw_only(),
      nb::arg("shapeless") = false, nb::arg("metadata") = nb::none(),
      "A FunctionExporter that writes every trace it is called with to file.");
}

} // namespace kiln::py
