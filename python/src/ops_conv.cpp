// Convolutions, channels last as MLX.
#include "kiln_py.h"

namespace kiln::py {

namespace {

// An int or a tuple of n ints, as MLX's conv arguments.
template <size_t N>
std::vector<int> ints(const std::variant<int, std::vector<int>>& v,
                      const char* op, const char* what) {
  if (auto* i = std::get_if<int>(&v)) return std::vector<int>(N, *i);
  auto& l = std::get<std::vector<int>>(v);
  if (l.size() != N) {
    throw nb::value_error((std::string("[") + op + "] " + what + " needs " +
                           std::to_string(N) + " values, got " +
                           std::to_string(l.size()) + ".")
                              .c_str());
  }
  return l;
}

using IntOrInts = std::variant<int, std::vector<int>>;

std::pair<int, int> p2(const IntOrInts& v, const char* op, const char* w) {
  auto l = ints<2>(v, op, w);
  return {l[0], l[1]};
}
std::tuple<int, int, int> p3(const IntOrInts& v, const char* op,
                             const char* w) {
  auto l = ints<3>(v, op, w);
  return {l[0], l[1], l[2]};
}

std::vector<int> as_list(const IntOrInts& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  return std::get<std::vector<int>>(v);
}

} // namespace

void init_ops_conv(nb::module_& m) {
  m.def(
      "conv1d",
      [](ArrayLike in, ArrayLike w, int stride, int padding, int dilation,
         int groups, const StreamArg& s) {
        return conv1d(to_array(in), to_array(w), stride, padding, dilation,
                      groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "groups"_a = 1, "stream"_a = nb::none(),
      "1-d convolution of (N, L, C_in) with (C_out, K, C_in / groups).");
  m.def(
      "conv2d",
      [](ArrayLike in, ArrayLike w, const IntOrInts& stride,
         const IntOrInts& padding, const IntOrInts& dilation, int groups,
         const StreamArg& s) {
        return conv2d(to_array(in), to_array(w), p2(stride, "conv2d", "stride"),
                      p2(padding, "conv2d", "padding"),
                      p2(dilation, "conv2d", "dilation"), groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "groups"_a = 1, "stream"_a = nb::none(),
      "2-d convolution, channels last.");
  m.def(
      "conv3d",
      [](ArrayLike in, ArrayLike w, const IntOrInts& stride,
         const IntOrInts& padding, const IntOrInts& dilation, int groups,
         const StreamArg& s) {
        return conv3d(to_array(in), to_array(w), p3(stride, "conv3d", "stride"),
                      p3(padding, "conv3d", "padding"),
                      p3(dilation, "conv3d", "dilation"), groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "groups"_a = 1, "stream"_a = nb::none(),
      "3-d convolution, channels last.");
  m.def(
      "conv_transpose1d",
      [](ArrayLike in, ArrayLike w, int stride, int padding, int dilation,
         int output_padding, int groups, const StreamArg& s) {
        return conv_transpose1d(to_array(in), to_array(w), stride, padding,
                                dilation, output_padding, groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "output_padding"_a = 0, "groups"_a = 1,
      "stream"_a = nb::none(), "1-d transposed convolution.");
  m.def(
      "conv_transpose2d",
      [](ArrayLike in, ArrayLike w, const IntOrInts& stride,
         const IntOrInts& padding, const IntOrInts& dilation,
         const IntOrInts& output_padding, int groups, const StreamArg& s) {
        const char* op = "conv_transpose2d";
        return conv_transpose2d(
            to_array(in), to_array(w), p2(stride, op, "stride"),
            p2(padding, op, "padding"), p2(dilation, op, "dilation"),
            p2(output_padding, op, "output_padding"), groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "output_padding"_a = 0, "groups"_a = 1,
      "stream"_a = nb::none(), "2-d transposed convolution.");
  m.def(
      "conv_transpose3d",
      [](ArrayLike in, ArrayLike w, const IntOrInts& stride,
         const IntOrInts& padding, const IntOrInts& dilation,
         const IntOrInts& output_padding, int groups, const StreamArg& s) {
        const char* op = "conv_transpose3d";
        return conv_transpose3d(
            to_array(in), to_array(w), p3(stride, op, "stride"),
            p3(padding, op, "padding"), p3(dilation, op, "dilation"),
            p3(output_padding, op, "output_padding"), groups, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
      "output_padding"_a = 0, "groups"_a = 1,
      "stream"_a = nb::none(), "3-d transposed convolution.");
  m.def(
      "conv_general",
      [](ArrayLike in, ArrayLike w, const IntOrInts& stride, nb::handle padding,
         const IntOrInts& kernel_dilation, const IntOrInts& input_dilation,
         int groups, bool flip, const StreamArg& s) {
        std::vector<int> lo, hi;
        if (PyTuple_Check(padding.ptr()) && nb::len(padding) == 2 &&
            !PyLong_Check(nb::borrow<nb::tuple>(padding)[0].ptr())) {
          auto pr = cast_arg<std::pair<IntOrInts, IntOrInts>>(
              padding, "conv_general", "padding");
          lo = as_list(pr.first), hi = as_list(pr.second);
        } else {
          lo = as_list(cast_arg<IntOrInts>(padding, "conv_general", "padding"));
        }
        return conv_general(to_array(in), to_array(w), as_list(stride), lo, hi,
                            as_list(kernel_dilation), as_list(input_dilation),
                            groups, flip, to_sod(s));
      },
      "input"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0,
      "kernel_dilation"_a = 1, "input_dilation"_a = 1, "groups"_a = 1,
      "flip"_a = false, "stream"_a = nb::none(),
      "General convolution over 1 to 3 spatial dims.");
}

} // namespace kiln::py
