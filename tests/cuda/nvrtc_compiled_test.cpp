// Fused-region kernels through NVRTC with no GPU: the source generated for
// each region case, dtype and layout variant (contiguous with vector and
// scalar inputs, strided with 32- and 64-bit indices, rows with and without
// vectors) must compile for sm_90, so generator bugs fail here, in CI. The
// rows decision itself is checked here too.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include <gtest/gtest.h>

#include <algorithm>

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

detail::CompiledLayout layout_of(const Traced& t) {
  return detail::compiled_layout(*t.region, t.out.inputs(), t.out.shape());
}

void expect_compiles(const detail::JitKernelSpec& spec, const std::string& what,
                     bool large = false) {
  ASSERT_TRUE(detail::jit_supports(spec)) << what;
  cuda::JitKernel k = cuda::fused_kernel(spec, large);
  try {
    std::string cubin = cuda::jit_compile(k, "sm_90");
    ASSERT_GT(cubin.size(), 4u) << what;
    EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what() << "\n" << k.source;
  }
}

void expect_compiles(const Traced& t, const std::string& what,
                     bool large = false) {
  ASSERT_NE(t.region, nullptr) << what << ": not one fused region";
  expect_compiles(layout_of(t).spec, what, large);
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
  // 16-bit regions round two elements with one packed conversion.
  EXPECT_NE(bf16.find("as_dtype_pair<__nv_bfloat16>"), std::string::npos);
  EXPECT_NE(bf16.find("region2("), std::string::npos);
  EXPECT_EQ(f32.find("region2("), std::string::npos);
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

// Each region input's expected role in the rows kernel: the region reads
// the broadcasts as views of its shape, a per-row one with stride 0 along
// the last axis, a per-column one with stride 0 along the others.
std::vector<detail::JitRole> rows_roles(const Traced& t) {
  std::vector<detail::JitRole> r;
  for (auto& in : t.out.inputs()) {
    if (in.size() == 1) {
      r.push_back(detail::JitRole::scalar);
    } else if (in.strides().back() == 0) {
      r.push_back(detail::JitRole::row);
    } else if (in.strides()[0] == 0) {
      r.push_back(detail::JitRole::column);
    } else {
      r.push_back(detail::JitRole::vector);
    }
  }
  return r;
}

TEST(NvrtcCompiled, RowsVariantIsChosenForRowAndColumnBroadcasts) {
  for (auto& c : rows_cases()) {
    auto t = trace_region(c.f, rows_inputs(c, {4, 6, 32}, c.dtypes[0]));
    ASSERT_NE(t.region, nullptr) << c.name;
    auto lay = layout_of(t);
    // The shared decision is strided (row-major outputs, as on the CPU);
    // the GPU runs it as rows of (24, 32).
    EXPECT_FALSE(lay.spec.contiguous) << c.name;
    ASSERT_TRUE(detail::rows_layout(lay)) << c.name;
    EXPECT_EQ(lay.shape, (Shape{24, 32})) << c.name;
    auto want = rows_roles(t);
    for (size_t k = 0; k < want.size(); ++k) {
      if (lay.spec.roles[k] == detail::JitRole::constant) continue;
      EXPECT_EQ(static_cast<char>(lay.spec.roles[k]),
                static_cast<char>(want[k]))
          << c.name << " input " << k;
    }
    lay.spec.rows_width = cuda::fused_vec_width(lay.spec);
    cuda::JitKernel k = cuda::fused_kernel(lay.spec, false);
    EXPECT_NE(k.name.find("_r_"), std::string::npos) << k.name;
    EXPECT_NE(k.source.find("// key: rows" +
                            std::to_string(lay.spec.rows_width) + "|"),
              std::string::npos)
        << k.source;
    // The width and the index width are part of the name.
    lay.spec.rows_width = 1;
    EXPECT_NE(cuda::fused_kernel(lay.spec, false).name, k.name);
    EXPECT_NE(cuda::fused_kernel(lay.spec, true).name,
              cuda::fused_kernel(lay.spec, false).name);
  }
}

TEST(NvrtcCompiled, RowsVariantOnlyForRowMajorRowsAndColumns) {
  auto& ln = rows_cases()[0]; // (x - mean) * rstd * w * g
  auto in = rows_inputs(ln, {4, 6, 32}, float32);
  auto rows = [&](const std::vector<array>& v) {
    auto t = trace_region(ln.f, v);
    EXPECT_NE(t.region, nullptr);
    auto lay = layout_of(t);
    bool r = detail::rows_layout(lay);
    if (!r) {
      // Left as it was: the strided kernel's roles.
      auto before = layout_of(t).spec.roles;
      EXPECT_EQ(lay.spec.roles, before);
    }
    return r;
  };
  EXPECT_TRUE(rows(in));
  // A transposed full input.
  auto t = in;
  t[0] = transpose(random_array({32, 6, 4}, float32));
  EXPECT_FALSE(rows(t));
  // A mean per (batch, column), (4, 1, 32): neither per row nor per column.
  auto mid = in;
  mid[1] = random_array({4, 1, 32}, float32);
  EXPECT_FALSE(rows(mid));
  // A weight that is a strided slice (stride 2 over the columns).
  auto sliced = in;
  sliced[3] = slice(random_array({64}, float32), Shape{0}, Shape{64},
                    Shape{2});
  EXPECT_FALSE(rows(sliced));
  // All full arrays: the flat kernel, never rows.
  auto full = in;
  full[1] = random_array({4, 6, 32}, float32);
  full[2] = random_array({4, 6, 32}, float32);
  full[3] = random_array({4, 6, 32}, float32);
  auto tf = trace_region(ln.f, full);
  auto lay = layout_of(tf);
  EXPECT_TRUE(lay.spec.contiguous);
  EXPECT_FALSE(detail::rows_layout(lay));
}

TEST(NvrtcCompiled, RowsVariantEveryCaseDtypeAndWidth) {
  for (auto& c : rows_cases()) {
    std::vector<Dtype> dtypes = c.dtypes;
    if (dtypes[0] == float32) dtypes.push_back(float64);
    for (Dtype dt : dtypes) {
      std::string what = c.name + " " + dtype_name(dt) + " rows";
      auto t = trace_region(c.f, rows_inputs(c, {3, 5, 16}, dt));
      ASSERT_NE(t.region, nullptr) << what;
      auto lay = layout_of(t);
      ASSERT_TRUE(detail::rows_layout(lay)) << what;
      int width = cuda::fused_vec_width(lay.spec);
      EXPECT_GT(width, 1) << what;
      for (int w : {width, 1}) {
        lay.spec.rows_width = w;
        expect_compiles(lay.spec, what + " W=" + std::to_string(w));
      }
      if (dt == dtypes[0]) {
        expect_compiles(lay.spec, what + " W=1 i64", true);
        lay.spec.rows_width = width;
        expect_compiles(lay.spec, what + " i64", true);
      }
    }
  }
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
