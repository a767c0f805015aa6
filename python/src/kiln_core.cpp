// The extension module kiln.core, assembled from one init per family.
#include "kiln_py.h"

NB_MODULE(core, m) {
  m.doc() = "kiln: lazy arrays and composable function transformations.";
  using namespace kiln::py;
  // Compiled and custom functions hold Python callables from C++, which
  // the garbage collector cannot see; cycles through them (a function's
  // globals) are normal and are freed at exit after nanobind's leak check.
  nb::set_leak_warnings(false);
  // A failed conversion deep inside a binding is a wrong argument type.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const nb::cast_error&) {
      PyErr_SetString(PyExc_TypeError,
                      "[kiln] an argument has the wrong type.");
    }
  });
  m.def(
      "_set_display_name",
      [](const std::string& name) { core_display_name() = name; }, "name"_a,
      "The module name that dtypes and messages print (kiln.mlx sets "
      "mlx.core).");
  init_dtype(m);
  init_device(m);
  init_memory(m);
  init_array(m);
  init_printing(m);
  init_ops_elementwise(m);
  init_ops_reduction(m);
  init_ops_shape(m);
  init_ops_creation(m);
  init_ops_indexing(m);
  init_ops_matmul(m);
  init_ops_quantized(m);
  init_ops_conv(m);
  init_ops_signal(m);
  init_transforms(m);
  init_trees(m);
  init_random(m);
  init_linalg(m);
  init_fft(m);
  init_fast(m);
  init_io(m);
  init_export(m);
  init_distributed(m);
}
