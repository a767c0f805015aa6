// GPU slice updates, concatenation, views of another dtype and dynamic
// windows against the CPU backend: every dtype family and layout of source
// and update, each axis, starts read on the host (a view, as on the CPU)
// and made on the GPU (read by the kernel: a row-major copy), edge sizes.
#include "cuda/gpu_fixture.h"

namespace kiln::test {
namespace {

using GpuSlicing = GpuTest;

using Fn = std::function<array(const std::vector<array>&, Device)>;

TEST_F(GpuSlicing, SliceUpdateEveryDtypeAndLayout) {
  for (Dtype dt : all_dtypes()) {
    array src = random_array({20, 30}, dt, -20, 20);
    array upd = random_array({5, 10}, dt, -20, 20);
    for (auto& [sname, s] : layouts(src)) {
      for (auto& [uname, u] : layouts(upd)) {
        Fn fn = [](const std::vector<array>& v, Device d) {
          return slice_update(v[0], v[1], {2, 3}, {12, 23}, {2, 2}, d);
        };
        EXPECT_TRUE(same_on_devices(fn, {s, u}, 0))
            << dtype_name(dt) << " src " << sname << " update " << uname;
      }
    }
  }
}

TEST_F(GpuSlicing, SliceUpdateConvertsAndBroadcasts) {
  array src = random_array({8, 9, 10}, bfloat16);
  Fn fn = [](const std::vector<array>& v, Device d) {
    return slice_update(v[0], v[1], {1, 0, 2}, {7, 9, 10}, {3, 4, 1}, d);
  };
  // int32 update into bfloat16, a broadcast row, a 0-d value.
  EXPECT_TRUE(same_on_devices(fn, {src, random_array({2, 3, 8}, int32, -9, 9)},
                              0));
  EXPECT_TRUE(same_on_devices(fn, {src, random_array({1, 8}, float32)}, 0));
  EXPECT_TRUE(same_on_devices(fn, {src, array(2.5f)}, 0));
  // Empty window, one element, and more than 2^16 rows.
  Fn empty = [](const std::vector<array>& v, Device d) {
    return slice_update(v[0], v[1], Shape{3, 0, 0}, Shape{3, 9, 10}, d);
  };
  EXPECT_TRUE(same_on_devices(empty, {src, array({}, Shape{0, 9, 10},
                                                 bfloat16)},
                              0));
  Fn one = [](const std::vector<array>& v, Device d) {
    return slice_update(v[0], v[1], Shape{0}, Shape{1}, d);
  };
  EXPECT_TRUE(same_on_devices(one, {random_array({1}, int64), array(7)}, 0));
  Fn rows = [](const std::vector<array>& v, Device d) {
    return slice_update(v[0], v[1], Shape{1, 1}, Shape{70001, 3}, d);
  };
  EXPECT_TRUE(same_on_devices(rows, {random_array({70003, 3}, float32),
                                     as_transposed(random_array(
                                         {70000, 2}, float32))},
                              0));
}

TEST_F(GpuSlicing, ConcatenateEachAxisMixedLayoutsAndDtypes) {
  for (Dtype dt : all_dtypes()) {
    array a = random_array({6, 7}, dt, -20, 20);
    auto la = layouts(a);
    for (int axis : {0, 1, -1}) {
      for (size_t i = 0; i < la.size(); ++i) {
        const array& x = la[i].second;
        const array& y = la[(i + 1) % la.size()].second;
        Fn fn = [&](const std::vector<array>& v, Device d) {
          return concatenate({v[0], v[1], v[2]}, axis, d);
        };
        EXPECT_TRUE(same_on_devices(fn, {x, y, x}, 0))
            << dtype_name(dt) << " axis " << axis << " " << la[i].first;
      }
    }
  }
  // Promotion on write; an empty part; 3-d along the middle axis.
  Fn fn = [](const std::vector<array>& v, Device d) {
    return concatenate({v[0], v[1], v[2]}, 1, d);
  };
  EXPECT_TRUE(same_on_devices(
      fn,
      {random_array({4, 3, 5}, float16),
       as_transposed(random_array({4, 0, 5}, int32)),
       as_transposed(random_array({4, 6, 5}, int8, -9, 9))},
      tolerance(float32)));
  Fn rows = [](const std::vector<array>& v, Device d) {
    return concatenate({v[0], v[1]}, 0, d);
  };
  EXPECT_TRUE(same_on_devices(rows, {random_array({40000, 3}, float32),
                                     random_array({30001, 3}, float32)},
                              0));
}

TEST_F(GpuSlicing, ViewAsAnotherDtype) {
  array f = random_array({6, 8}, float32);
  for (auto& [layout, x] : layouts(f)) {
    for (Dtype to : {int32, uint8, float16, int64}) {
      Fn fn = [to = to](const std::vector<array>& v, Device d) {
        return view(v[0], to, d);
      };
      EXPECT_TRUE(same_on_devices(fn, {x}, 0))
          << layout << " as " << dtype_name(to);
    }
  }
  Fn fn = [](const std::vector<array>& v, Device d) {
    return view(v[0], uint16, d);
  };
  EXPECT_TRUE(same_on_devices(fn, {as_transposed(random_array({5, 3},
                                                              bfloat16))},
                              0));
}

// The start made on the device running fn (a GPU buffer on the GPU).
array start_on(const array& start, Device d) {
  return add(start, zeros_like(start), d);
}

TEST_F(GpuSlicing, DynamicSliceHostAndDeviceStarts) {
  for (Dtype dt : {float32, bfloat16, int8, int64, bool_}) {
    array src = random_array({11, 13, 4}, dt, -9, 9);
    // Built on the CPU, so the "host" cases really hold host buffers.
    for (auto& start :
         {array({2, 5}), array({-3, 20}), array({-40, -1}),
          astype(array({1, 2}), uint8, Device::cpu),
          astype(array({7, -2}), int64, Device::cpu)}) {
      eval(start);
      ASSERT_FALSE(start.on_device());
      // A host start: a view, the CPU's layout.
      Fn host = [](const std::vector<array>& v, Device d) {
        return slice(v[0], v[1], {0, 1}, {4, 6, 4}, d);
      };
      EXPECT_TRUE(same_on_devices(host, {src, start}, 0)) << dtype_name(dt);
      // A start made on the GPU: a row-major copy (strides differ).
      Fn device = [](const std::vector<array>& v, Device d) {
        return slice(v[0], start_on(v[1], d), {0, 1}, {4, 6, 4}, d);
      };
      EXPECT_TRUE(same_on_devices(device, {src, start}, 0, false))
          << dtype_name(dt);
      Fn device_t = [](const std::vector<array>& v, Device d) {
        return slice(transpose(v[0], {2, 0, 1}), start_on(v[1], d), {1, 2},
                     {3, 5, 2}, d);
      };
      EXPECT_TRUE(same_on_devices(device_t, {src, start}, 0, false))
          << dtype_name(dt);
    }
  }
  // A 0-d start, and a window larger than 2^16 elements.
  Fn one = [](const std::vector<array>& v, Device d) {
    return slice(v[0], start_on(v[1], d), {0}, {70000, 2}, d);
  };
  EXPECT_TRUE(same_on_devices(one, {random_array({70005, 2}, float32),
                                    array(3)},
                              0, false));
}

TEST_F(GpuSlicing, DynamicSliceUpdateHostAndDeviceStarts) {
  // complex64 moves as raw 8-byte elements.
  for (Dtype dt : {float16, float64, int32, uint16, bool_, complex64}) {
    array src = dt == complex64 ? complex_random({9, 10, 3}, -9, 9)
                                : random_array({9, 10, 3}, dt, -9, 9);
    array upd = dt == complex64 ? complex_random({3, 4, 3}, -9, 9)
                                : random_array({3, 4, 3}, dt, -9, 9);
    for (auto& start : {array({2, 5}), array({-2, 9}), array({-30, -1})}) {
      for (auto& [uname, u] : std::vector<std::pair<std::string, array>>{
               {"contiguous", upd},
               {"transposed", as_transposed(upd)},
               {"broadcast", broadcast_to(slice(upd, {0, 0, 0}, {1, 4, 3}),
                                          {3, 4, 3})}}) {
        Fn host = [](const std::vector<array>& v, Device d) {
          return slice_update(v[0], v[1], v[2], {0, 1}, d);
        };
        EXPECT_TRUE(same_on_devices(host, {src, u, start}, 0))
            << dtype_name(dt) << " " << uname;
        Fn device = [](const std::vector<array>& v, Device d) {
          return slice_update(v[0], v[1], start_on(v[2], d), {0, 1}, d);
        };
        EXPECT_TRUE(same_on_devices(device, {src, u, start}, 0))
            << dtype_name(dt) << " " << uname;
      }
    }
  }
  // An update of another dtype (converted on write) and a 0-d update.
  array src = random_array({6, 7}, float32);
  Fn fn = [](const std::vector<array>& v, Device d) {
    return slice_update(v[0], v[1], start_on(v[2], d), {1}, d);
  };
  EXPECT_TRUE(same_on_devices(
      fn, {src, random_array({6, 2}, int16, -9, 9), array(4)}, 0));
  EXPECT_TRUE(same_on_devices(fn, {src, array(1.5f), array(-1)}, 0));
}

} // namespace
} // namespace kiln::test
