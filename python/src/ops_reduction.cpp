// Reductions, arg-reductions, scans, softmax and sorting.
#include "kiln_py.h"

namespace kiln::py {

namespace {

using AxesFn = array (*)(const array&, const std::vector<int>&, bool,
                         StreamOrDevice);
using AllFn = array (*)(const array&, bool, StreamOrDevice);
using ScanFn = array (*)(const array&, int, bool, bool, StreamOrDevice);
using ScanAllFn = array (*)(const array&, bool, bool, StreamOrDevice);

} // namespace

void init_ops_reduction(nb::module_& m) {
  struct R {
    const char* name;
    AxesFn axes;
    AllFn all;
  };
  const R reductions[] = {
      {"sum", &kiln::sum, &kiln::sum},
      {"prod", &kiln::prod, &kiln::prod},
      {"mean", &kiln::mean, &kiln::mean},
      {"max", &kiln::max, &kiln::max},
      {"min", &kiln::min, &kiln::min},
      {"all", &kiln::all, &kiln::all},
      {"any", &kiln::any, &kiln::any},
      {"logsumexp", &kiln::logsumexp, &kiln::logsumexp},
  };
  for (const R& r : reductions) {
    m.def(
        r.name,
        [ax = r.axes, all = r.all](ArrayLike a, const AxisArg& axis,
                                   bool keepdims, const StreamArg& s) {
          array x = to_array(a);
          if (!axis) return all(x, keepdims, to_sod(s));
          return ax(x, axes_of(axis, x.ndim()), keepdims, to_sod(s));
        },
        "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
        "stream"_a = nb::none(),
        (std::string("The ") + r.name +
         " over the given axes (all axes when axis is None).")
            .c_str());
  }

  m.def(
      "var",
      [](ArrayLike a, const AxisArg& axis, bool keepdims, int ddof,
         const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return var(x, keepdims, ddof, to_sod(s));
        return var(x, axes_of(axis, x.ndim()), keepdims, ddof, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0,
      nb::kw_only(), "stream"_a = nb::none(), "Variance over the axes.");
  m.def(
      "std",
      [](ArrayLike a, const AxisArg& axis, bool keepdims, int ddof,
         const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return kiln::std(x, keepdims, ddof, to_sod(s));
        return kiln::std(x, axes_of(axis, x.ndim()), keepdims, ddof, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0,
      nb::kw_only(), "stream"_a = nb::none(),
      "Standard deviation over the axes.");

  m.def(
      "argmax",
      [](ArrayLike a, std::optional<int> axis, bool keepdims,
         const StreamArg& s) {
        array x = to_array(a);
        return axis ? argmax(x, *axis, keepdims, to_sod(s))
                    : argmax(x, keepdims, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), "Index of the first maximum (uint32).");
  m.def(
      "argmin",
      [](ArrayLike a, std::optional<int> axis, bool keepdims,
         const StreamArg& s) {
        array x = to_array(a);
        return axis ? argmin(x, *axis, keepdims, to_sod(s))
                    : argmin(x, keepdims, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), "Index of the first minimum (uint32).");

  // cumsum and cumprod also take the dtype to accumulate in.
  struct S {
    const char* name;
    ScanFn axis;
    ScanAllFn all;
  };
  const S typed_scans[] = {{"cumsum", &cumsum, &cumsum},
                           {"cumprod", &cumprod, &cumprod}};
  for (const S& sc : typed_scans) {
    m.def(
        sc.name,
        [ax = sc.axis, all = sc.all](
            ArrayLike a, std::optional<int> axis, bool reverse, bool inclusive,
            std::optional<Dtype> dtype, const StreamArg& s) {
          array x = to_array(a);
          if (dtype) x = astype(x, *dtype, to_sod(s));
          auto out = axis ? ax(x, *axis, reverse, inclusive, to_sod(s))
                          : all(x, reverse, inclusive, to_sod(s));
          // An explicit dtype is also the result's (kiln otherwise widens
          // small integers, as sum does).
          return dtype ? astype(out, *dtype, to_sod(s)) : out;
        },
        "a"_a, "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false,
        "inclusive"_a = true, "dtype"_a = nb::none(), "stream"_a = nb::none(),
        (std::string("The cumulative ") + (sc.name + 3) +
         " along an axis (of the flattened array when axis is None), after "
         "casting to dtype when given.")
            .c_str());
  }
  m.attr("cumulative_sum") = m.attr("cumsum");
  m.attr("cumulative_prod") = m.attr("cumprod");
  const S scans[] = {{"cummax", &cummax, &cummax},
                     {"cummin", &cummin, &cummin},
                     {"logcumsumexp", &logcumsumexp, &logcumsumexp}};
  for (const S& sc : scans) {
    m.def(
        sc.name,
        [ax = sc.axis, all = sc.all](ArrayLike a, std::optional<int> axis,
                                     bool reverse, bool inclusive,
                                     const StreamArg& s) {
          array x = to_array(a);
          return axis ? ax(x, *axis, reverse, inclusive, to_sod(s))
                      : all(x, reverse, inclusive, to_sod(s));
        },
        "a"_a, "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false,
        "inclusive"_a = true, "stream"_a = nb::none(),
        (std::string("The running ") + sc.name +
         " along an axis (of the flattened array when axis is None).")
            .c_str());
  }

  m.def(
      "median",
      [](ArrayLike a, const AxisArg& axis, bool keepdims, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return median(x, keepdims, to_sod(s));
        return median(x, axes_of(axis, x.ndim()), keepdims, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), "The median over the axes (all by default).");
  m.def(
      "minmax",
      [](ArrayLike a, const AxisArg& axis, bool keepdims, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return minmax(x, keepdims, to_sod(s));
        return minmax(x, axes_of(axis, x.ndim()), keepdims, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "The minimum and the maximum over the axes, in that order.");
  m.def(
      "count_nonzero",
      [](ArrayLike a, const AxisArg& axis, bool keepdims, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return count_nonzero(x, keepdims, to_sod(s));
        return count_nonzero(x, axes_of(axis, x.ndim()), keepdims, to_sod(s));
      },
      "a"_a, nb::kw_only(), "axis"_a = nb::none(), "keepdims"_a = false,
      "stream"_a = nb::none(), "Number of nonzero elements (int32).");
  m.def(
      "trace",
      [](ArrayLike a, int offset, int axis1, int axis2,
         std::optional<Dtype> dtype, const StreamArg& s) {
        return trace(to_array(a), offset, axis1, axis2, dtype, to_sod(s));
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1,
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Sum along a diagonal of the 2-d sub-arrays over axis1 and axis2.");

  m.def(
      "softmax",
      [](ArrayLike a, const AxisArg& axis, bool precise, const StreamArg& s) {
        array x = to_array(a);
        if (!axis) return softmax(x, precise, to_sod(s));
        return softmax(x, axes_of(axis, x.ndim()), precise, to_sod(s));
      },
      "a"_a, "axis"_a = nb::none(), nb::kw_only(), "precise"_a = false,
      "stream"_a = nb::none(), "Softmax over the axes.");

  m.def(
      "sort",
      [](ArrayLike a, std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a);
        return axis ? sort(x, *axis, to_sod(s)) : sort(x, to_sod(s));
      },
      "a"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Values sorted along axis (the flattened array when None).");
  m.def(
      "argsort",
      [](ArrayLike a, std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a);
        return axis ? argsort(x, *axis, to_sod(s)) : argsort(x, to_sod(s));
      },
      "a"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Positions that sort a along axis (uint32).");
  m.def(
      "partition",
      [](ArrayLike a, int kth, std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a);
        return axis ? partition(x, kth, *axis, to_sod(s))
                    : partition(x, kth, to_sod(s));
      },
      "a"_a, "kth"_a, "axis"_a.none() = -1, nb::kw_only(),
      "stream"_a = nb::none(), "Partition a around its kth element.");
  m.def(
      "argpartition",
      [](ArrayLike a, int kth, std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a);
        return axis ? argpartition(x, kth, *axis, to_sod(s))
                    : argpartition(x, kth, to_sod(s));
      },
      "a"_a, "kth"_a, "axis"_a.none() = -1, nb::kw_only(),
      "stream"_a = nb::none(), "Positions that partition a.");
  m.def(
      "topk",
      [](ArrayLike a, int k, std::optional<int> axis, const StreamArg& s) {
        array x = to_array(a);
        return axis ? topk(x, k, *axis, to_sod(s)) : topk(x, k, to_sod(s));
      },
      "a"_a, "k"_a, "axis"_a.none() = -1, nb::kw_only(),
      "stream"_a = nb::none(), "The k largest values along axis (unsorted).");
  m.def(
      "searchsorted",
      [](ArrayLike seq, ArrayLike values, const std::string& side,
         const StreamArg& s) {
        array x = to_array(seq);
        return searchsorted(x, to_array_weak(values, x.dtype()), side,
                            to_sod(s));
      },
      "sorted_sequence"_a, "values"_a, "side"_a = "left", nb::kw_only(),
      "stream"_a = nb::none(),
      "Positions (uint32) that keep the 1-d sorted_sequence sorted when "
      "each value is inserted: left counts elements less than the value, "
      "right those less than or equal.");
  m.def(
      "unique",
      [](ArrayLike a, int size, bool return_index, bool return_inverse,
         bool return_counts, nb::handle fill_value,
         const StreamArg& s) -> nb::object {
        array x = to_array(a);
        std::optional<array> fill;
        if (!fill_value.is_none()) fill = to_array_weak(fill_value, x.dtype());
        auto out = unique(x, size, return_index, return_inverse, return_counts,
                          fill, to_sod(s));
        if (out.size() == 1) return nb::cast(out[0]);
        nb::list items;
        for (auto& o : out) items.append(nb::cast(o));
        return nb::tuple(items);
      },
      "a"_a, "size"_a, "return_index"_a = false, "return_inverse"_a = false,
      "return_counts"_a = false, "fill_value"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(),
      "The sorted unique elements of the flattened a, exactly size of them "
      "(truncated, or padded with fill_value), and optionally the index of "
      "each first occurrence, the inverse and the counts.");
}

} // namespace kiln::py
