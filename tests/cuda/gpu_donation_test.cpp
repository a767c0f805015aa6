// GPU buffer donation: an input that nothing else holds becomes the output
// of an elementwise op, a fused region, a scatter or a slice update (no new
// buffer, no copy), and the values stay those of the CPU backend. Inputs
// that are still held, or that were read by the host, are never written.
#include "cuda/gpu_fixture.h"
#include "kiln/transforms/compile.h"

namespace kiln::test {
namespace {

using GpuDonation = GpuTest;

// The same random values made on the GPU (never read by the host, so its
// buffer can be donated) and on the CPU (the reference), and the GPU
// buffer's pointer.
struct Twin {
  array gpu, cpu;
  void* ptr;
};
Twin twin(const Shape& shape, Dtype dt = float32) {
  array r = random_array(shape, dt);
  Twin t{add(r, array(0.5, dt), Device::gpu), add(r, array(0.5, dt), Device::cpu),
         nullptr};
  eval({t.gpu, t.cpu});
  t.ptr = t.gpu.buffer().ptr;
  return t;
}

::testing::AssertionResult close(const array& a, const array& b) {
  return all_close(to_doubles(a), to_doubles(b), 1e-6, 1e-6);
}

TEST_F(GpuDonation, UnaryAndBinaryWriteOverAReleasedInput) {
  Twin x = twin({64, 33});
  array y = exp(x.gpu, Device::gpu);
  x.gpu = array(0.0f); // the graph now holds the only reference
  y.eval();
  EXPECT_EQ(y.buffer().ptr, x.ptr);
  EXPECT_TRUE(close(y, exp(x.cpu, Device::cpu)));

  Twin a = twin({64, 33});
  array b = random_array({64, 33}, float32);
  array c = multiply(b, a.gpu, Device::gpu); // either operand can donate
  a.gpu = array(0.0f);
  c.eval();
  EXPECT_EQ(c.buffer().ptr, a.ptr);
  EXPECT_TRUE(close(c, multiply(b, a.cpu, Device::cpu)));

  // Same itemsize, other dtype: float32 -> int32 writes over it too.
  Twin f = twin({50});
  array i = astype(multiply(f.gpu, array(100.0f), Device::gpu), int32,
                   Device::gpu);
  f.gpu = array(0.0f);
  i.eval();
  EXPECT_EQ(to_doubles(i),
            to_doubles(astype(multiply(f.cpu, array(100.0f)), int32,
                              Device::cpu)));
}

TEST_F(GpuDonation, HeldOrHostReadInputsAreNotWritten) {
  Twin x = twin({128});
  array y = exp(x.gpu, Device::gpu); // x is still held here
  y.eval();
  EXPECT_NE(y.buffer().ptr, x.ptr);
  EXPECT_TRUE(close(x.gpu, x.cpu));

  // Read by the host: its host copy would go stale, so no donation.
  Twin z = twin({128});
  EXPECT_TRUE(close(z.gpu, z.cpu));
  array w = negative(z.gpu, Device::gpu);
  z.gpu = array(0.0f);
  w.eval();
  EXPECT_NE(w.buffer().ptr, z.ptr);
  EXPECT_TRUE(close(w, negative(z.cpu, Device::cpu)));
}

TEST_F(GpuDonation, DifferentItemsizeOrLayoutAllocates) {
  Twin x = twin({16, 8});
  array y = astype(x.gpu, float16, Device::gpu);
  x.gpu = array(0.0f);
  y.eval();
  EXPECT_NE(y.buffer().ptr, x.ptr);

  // A broadcast input's buffer is smaller than the output.
  Twin r = twin({1, 8});
  array s = add(broadcast_to(r.gpu, {16, 8}), random_array({16, 8}, float32),
                Device::gpu);
  r.gpu = array(0.0f);
  s.eval();
  EXPECT_NE(s.buffer().ptr, r.ptr);
}

TEST_F(GpuDonation, FusedRegionWritesOverAnInput) {
  auto f = [](const std::vector<array>& v) {
    return std::vector<array>{add(multiply(tanh(v[0]), v[1]), array(1.0f))};
  };
  auto cf = compile(f);
  DefaultDeviceScope scope(Device::gpu);
  Twin x = twin({1000});
  array y = random_array({1000}, float32);
  auto out = cf({x.gpu, y});
  x.gpu = array(0.0f);
  out[0].eval();
  EXPECT_EQ(out[0].buffer().ptr, x.ptr);
  array want = [&] {
    DefaultDeviceScope cpu(Device::cpu);
    return f({x.cpu, y})[0];
  }();
  EXPECT_TRUE(close(out[0], want));
}

TEST_F(GpuDonation, FusedRowsRegionWritesOverAFullInput) {
  // (x - mean) * w with a per-row mean and a per-column w: the rows kernel.
  // The released x becomes the output; the broadcasts never do.
  auto f = [](const std::vector<array>& v) {
    return std::vector<array>{multiply(subtract(v[0], v[1]), v[2])};
  };
  auto cf = compile(f);
  DefaultDeviceScope scope(Device::gpu);
  Twin x = twin({96, 40});
  array mean = random_array({96, 1}, float32);
  array w = random_array({40}, float32);
  auto out = cf({x.gpu, mean, w});
  x.gpu = array(0.0f);
  out[0].eval();
  EXPECT_EQ(out[0].buffer().ptr, x.ptr);
  EXPECT_EQ(out[0].strides(), (Strides{40, 1}));
  array want = [&] {
    DefaultDeviceScope cpu(Device::cpu);
    return f({x.cpu, mean, w})[0];
  }();
  EXPECT_TRUE(close(out[0], want));

  // A released per-row input is read by every thread of its row: never
  // written over.
  Twin m = twin({96, 1});
  array full = random_array({96, 40}, float32);
  auto out2 = cf({full, m.gpu, w});
  m.gpu = array(0.0f);
  out2[0].eval();
  EXPECT_NE(out2[0].buffer().ptr, m.ptr);
  array want2 = [&] {
    DefaultDeviceScope cpu(Device::cpu);
    return f({full, m.cpu, w})[0];
  }();
  EXPECT_TRUE(close(out2[0], want2));
}

TEST_F(GpuDonation, ScatterAndSliceUpdateStartFromTheInput) {
  Twin a = twin({10, 10});
  array upd = random_array({2, 10}, float32);
  array b = slice_update(a.gpu, upd, Shape{3, 0}, Shape{5, 10}, Device::gpu);
  a.gpu = array(0.0f);
  b.eval();
  EXPECT_EQ(b.buffer().ptr, a.ptr);
  EXPECT_EQ(to_doubles(b), to_doubles(slice_update(a.cpu, upd, Shape{3, 0},
                                                   Shape{5, 10}, Device::cpu)));

  // Colliding indices accumulate in the donated buffer.
  Twin c = twin({100});
  array idx = array({5, 5, 9});
  array d = scatter_add(c.gpu, {idx}, ones({3, 1}), {0}, Device::gpu);
  c.gpu = array(0.0f);
  d.eval();
  EXPECT_EQ(d.buffer().ptr, c.ptr);
  EXPECT_TRUE(
      close(d, scatter_add(c.cpu, {idx}, ones({3, 1}), {0}, Device::cpu)));
}

} // namespace
} // namespace kiln::test
