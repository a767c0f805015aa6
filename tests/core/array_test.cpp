// The array handle, dtypes, 16-bit floats, layout flags and printing.
#include <cstring>
#include <sstream>

#include "kiln/core/layout.h"
#include "test_utils.h"

namespace kiln::test {
namespace {

TEST(Array, ConstructionAndItem) {
  array a(3.5f);
  EXPECT_EQ(a.ndim(), 0u);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.item<float>(), 3.5f);
  EXPECT_EQ(array(2.0).dtype(), float32); // as MLX: double makes float32
  EXPECT_EQ(array(2.0, float64).item<double>(), 2.0);
  EXPECT_EQ(array(7).dtype(), int32);
  EXPECT_EQ(array(true).dtype(), bool_);

  array b({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.strides(), (Strides{3, 1}));
  EXPECT_EQ(b.nbytes(), 24u);
  EXPECT_EQ(b.shape(-1), 3);
  EXPECT_THROW(b.shape(2), std::invalid_argument);
  EXPECT_THROW(b.item<int>(), std::invalid_argument);

  std::vector<float> v = {1.5f, -2.5f};
  array c(v, {2, 1}, float16);
  EXPECT_EQ(c.dtype(), float16);
  EXPECT_EQ(to_doubles(c), (std::vector<double>{1.5, -2.5}));
  EXPECT_THROW(array(v, {3}), std::invalid_argument);
}

TEST(Array, HalfTypesRoundToNearestEven) {
  // float16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(float16_t(1.0f + 0x1p-11f).bits, 0x3c00);
  EXPECT_EQ(float16_t(1.0f + 3 * 0x1p-11f).bits, 0x3c02); // tie up to even
  EXPECT_EQ(float16_t(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float16_t(65520.0f).bits, 0x7c00); // overflow to inf
  EXPECT_EQ(float16_t(0x1p-24f).bits, 0x0001); // smallest subnormal
  EXPECT_EQ(float16_t(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(static_cast<float>(float16_t(NAN))));
  EXPECT_EQ(static_cast<float>(float16_t(0x1p-24f)), 0x1p-24f);
  // bfloat16 keeps float's exponent: ties to even on the 8-bit mantissa.
  EXPECT_EQ(bfloat16_t(1.0f + 0x1p-8f).bits, 0x3f80);
  EXPECT_EQ(bfloat16_t(1.0f + 3 * 0x1p-8f).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t(NAN))));
  EXPECT_NEAR(static_cast<float>(bfloat16_t(3.0e38f)), 3.0e38f, 3.0e38f / 256);
  // Exhaustive round trip: every finite float16 converts back exactly.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float16_t h(static_cast<uint16_t>(b), detail::from_bits);
    float f = h;
    if (std::isnan(f)) continue;
    ASSERT_EQ(float16_t(f).bits, b) << b;
  }
  EXPECT_EQ(sizeof(float16_t), 2u);
  EXPECT_EQ(sizeof(bfloat16_t), 2u);
}

TEST(Array, DtypeCategories) {
  EXPECT_TRUE(issubdtype(float16, floating));
  EXPECT_TRUE(issubdtype(bfloat16, inexact));
  EXPECT_TRUE(issubdtype(int8, signedinteger));
  EXPECT_TRUE(issubdtype(uint64, integer));
  EXPECT_FALSE(issubdtype(uint64, signedinteger));
  EXPECT_TRUE(issubdtype(complex64, number));
  EXPECT_TRUE(issubdtype(floating, inexact));
  EXPECT_FALSE(issubdtype(integer, floating));
  EXPECT_EQ(dtype_name(bfloat16), "bfloat16");
  EXPECT_EQ(kind(bfloat16), Dtype::Kind::V);
  for (int i = 0; i < num_dtypes; ++i) {
    Dtype d = dtype_from_index(i);
    EXPECT_EQ(promote_types(d, d), d);
    for (int j = 0; j < num_dtypes; ++j) {
      Dtype e = dtype_from_index(j);
      EXPECT_EQ(promote_types(d, e), promote_types(e, d));
    }
  }
}

TEST(Array, FreshBuffersAreRowMajorOnly) {
  // A new row-major buffer is column-major too only with at most one axis
  // longer than 1.
  auto a = add(random_array({3, 4}, float32), array(1.0f));
  a.eval();
  EXPECT_TRUE(a.flags().row_contiguous && a.flags().contiguous);
  EXPECT_FALSE(a.flags().col_contiguous);
  auto v = add(random_array({1, 5}, float32), array(1.0f));
  v.eval();
  EXPECT_TRUE(v.flags().row_contiguous && v.flags().col_contiguous);
}

TEST(Array, LayoutFlags) {
  auto l = layout_of({3, 4}, {4, 1});
  EXPECT_TRUE(l.flags.row_contiguous && l.flags.contiguous);
  EXPECT_FALSE(l.flags.col_contiguous);
  l = layout_of({3, 4}, {1, 3});
  EXPECT_TRUE(l.flags.col_contiguous && l.flags.contiguous);
  EXPECT_EQ(l.data_size, 12u);
  l = layout_of({3, 4}, {0, 1}); // broadcast rows
  EXPECT_TRUE(l.flags.contiguous);
  EXPECT_FALSE(l.flags.row_contiguous);
  EXPECT_EQ(l.data_size, 4u);
  l = layout_of({16384, 2048, 16}, {0, 0, 0});
  EXPECT_TRUE(l.flags.contiguous);
  EXPECT_EQ(l.data_size, 1u);
  l = layout_of({3, 4}, {8, 1}); // every other row: not contiguous
  EXPECT_FALSE(l.flags.contiguous);
  l = layout_of({4, 2, 3}, {3, 12, 1}); // permuted but dense
  EXPECT_TRUE(l.flags.contiguous);
  EXPECT_FALSE(l.flags.row_contiguous || l.flags.col_contiguous);
  l = layout_of({4}, {-1});
  EXPECT_FALSE(l.flags.contiguous);
  // Past 16 dimensions (the stack buffer): a permuted dense layout.
  Shape many(18, 1);
  many[0] = 2;
  many[17] = 3;
  Strides perm = row_major_strides(many);
  std::swap(perm[0], perm[17]);
  std::swap(many[0], many[17]);
  l = layout_of(many, perm);
  EXPECT_TRUE(l.flags.contiguous);
  EXPECT_FALSE(l.flags.row_contiguous);
}

// A freshly evaluated (row-major) array's flags are what layout_of gives
// its strides: set_data takes a shortcut for them.
TEST(Array, RowMajorDataFlagsMatchLayoutOf) {
  for (Shape s : {Shape{}, Shape{1}, Shape{5}, Shape{1, 5}, Shape{5, 1},
                  Shape{3, 4}, Shape{1, 1, 7, 1}, Shape{0}, Shape{2, 0, 3},
                  Shape{2, 3, 4, 5}}) {
    // An arg-reduction's output (kept dims, so not a view of it):
    // allocated row-major by set_data(buffer).
    Shape with_axis = s;
    with_axis.push_back(3);
    array a = argmax(random_array(with_axis, float32), -1, true);
    a.eval();
    Shape kept = s;
    kept.push_back(1);
    ASSERT_EQ(a.shape(), kept);
    auto want = layout_of(kept, row_major_strides(kept)).flags;
    EXPECT_EQ(a.flags().contiguous, want.contiguous);
    EXPECT_EQ(a.flags().row_contiguous, want.row_contiguous);
    EXPECT_EQ(a.flags().col_contiguous, want.col_contiguous);
  }
}

TEST(Array, Printing) {
  std::ostringstream os;
  os << array({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(os.str(), "array([[1, 2],\n       [3, 4]], dtype=int32)");
  os.str("");
  os << array(true);
  EXPECT_EQ(os.str(), "array(true, dtype=bool)");
  os.str("");
  os << array({1.5f, -2.0f}, float16);
  EXPECT_EQ(os.str(), "array([1.5, -2], dtype=float16)");
  os.str("");
  os << zeros({0, 3});
  EXPECT_EQ(os.str(), "array([], dtype=float32)");
}

TEST(Array, ViewReinterpretsBits) {
  auto x = array({1.0f, -2.0f});
  auto u = view(x, uint32);
  EXPECT_EQ(u.shape(), (Shape{2}));
  uint32_t bits;
  float one = 1.0f;
  std::memcpy(&bits, &one, 4);
  EXPECT_EQ(to_doubles(u)[0], bits);
  auto h = view(x, uint16);
  EXPECT_EQ(h.shape(), (Shape{4}));
  auto back = view(view(transpose(array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2})), int32), float32);
  EXPECT_EQ(to_doubles(back), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_THROW(view(array({1.0f, 2.0f, 3.0f}), float64), std::invalid_argument);
}

TEST(Array, MemoryStatistics) {
  size_t before = get_active_memory();
  {
    auto a = random_array({1024}, float32);
    EXPECT_GE(get_active_memory(), before + 4096);
  }
  EXPECT_EQ(get_active_memory(), before);
  auto big = random_array({1 << 19}, float32);
  size_t old = set_memory_limit(get_active_memory() + (1 << 20));
  // The limit is the host allocator's: run on the CPU.
  EXPECT_THROW(exp(big, Device::cpu).eval(), std::runtime_error);
  set_memory_limit(old);
}

TEST(Array, Devices) {
  if (gpu::is_available()) {
    EXPECT_EQ(default_device(), Device(Device::gpu)); // the GPU when present
  } else {
    EXPECT_EQ(default_device(), Device(Device::cpu));
    EXPECT_THROW(set_default_device(Device::gpu), std::invalid_argument);
  }
  auto s = new_stream(Device::cpu);
  auto y = exp(array({0.0f}), s);
  EXPECT_EQ(y.item<float>(), 1.0f);
}

} // namespace
} // namespace kiln::test

namespace kiln::test {
namespace {

TEST(Allocator, LargeBuffersAreRecycled) {
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  auto x = random_array({1 << 16}, float32);
  // The host allocator's cache: run on the CPU.
  { auto a = exp(x, Device::cpu); a.eval(); } // its 256 KiB buffer is cached
  size_t cached = get_cache_memory();
  EXPECT_GE(cached, (1u << 16) * sizeof(float));
  // A buffer of the same size comes back from the cache.
  auto b = exp(x, Device::cpu);
  b.eval();
  EXPECT_LT(get_cache_memory(), cached);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  size_t old = set_cache_limit(0);
  { auto c = exp(x, Device::cpu); c.eval(); }
  EXPECT_EQ(get_cache_memory(), 0u);
  set_cache_limit(old);
}

TEST(Allocator, SmallBuffersAreRecycled) {
  // A 1 KiB result: its buffer goes to the cache, and the next result of
  // that size takes it back.
  clear_cache();
  auto x = random_array({256}, float32);
  x.eval();
  const void* first = nullptr;
  {
    auto a = exp(x, Device::cpu);
    a.eval();
    first = a.data<void>();
  }
  EXPECT_GE(get_cache_memory(), 256u * sizeof(float));
  auto b = exp(x, Device::cpu);
  b.eval();
  EXPECT_EQ(b.data<void>(), first);
  EXPECT_EQ(get_cache_memory(), 0u);
  clear_cache();
}

} // namespace
} // namespace kiln::test
