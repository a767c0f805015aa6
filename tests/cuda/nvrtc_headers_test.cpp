// The device headers through NVRTC, with no GPU needed: every functor in
// each kernel family instantiates for every dtype it serves, so a header
// that compiles under nvcc but not NVRTC fails here, in CI.
#include "kiln/config.h"

#if KILN_HAS_CUDA

#include "cuda/nvrtc_check.h"
#include "kiln/backend/cuda/addresses.h"
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/elementwise_kernels.h"
#include "kiln/backend/cuda/linalg.h"
#include "kiln/backend/cuda/quantized.h"
#include "kiln/backend/cuda/reduce_kernels.h"
#include "kiln/backend/cuda/row_kernels.h"
#include "kiln/primitives/binary_table.h"

namespace kiln::test {
namespace {

using cuda::binary_kernel;
using cuda::JitKernel;
using cuda::ternary_kernel;
using cuda::unary_kernel;

const std::vector<Dtype> floats = {float16, bfloat16, float32, float64};
const std::vector<Dtype> ints = {uint8,  uint16, uint32, uint64,
                                 int8,   int16,  int32,  int64};

// The kernels of one row of an op table, for the dtypes its kind takes
// (unary_table.h and binary_table.h), and complex64 where its functor has
// a complex meaning.
enum class Kind { all, numeric, inexact, integral, predicate, magnitude };

void expect_unary_row(const char* op, Kind kind, bool complex) {
  switch (kind) {
    case Kind::inexact:
      expect_compiles(unary_kernel(op, bfloat16, bfloat16, "v"));
      expect_compiles(unary_kernel(op, float64, float64, "g", true));
      break;
    case Kind::integral:
      for (Dtype d : ints) expect_compiles(unary_kernel(op, d, d, "g"));
      expect_compiles(unary_kernel(op, bool_, bool_, "v"));
      break;
    case Kind::predicate:
      for (Dtype d : {float16, int32, bool_}) {
        expect_compiles(unary_kernel(op, d, bool_, "v"));
      }
      break;
    default: // all, magnitude
      expect_compiles(unary_kernel(op, bfloat16, bfloat16, "v"));
      for (Dtype d : ints) expect_compiles(unary_kernel(op, d, d, "v"));
  }
  if (complex && kind != Kind::integral) {
    Dtype out = kind == Kind::magnitude  ? float32
                : kind == Kind::predicate ? bool_
                                          : complex64;
    expect_compiles(unary_kernel(op, complex64, out, "g"));
  }
}

void expect_binary_row(const char* op, Kind kind, bool complex) {
  switch (kind) {
    case Kind::inexact:
      expect_compiles(binary_kernel(op, float64, float64, "g"));
      expect_compiles(binary_kernel(op, bfloat16, bfloat16, "vs"));
      break;
    case Kind::integral:
      expect_compiles(binary_kernel(op, uint64, uint64, "g", true));
      expect_compiles(binary_kernel(op, int8, int8, "vv"));
      break;
    case Kind::predicate:
      expect_compiles(binary_kernel(op, float16, bool_, "vv"));
      expect_compiles(binary_kernel(op, int64, bool_, "g"));
      break;
    default: // all, numeric
      expect_compiles(binary_kernel(op, int8, int8, "vs"));
      expect_compiles(binary_kernel(op, bfloat16, bfloat16, "sv"));
  }
  if (complex && kind != Kind::integral) {
    Dtype out = kind == Kind::predicate ? bool_ : complex64;
    expect_compiles(binary_kernel(op, complex64, out, "g"));
  }
}

TEST(NvrtcHeaders, UnaryFamily) {
#define KILN_UNARY_ROW(Name, op, kind, ...) \
  expect_unary_row(#Name, Kind::kind, ::kiln::detail::Name::complex);
  KILN_UNARY_OPS(KILN_UNARY_ROW)
#undef KILN_UNARY_ROW
}

TEST(NvrtcHeaders, CopiesBetweenEveryDtype) {
  std::vector<Dtype> all = ints;
  all.insert(all.end(), floats.begin(), floats.end());
  all.push_back(bool_);
  for (Dtype from : all) {
    expect_compiles(unary_kernel("AsType", from, float16, "g"));
    expect_compiles(unary_kernel("AsType", bfloat16, from, "v"));
  }
  for (Dtype raw : {uint8, uint16, uint32, uint64}) {
    expect_compiles(cuda::transpose_kernel(raw));
  }
}

TEST(NvrtcHeaders, BinaryAndTernaryFamilies) {
#define KILN_BINARY_ROW(Name, op, kind, ...) \
  expect_binary_row(#Name, Kind::kind, ::kiln::detail::Name::complex);
  KILN_BINARY_OPS(KILN_BINARY_ROW)
#undef KILN_BINARY_ROW
  expect_compiles(ternary_kernel(bfloat16, "svs"));
  expect_compiles(ternary_kernel(int64, "g", true));
}

// The complex64 kernels (device/complex.cuh): every op that has one, the
// casts to and from complex64, the parts, comparisons and Select.
TEST(NvrtcHeaders, ComplexKernels) {
  std::vector<JitKernel> ks;
  for (const char* op : {"Negative", "Sign", "Square", "Exp", "Log", "Log1p",
                         "Log2", "Log10", "Sin", "Cos", "Tan", "Sinh", "Cosh",
                         "Tanh", "Sqrt", "Rsqrt", "Round", "Conjugate",
                         "ArcSin", "ArcCos", "ArcTan", "ArcSinh", "ArcCosh",
                         "ArcTanh"}) {
    ks.push_back(unary_kernel(op, complex64, complex64, "v"));
  }
  ks.push_back(unary_kernel("LogicalNot", complex64, bool_, "v"));
  for (const char* op : {"Abs", "Real", "Imag"}) {
    ks.push_back(unary_kernel(op, complex64, float32, "g"));
  }
  for (Dtype d : {bool_, int32, uint64, float16, bfloat16, float32, float64}) {
    ks.push_back(unary_kernel("AsType", d, complex64, "v"));
    ks.push_back(unary_kernel("AsType", complex64, d, "g"));
  }
  for (const char* op :
       {"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum",
        "Power"}) {
    ks.push_back(binary_kernel(op, complex64, complex64, "vs"));
  }
  for (const char* op : {"Equal", "NotEqual", "NaNEqual", "Less", "LessEqual",
                         "Greater", "GreaterEqual", "LogicalAnd",
                         "LogicalOr"}) {
    ks.push_back(binary_kernel(op, complex64, bool_, "g"));
  }
  ks.push_back(ternary_kernel(complex64, "vsv"));
  expect_all_compile(ks);
  // Sums, products, all and any in every reduce shape (a kernel's siblings
  // compile with it).
  for (const char* op : {"Sum", "Prod"}) {
    expect_compiles(cuda::reduce_kernel('w', op, complex64, complex64));
  }
  expect_compiles(cuda::reduce_kernel('r', "Or", complex64, bool_));
  // Scans: sums in every pattern, products in one.
  std::vector<JitKernel> scans = {
      cuda::scan_kernel("Multiply", complex64, complex64, 's')};
  for (char pattern : {'s', 'r', 'c', 't', 'k'}) {
    scans.push_back(cuda::scan_kernel("Add", complex64, complex64, pattern));
  }
  expect_all_compile(scans);
}

// The kernels around cuSOLVER's factorizations (device/linalg.cuh).
TEST(NvrtcHeaders, LinalgKernels) {
  expect_all_compile({cuda::linalg_fill_kernel(float32, false),
                      cuda::linalg_fill_kernel(float64, true),
                      cuda::lu_pivots_kernel(int64),
                      cuda::lu_pivots_kernel(int32), cuda::eig_vectors_kernel(),
                      cuda::small_solve_kernel(float32),
                      cuda::small_solve_kernel(float64),
                      cuda::zero_diagonal_kernel(float32),
                      cuda::zero_diagonal_kernel(float64)});
}

// The address lists of batched cuBLAS and cuSOLVER calls and GatherMM's,
// and GatherMM's copy of its picked matrices.
TEST(NvrtcHeaders, AddressKernels) {
  expect_all_compile({cuda::strided_addresses_kernel(),
                      cuda::gather_mm_addresses_kernel(),
                      cuda::picked_matrices_kernel(2),
                      cuda::picked_matrices_kernel(4),
                      cuda::picked_matrices_kernel(8)});
}

TEST(NvrtcHeaders, QuantizedKernels) {
  // Every width; a program per dtype (the matvec's row variants are
  // siblings; each of its group sizes on some width), the dequantize
  // kernels together.
  std::vector<cuda::JitKernel> dequantize;
  for (Dtype dt : {float32, float16, bfloat16}) {
    std::vector<cuda::JitKernel> matvec;
    for (int bits : {1, 2, 3, 4, 5, 6, 8}) {
      int threads = bits == 3 ? 32 : bits == 5 ? 64 : 128;
      matvec.push_back(cuda::quantized_matvec_kernel(dt, bits, 1, threads));
      dequantize.push_back(cuda::dequantize_kernel(dt, float32, bits));
    }
    if (dt != float32) {
      matvec.push_back(cuda::quantized_mma_kernel(dt, 4));
      matvec.push_back(cuda::quantized_mma_kernel(dt, 8));
      matvec.push_back(cuda::quantized_gemm_kernel(dt, 4));
      matvec.push_back(cuda::quantized_gemm_kernel(dt, 8));
      matvec.push_back(cuda::sum_partials_kernel(dt));
    }
    expect_all_compile(matvec);
  }
  dequantize.push_back(cuda::dequantize_kernel(float32, bfloat16, 4));
  expect_all_compile(dequantize);
}

// Every scan op, and every dtype family on sum (widening ones included),
// each in its three per-line patterns (s, r, c) and its two passes in
// pieces (t, k).
TEST(NvrtcHeaders, ScanFamily) {
  using cuda::scan_kernel;
  std::vector<JitKernel> ks;
  for (Dtype d : {float16, bfloat16, float32, float64, int64, uint64}) {
    ks.push_back(scan_kernel("Add", d, d, 'r'));
  }
  ks.push_back(scan_kernel("Add", bool_, int32, 's'));
  ks.push_back(scan_kernel("Add", int8, int32, 'c'));
  ks.push_back(scan_kernel("Add", uint16, uint32, 'r'));
  ks.push_back(scan_kernel("Multiply", bfloat16, bfloat16, 'r'));
  ks.push_back(scan_kernel("Multiply", int32, int32, 'c'));
  for (Dtype d : {bool_, int8, uint16, float16, float64}) {
    ks.push_back(scan_kernel("Maximum", d, d, 's'));
    ks.push_back(scan_kernel("Minimum", d, d, 'c'));
  }
  for (Dtype d : floats) ks.push_back(scan_kernel("LogAddExp", d, d, 'r'));
  ks.push_back(scan_kernel("Add", float32, float32, 't'));
  ks.push_back(scan_kernel("Add", bool_, int64, 'k'));
  ks.push_back(scan_kernel("Multiply", bfloat16, bfloat16, 't'));
  ks.push_back(scan_kernel("Maximum", float16, float16, 'k'));
  ks.push_back(scan_kernel("LogAddExp", float64, float64, 't'));
  // complex64's identities and logaddexp (the GPU tests compile the rest).
  ks.push_back(scan_kernel("Minimum", complex64, complex64, 'c'));
  ks.push_back(scan_kernel("LogAddExp", complex64, complex64, 't'));
  expect_all_compile(ks);
}

// Sort for every dtype (each has its own radix key) and argsort for each key
// width and kind, each in every tile and in the three stages of long lines;
// searchsorted of one of each kind.
TEST(NvrtcHeaders, SortFamily) {
  using cuda::sort_kernel;
  std::vector<Dtype> all = ints;
  all.insert(all.end(), floats.begin(), floats.end());
  all.push_back(bool_);
  std::vector<JitKernel> ks;
  for (Dtype d : all) {
    ks.push_back(sort_kernel(d, false, 0));
    ks.push_back(cuda::long_sort_kernel(d, false, 'r'));
  }
  for (Dtype d : {bool_, int8, float16, bfloat16, float32, int32, float64,
                  uint64}) {
    ks.push_back(sort_kernel(d, true, cuda::sort_tiles.size() - 1));
    ks.push_back(cuda::long_sort_kernel(d, true, 'm'));
  }
  for (Dtype d : {bool_, int8, uint16, bfloat16, float64}) {
    ks.push_back(cuda::search_sorted_kernel(d));
  }
  expect_all_compile(ks);
}

// Each row kernel with its sibling (warp and block per row), for every
// dtype the row kernels take; softmax's precise variant differs only for
// the 16-bit types.
TEST(NvrtcHeaders, RowFamilies) {
  for (Dtype d : floats) {
    for (bool precise : {false, true}) {
      expect_compiles(cuda::softmax_kernel(d, precise, true));
    }
    expect_compiles(cuda::logsumexp_kernel(d, false));
    expect_compiles(cuda::norm_kernel("LayerNorm", d, false));
    expect_compiles(cuda::norm_kernel("RMSNorm", d, true));
    expect_compiles(cuda::rope_kernel(d));
    expect_compiles(cuda::sdpa_kernel(d, 128)); // every width, as siblings
  }
  EXPECT_EQ(cuda::sdpa_kernel(float16, 80).name, "wSdpa4float16");
  EXPECT_EQ(cuda::sdpa_kernel(float32, 32).name, "wSdpa1float32");
  EXPECT_EQ(cuda::sdpa_kernel(float32, 33).siblings.size(), 3u);
  // gpu_rows_test.cpp's lengths 512 and 513 sit on each side.
  EXPECT_TRUE(cuda::row_fits_warp(512));
  EXPECT_FALSE(cuda::row_fits_warp(513));
  EXPECT_EQ(cuda::softmax_kernel(float32, true, true).name,
            cuda::softmax_kernel(float32, false, true).name);
  EXPECT_EQ(cuda::softmax_kernel(bfloat16, true, false).name,
            "bSoftmaxPrecisebfloat16");
  EXPECT_EQ(cuda::norm_kernel("RMSNorm", float16, true).siblings.at(0).first,
            "bRMSNormfloat16");
}

// The norms' fused backwards: for each op, every float dtype's warp and
// block variants and the dweight reduction (the siblings), in one program.
TEST(NvrtcHeaders, NormBackwardFamily) {
  for (const char* op : {"LayerNormVjp", "RMSNormVjp"}) {
    std::vector<JitKernel> ks;
    for (Dtype d : floats) ks.push_back(cuda::norm_vjp_kernel(op, d, true));
    for (const JitKernel& k : ks) ASSERT_EQ(k.siblings.size(), 2u) << k.name;
    expect_all_compile(ks);
  }
  JitKernel k = cuda::norm_vjp_kernel("LayerNormVjp", bfloat16, false);
  EXPECT_EQ(k.name, "bLayerNormVjpbfloat16");
  EXPECT_EQ(k.siblings.at(0).first, "wLayerNormVjpbfloat16");
  EXPECT_EQ(k.siblings.at(1).first, "vNormVjpDweightbfloat16");
  EXPECT_EQ(cuda::norm_vjp_kernel("RMSNormVjp", float32, true).expression,
            "kiln::cuda::norm_vjp_warp<float, 4, 4, true>");
  EXPECT_EQ(cuda::row_block_threads(4097, float32), 1024);
  EXPECT_EQ(cuda::row_block_threads(513, bfloat16), 96);
}

TEST(NvrtcHeaders, ErrorsCarryTheLog) {
  JitKernel k = unary_kernel("NoSuchOp", float32, float32, "v");
  try {
    cuda::jit_compile(k, "sm_90");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("NoSuchOp"), std::string::npos);
  }
}

} // namespace
} // namespace kiln::test

#endif // KILN_HAS_CUDA
