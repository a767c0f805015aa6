// GPU gather and scatter (Gather, Scatter in every mode, take/put along an
// axis) against the CPU backend on random inputs: every dtype family and
// layout, one to three index arrays of mixed dtypes and layouts, negative
// and out-of-range indices (clamped by gathers, dropped by scatters),
// colliding indices in every mode, edge sizes and the error paths.
#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuIndexing = GpuTest;

using Fn = std::function<array(const std::vector<array>&, Device)>;

// Random integers in [lo, hi) of an index dtype (unsigned: |value|).
array indices(const Shape& shape, int lo, int hi, Dtype dt = int32) {
  return random_array(shape, dt, lo, hi);
}

// The layouts of a 2-d index or update array with its values kept
// (contiguous, transposed, strided slice) plus a broadcast row.
std::vector<std::pair<std::string, array>> index_layouts(const array& a) {
  return layouts(a);
}

TEST_F(GpuIndexing, TakeEveryDtypeAndLayout) {
  for (Dtype dt : all_dtypes()) {
    array src = random_array({37, 53}, dt, -20, 20);
    array idx = indices({6, 9}, -40, 40); // negative and out of range: clamp
    for (auto& [layout, a] : layouts(src)) {
      for (int axis : {0, 1}) {
        Fn fn = [&](const std::vector<array>& v, Device d) {
          return take(v[0], v[1], axis, d);
        };
        EXPECT_TRUE(same_on_devices(fn, {a, idx}, 0))
            << dtype_name(dt) << " " << layout << " axis " << axis;
      }
    }
  }
  // complex64 moves as raw 8-byte elements.
  array c = astype(random_array({9, 11}, float32), complex64);
  Fn fn = [](const std::vector<array>& v, Device d) {
    return take(v[0], v[1], 1, d);
  };
  EXPECT_TRUE(same_on_devices(fn, {c, indices({4}, -11, 11)}, 0));
}

TEST_F(GpuIndexing, GatherOneToThreeIndexArrays) {
  array src = random_array({6, 7, 8}, float32);
  struct Case {
    std::vector<int> axes;
    Shape slice;
  };
  std::vector<Case> cases = {
      {{0}, {1, 7, 8}},       // whole rows
      {{2}, {6, 7, 1}},       // a column of every matrix: strided slices
      {{0, 2}, {1, 3, 2}},    // partial slices, clamped starts
      {{0, 1, 2}, {1, 1, 1}}, // single elements
      {{2, 0}, {2, 7, 3}},    // axes out of order
  };
  for (auto& c : cases) {
    std::vector<array> idx;
    for (int ax : c.axes) {
      int dim = src.shape(ax);
      idx.push_back(indices({4, 5}, -dim - 2, dim + 2));
    }
    for (size_t variant = 0; variant < 3; ++variant) {
      std::vector<array> in = {src};
      for (size_t k = 0; k < idx.size(); ++k) {
        array i = idx[k];
        if (variant == 1 && k == 0) i = as_transposed(i);
        if (variant == 2 && k == 0) {
          i = broadcast_to(slice(i, {0, 0}, {1, 5}), {4, 5});
        }
        in.push_back(i);
      }
      Fn fn = [&](const std::vector<array>& v, Device d) {
        std::vector<array> ix(v.begin() + 1, v.end());
        return gather(v[0], ix, c.axes, c.slice, d);
      };
      EXPECT_TRUE(same_on_devices(fn, in, 0))
          << c.axes.size() << " index arrays, variant " << variant;
    }
  }
}

TEST_F(GpuIndexing, GatherMixedIndexDtypesAndTransposedSource) {
  array src = as_transposed(random_array({9, 10, 11}, bfloat16));
  array i0 = indices({3, 4}, -9, 9, int8);
  array i1 = indices({4}, 0, 10, uint16); // broadcast against (3, 4)
  array i2 = indices({3, 1}, -11, 11, int64);
  Fn fn = [](const std::vector<array>& v, Device d) {
    return gather(v[0], {v[1], v[2], v[3]}, {0, 1, 2}, {1, 2, 3}, d);
  };
  EXPECT_TRUE(same_on_devices(fn, {src, i0, i1, i2}, 0));
  for (Dtype it : int_dtypes()) {
    array i = indices({5}, 0, 9, it);
    Fn one = [](const std::vector<array>& v, Device d) {
      return gather(v[0], v[1], 0, {1, 10, 11}, d);
    };
    EXPECT_TRUE(same_on_devices(one, {src, i}, 0)) << dtype_name(it);
  }
}

TEST_F(GpuIndexing, GatherEdgeSizes) {
  array src = random_array({70001, 3}, float32);
  Fn rows = [](const std::vector<array>& v, Device d) {
    return take(v[0], v[1], 0, d);
  };
  // More than 2^16 index positions, one element, none.
  EXPECT_TRUE(same_on_devices(rows, {src, indices({70003}, -70001, 70001)}, 0));
  EXPECT_TRUE(same_on_devices(rows, {src, array(-1)}, 0));
  EXPECT_TRUE(same_on_devices(rows, {src, array({}, Shape{0}, int32)}, 0));
  // No index array: the slice itself.
  Fn none = [](const std::vector<array>& v, Device d) {
    return gather(v[0], std::vector<array>{}, {}, {5, 2}, d);
  };
  EXPECT_TRUE(same_on_devices(none, {src}, 0));
  // A slice of size 0.
  Fn empty_slice = [](const std::vector<array>& v, Device d) {
    return gather(v[0], v[1], 0, {1, 0}, d);
  };
  EXPECT_TRUE(same_on_devices(empty_slice, {src, indices({4}, 0, 9)}, 0));
}

using ScatterOp = array (*)(const array&, const std::vector<array>&,
                            const array&, const std::vector<int>&,
                            StreamOrDevice);

const std::vector<std::pair<const char*, ScatterOp>>& scatter_ops() {
  static const std::vector<std::pair<const char*, ScatterOp>> ops = {
      {"scatter", scatter},         {"scatter_add", scatter_add},
      {"scatter_prod", scatter_prod}, {"scatter_max", scatter_max},
      {"scatter_min", scatter_min}};
  return ops;
}

// Combining many updates in another order rounds differently; integers and
// max/min are exact.
double scatter_tolerance(const char* op, Dtype dt) {
  std::string o = op;
  if (o == "scatter" || o == "scatter_max" || o == "scatter_min") return 0;
  return issubdtype(dt, floating) ? 8 * tolerance(dt) : 0;
}

TEST_F(GpuIndexing, ScatterEveryModeAndDtypeWithCollisions) {
  for (Dtype dt : all_dtypes()) {
    // Products stay near 1 so nothing overflows.
    array a = random_array({12, 7}, dt, 0.5, 1.5);
    // 30 rows into 12: every row is hit several times; some indices are
    // negative, some out of range (dropped).
    array idx = indices({30}, -14, 14);
    array upd = random_array({30, 1, 7}, dt, 0.5, 1.5);
    for (auto& [name, op] : scatter_ops()) {
      Fn fn = [&, op = op](const std::vector<array>& v, Device d) {
        return op(v[0], {v[1]}, v[2], {0}, d);
      };
      EXPECT_TRUE(same_on_devices(fn, {a, idx, upd},
                                  scatter_tolerance(name, dt)))
          << name << " " << dtype_name(dt);
    }
  }
}

TEST_F(GpuIndexing, ScatterNaNAndSignedExtremes) {
  // NaN wins max and min either way, as on the CPU.
  array a = array({1.0f, NAN, -3.0f, 4.0f}, {4});
  array idx = array({0, 1, 2, 2, 3, 0}, {6});
  array upd = array({NAN, 2.0f, 5.0f, -7.0f, 4.0f, 3.0f}, {6, 1});
  for (Dtype dt : {float16, bfloat16, float32, float64}) {
    for (ScatterOp op : {ScatterOp(scatter_max), ScatterOp(scatter_min)}) {
      Fn fn = [&](const std::vector<array>& v, Device d) {
        return op(v[0], {v[1]}, v[2], {0}, d);
      };
      EXPECT_TRUE(same_on_devices(fn, {astype(a, dt), idx, astype(upd, dt)},
                                  0))
          << dtype_name(dt);
    }
  }
}

TEST_F(GpuIndexing, ScatterLayoutsOfIndicesAndUpdates) {
  array a = random_array({20, 9, 5}, float32);
  array i0 = indices({6, 4}, -20, 20);
  array i1 = indices({6, 4}, 0, 9, uint8);
  array upd = random_array({6, 4, 1, 1, 5}, float32);
  array upd_t = transpose(random_array({5, 1, 1, 4, 6}, float32));
  array upd_b = broadcast_to(random_array({1, 4, 1, 1, 5}, float32),
                             {6, 4, 1, 1, 5});
  for (auto& [iname, i0l] : index_layouts(i0)) {
    for (auto& [uname, u] : std::vector<std::pair<std::string, array>>{
             {"contiguous", upd},
             {"transposed", upd_t},
             {"broadcast", upd_b}}) {
      for (auto& [name, op] : scatter_ops()) {
        Fn fn = [&, op = op](const std::vector<array>& v, Device d) {
          return op(v[0], {v[1], v[2]}, v[3], {0, 1}, d);
        };
        EXPECT_TRUE(same_on_devices(fn, {a, i0l, i1, u},
                                    scatter_tolerance(name, float32)))
            << name << " indices " << iname << " updates " << uname;
      }
    }
  }
  // Slices wider than one along an indexed axis overlap partly: the last
  // position still wins each element.
  // Starts 0 and 1 along axis 1 with slices 8 wide.
  array wide = random_array({5, 3, 8}, float32);
  Fn overlap = [](const std::vector<array>& v, Device d) {
    return scatter(v[0], {v[1]}, v[2], {1}, d);
  };
  EXPECT_TRUE(same_on_devices(
      overlap, {random_array({4, 9}, float32), indices({5}, 0, 2), wide}, 0));
}

TEST_F(GpuIndexing, ScatterEdgeSizes) {
  // More than 2^16 updates into few rows (heavy collisions), and the
  // reverse; empty updates; a 0-d scatter of one slice.
  array a = random_array({70001, 2}, float32);
  array idx = indices({70001}, -70001, 70001);
  array upd = random_array({70001, 1, 2}, float32);
  for (auto& [name, op] : scatter_ops()) {
    Fn fn = [&, op = op](const std::vector<array>& v, Device d) {
      return op(v[0], {v[1]}, v[2], {0}, d);
    };
    EXPECT_TRUE(same_on_devices(fn, {a, idx, upd}, 1e-4)) << name;
    array few = random_array({3, 2}, float32);
    array fidx = indices({70001}, 0, 3);
    // About 23000 updates per element: sums round in another order.
    if (std::string(name) != "scatter_prod") {
      EXPECT_TRUE(same_on_devices(fn, {few, fidx, upd}, 1e-2)) << name;
    }
  }
  Fn fn = [](const std::vector<array>& v, Device d) {
    return scatter_add(v[0], {v[1]}, v[2], {0}, d);
  };
  EXPECT_TRUE(same_on_devices(
      fn, {a, array({}, Shape{0}, int32), array({}, Shape{0, 1, 2}, float32)},
      0));
  EXPECT_TRUE(same_on_devices(
      fn, {a, array(5), random_array({1, 2}, float32)}, 0));
}

TEST_F(GpuIndexing, AlongAxisEveryDtypeAndLayout) {
  for (Dtype dt : all_dtypes()) {
    array src = random_array({17, 23}, dt, 0.5, 1.5);
    for (auto& [layout, a] : layouts(src)) {
      for (int axis : {0, 1}) {
        Shape is = {17, 23};
        is[axis] = 11;
        array idx = indices(is, -30, 30);
        Fn take_fn = [&](const std::vector<array>& v, Device d) {
          return take_along_axis(v[0], v[1], axis, d);
        };
        EXPECT_TRUE(same_on_devices(take_fn, {a, idx}, 0))
            << dtype_name(dt) << " " << layout << " axis " << axis;
        // Colliding indices: the last wins, or all add up.
        array vals = random_array(is, dt, 0.5, 1.5);
        Fn put_fn = [&](const std::vector<array>& v, Device d) {
          return put_along_axis(v[0], v[1], v[2], axis, d);
        };
        EXPECT_TRUE(same_on_devices(put_fn, {a, idx, vals}, 0))
            << dtype_name(dt) << " " << layout << " axis " << axis;
        Fn add_fn = [&](const std::vector<array>& v, Device d) {
          return scatter_add_axis(v[0], v[1], v[2], axis, d);
        };
        EXPECT_TRUE(same_on_devices(add_fn, {a, idx, vals},
                                    scatter_tolerance("add", dt)))
            << dtype_name(dt) << " " << layout << " axis " << axis;
      }
    }
  }
}

TEST_F(GpuIndexing, AlongAxisBroadcastAndTransposedIndices) {
  array a = random_array({30, 40}, float32);
  array idx = as_transposed(indices({30, 7}, -40, 40, int64));
  array row = indices({1, 7}, 0, 40, uint32); // broadcast over rows
  array vals = random_array({30, 7}, float32);
  for (const array& i : {idx, row}) {
    Fn take_fn = [](const std::vector<array>& v, Device d) {
      return take_along_axis(v[0], v[1], 1, d);
    };
    EXPECT_TRUE(same_on_devices(take_fn, {a, i}, 0));
    Fn put_fn = [](const std::vector<array>& v, Device d) {
      return put_along_axis(v[0], v[1], v[2], 1, d);
    };
    EXPECT_TRUE(same_on_devices(put_fn, {a, i, vals}, 0));
  }
  // Flattened take_along_axis over more than 2^16 elements.
  array big = random_array({300, 300}, float32);
  Fn flat = [](const std::vector<array>& v, Device d) {
    return take_along_axis(v[0], v[1], d);
  };
  EXPECT_TRUE(same_on_devices(flat, {big, indices({90000}, -90000, 90000)}, 0));
}

TEST_F(GpuIndexing, GradientOfCollidingScatterMatchesTheCpu) {
  // The gradient goes to the update the forward kept, on both devices.
  array a = random_array({5, 3}, float32);
  array idx = array({1, 3, 1, 1, 4, 3}, {6});
  array upd = random_array({6, 1, 3}, float32);
  Fn fn = [&](const std::vector<array>& v, Device d) {
    auto f = [&](const std::vector<array>& p) {
      return std::vector<array>{scatter(p[0], {idx}, p[1], {0}, d)};
    };
    auto [out, grads] = vjp(f, {v[0], v[1]}, {ones({5, 3})});
    return concatenate({flatten(grads[0]), flatten(grads[1]),
                        flatten(out[0])},
                       0, d);
  };
  EXPECT_TRUE(same_on_devices(fn, {a, upd}, 0, false));
}

TEST_F(GpuIndexing, ScatterComplex64WithCollisions) {
  // Assignments move raw 8-byte elements and sums add each part
  // atomically on the GPU; products run on the CPU. Every row is hit
  // several times, some indices negative or out of range.
  array a = complex_random({12, 7}, 0.5, 1.5);
  array idx = indices({30}, -14, 14);
  array upd = complex_random({30, 1, 7}, 0.5, 1.5);
  for (auto& [name, op] : scatter_ops()) {
    std::string n = name;
    if (n == "scatter_max" || n == "scatter_min") continue;
    Fn fn = [&, op = op](const std::vector<array>& v, Device d) {
      return op(v[0], {v[1]}, v[2], {0}, d);
    };
    double tol = n == "scatter" ? 0 : 8 * tolerance(complex64);
    EXPECT_TRUE(same_on_devices(fn, {a, idx, upd}, tol)) << name;
    array at = as_transposed(complex_random({12, 7}, 0.5, 1.5));
    EXPECT_TRUE(same_on_devices(fn, {at, idx, upd}, tol))
        << name << " transposed";
  }
  // Along an axis: put_along_axis assigns, scatter_add_axis adds.
  array rows = indices({5, 7}, 0, 12);
  array vals = complex_random({5, 7}, -1, 1);
  Fn put = [](const std::vector<array>& v, Device d) {
    return put_along_axis(v[0], v[1], v[2], 0, d);
  };
  Fn add_axis = [](const std::vector<array>& v, Device d) {
    return scatter_add_axis(v[0], v[1], v[2], 0, d);
  };
  EXPECT_TRUE(same_on_devices(add_axis, {a, rows, vals},
                              8 * tolerance(complex64)));
  // Distinct rows per column, so which colliding assignment wins does not
  // matter.
  array distinct = slice(argsort(random_array({12, 7}, float32), 0),
                         {0, 0}, {5, 7});
  EXPECT_TRUE(same_on_devices(put, {a, distinct, vals}, 0));
}

TEST_F(GpuIndexing, ErrorsAndCpuCases) {
  array a = random_array({4, 5}, float32);
  EXPECT_THROW(take(a, random_array({3}, float32), 0, Device::gpu),
               std::invalid_argument);
  array c = astype(a, complex64);
  EXPECT_THROW(scatter_max(c, {array({0})}, random_array({1, 1, 5}, float32),
                           {0}, Device::gpu),
               std::invalid_argument);
}

} // namespace
} // namespace kiln::test
