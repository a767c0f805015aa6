// Print options: set_printoptions / get_printoptions / printoptions (a
// context manager restoring the previous options), as MLX.
#include "kiln_py.h"

namespace kiln::py {

namespace {
struct PrintOptionsContext {
  PrintOptions options;
  PrintOptions previous;
};
} // namespace

void init_printing(nb::module_& m) {
  nb::class_<PrintOptions>(m, "PrintOptions",
                           "Options for printing arrays (precision: digits "
                           "after the point, -1 for the default).")
      .def(nb::init<>())
      .def_rw("precision", &PrintOptions::precision)
      .def("__repr__", [](const PrintOptions& o) {
        return "PrintOptions(precision=" + std::to_string(o.precision) + ")";
      });
  m.def(
      "set_printoptions", [](int precision) { set_print_options({precision}); },
      "precision"_a = -1,
      "Set the number of digits printed after the decimal point (-1 for the "
      "default).");
  m.def("get_printoptions", &get_print_options, "The current print options.");
  nb::class_<PrintOptionsContext>(m, "_PrintOptionsContext")
      .def("__enter__",
           [](PrintOptionsContext& c) {
             c.previous = get_print_options();
             set_print_options(c.options);
             return c.options;
           })
      .def("__exit__", [](PrintOptionsContext& c, nb::args) {
        set_print_options(c.previous);
      });
  m.def(
      "printoptions",
      [](int precision) {
        return PrintOptionsContext{{precision}, get_print_options()};
      },
      "precision"_a = -1,
      "A context manager that sets the print options for its block.");
}

} // namespace kiln::py
