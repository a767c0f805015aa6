// Signal processing in kiln.core: windows, convolve, hadamard_transform.
#include "kiln_py.h"

namespace kiln::py {

void init_ops_signal(nb::module_& m) {
  using WindowFn = array (*)(int, StreamOrDevice);
  struct Window {
    const char* name;
    WindowFn fn;
    const char* doc;
  };
  for (const Window& w :
       {Window{"bartlett", bartlett, "The Bartlett (triangular) window."},
        Window{"blackman", blackman, "The Blackman window."},
        Window{"hamming", hamming, "The Hamming window."},
        Window{"hanning", hanning, "The Hann window."}}) {
    WindowFn fn = w.fn;
    m.def(
        w.name, [fn](int M, const StreamArg& s) { return fn(M, to_sod(s)); },
        "M"_a, nb::kw_only(), "stream"_a = nb::none(), w.doc);
  }
  m.def(
      "convolve",
      [](ArrayLike a, ArrayLike v, const std::string& mode,
         const StreamArg& s) {
        return convolve(to_array(a), to_array(v), mode, to_sod(s));
      },
      "a"_a, "v"_a, nb::arg("mode") = "full", nb::kw_only(),
      "stream"_a = nb::none(),
      "Discrete convolution of 1-d arrays (mode 'full', 'same' or "
      "'valid').");
  m.def(
      "hadamard_transform",
      [](ArrayLike a, std::optional<float> scale, const StreamArg& s) {
        return hadamard_transform(to_array(a), scale, to_sod(s));
      },
      "a"_a, "scale"_a = nb::none(), "stream"_a = nb::none(),
      "Walsh-Hadamard transform along the last axis, times scale (default "
      "1/sqrt(n)).");
}

} // namespace kiln::py
