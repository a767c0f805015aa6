// Fused-region kernels through NVRTC with no GPU: the source generated for
// each region case, dtype and layout variant (contiguous with vector and
// scalar inputs, strided with 32- and 64-bit indices) must compile for
// sm_90, so generator bugs fail here, in CI.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <gtest/gtest.h>

#include "cuda/fused_regions.h"
#include "kiln/backend/cuda/compiled_source.h"
#include "kiln/primitives/compiled.h"

namespace kiln::test {
namespace {

// The region behind f's first output on these inputs (traced, not run).
struct Traced {
  array out;
  const Compiled* region;
};

Traced trace_region(const Fn& f, const std::vector<array>& in) {
  array out = compile(f)(in)[0];
  // The layout decision reads the region's inputs' data sizes (a broadcast
  // view's is 1): evaluate them, not the region.
  std::vector<array> inputs = out.inputs();
  eval(inputs);
  return {out, dynamic_cast<const Compiled*>(&out.primitive())};
}

std::string compiled_source(const Traced& t, bool large = false) {
  auto lay = detail::compiled_layout(*t.region, t.out.inputs(), t.out.shape());
  EXPECT_TRUE(detail::jit_supports(lay.spec));
  return cuda::fused_kernel(lay.spec, large).source;
}

void expect_compiles(const Traced& t, const std::string& what,
                     bool large = false) {
  ASSERT_NE(t.region, nullptr) << what << ": not one fused region";
  auto lay = detail::compiled_layout(*t.region, t.out.inputs(), t.out.shape());
  ASSERT_TRUE(detail::jit_supports(lay.spec)) << what;
  cuda::JitKernel k = cuda::fused_kernel(lay.spec, large);
  try {
    std::string cubin = cuda::jit_compile(k, "sm_90");
    ASSERT_GT(cubin.size(), 4u) << what;
    EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what() << "\n" << k.source;
  }
}

std::vector<detail::JitRole> roles(const Traced& t) {
  return detail::compiled_layout(*t.region, t.out.inputs(), t.out.shape())
      .spec.roles;
}

TEST(NvrtcCompiled, EveryRegionCaseAndDtypeContiguous) {
  for (auto& c : region_cases()) {
    for (Dtype dt : c.dtypes) {
      array x = random_array({6, 10}, dt, c.lo, c.hi);
      array y = random_array({6, 10}, dt, c.lo, c.hi);
      expect_compiles(trace_region(c.f, {x, y}),
                      c.name + " " + dtype_name(dt) + " contiguous");
    }
  }
}

TEST(NvrtcCompiled, StridedScalarAndLargeVariants) {
  for (auto& c : region_cases()) {
    for (Dtype dt : c.dtypes) {
      array x = random_array({6, 10}, dt, c.lo, c.hi);
      array y = random_array({6, 10}, dt, c.lo, c.hi);
      std::string what = c.name + " " + dtype_name(dt);
      // A transposed x next to a row-major y: the strided kernel.
      auto strided = trace_region(c.f, {as_transposed(x), y});
      ASSERT_NE(strided.region, nullptr) << what;
      EXPECT_FALSE(
          detail::compiled_layout(*strided.region, strided.out.inputs(),
                                  strided.out.shape())
              .spec.contiguous)
          << what;
      expect_compiles(strided, what + " strided");
      if (dt == c.dtypes[0]) {
        expect_compiles(strided, what + " strided i64", true);
      }
      // A one-element y: a scalar input of the contiguous kernel.
      auto scalar = trace_region(c.f, {x, random_array({1}, dt, c.lo, c.hi)});
      if (scalar.region) {
        auto r = roles(scalar);
        EXPECT_NE(std::find(r.begin(), r.end(), detail::JitRole::scalar),
                  r.end())
            << what;
        expect_compiles(scalar, what + " scalar");
      }
    }
  }
}

TEST(NvrtcCompiled, SourceIsLeanAndBakesConstants) {
  auto& tanh_fma = region_cases()[0];
  array x = random_array({4, 8}, float32), y = random_array({4, 8}, float32);
  std::string f32 = compiled_source(trace_region(tanh_fma.f, {x, y}));
  // No fp16/bf16 headers for a float32 region; constants as exact bits.
  EXPECT_NE(f32.find("#define KILN_DEVICE_NO_HALF"), std::string::npos);
  EXPECT_NE(f32.find("__int_as_float(1065353216)"), std::string::npos) << f32;
  EXPECT_NE(f32.find("__int_as_float(1056964608)"), std::string::npos) << f32;
  // No shape is baked in: n and the layout are arguments.
  EXPECT_EQ(f32.find("= 32;"), std::string::npos);
  std::string bf16 = compiled_source(trace_region(
      tanh_fma.f, {astype(x, bfloat16), astype(y, bfloat16)}));
  EXPECT_EQ(bf16.find("KILN_DEVICE_NO_HALF"), std::string::npos);
  EXPECT_NE(bf16.find("as_dtype<__nv_bfloat16>"), std::string::npos);
}

TEST(NvrtcCompiled, SameRegionSameKernelNewShapeToo) {
  // The kernel name (the in-memory cache key) depends on the region and the
  // variant, not on the shape.
  auto& c = region_cases()[0];
  auto name = [&](const Shape& s) {
    auto t = trace_region(c.f, {random_array(s, float32),
                                random_array(s, float32)});
    auto lay = detail::compiled_layout(*t.region, t.out.inputs(), t.out.shape());
    return cuda::fused_kernel(lay.spec, false).name;
  };
  EXPECT_EQ(name({3, 5}), name({64, 7}));
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
