#include "kiln/backend/cpu/half_matvec.h"

// The 64-byte vector type of the helpers below is passed in registers only
// inside the AVX-512 clone; elsewhere GCC warns that the ABI differs, which
// does not matter for these file-local inline functions.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/backend/cpu/simd_clones.h"
#include "kiln/core/half.h"
#include "kiln/core/thread_pool.h"

namespace kiln::detail {

namespace {

// Everything below is inlined into the clones (target_clones takes no
// templates), so each clone gets its own vector code.
#define KILN_INLINE inline __attribute__((always_inline))

// One element widened, for the tails; widen16 does 16 at once.
KILN_INLINE float widen(bfloat16_t v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
KILN_INLINE float widen(float16_t v) { return static_cast<float>(v); }

constexpr int lanes = 16;
// 16 floats as one value: the accumulators stay in registers for every R
// (as plain arrays, GCC vectorized only R = 1).
typedef float f16x_t __attribute__((vector_size(lanes * sizeof(float))));
typedef uint32_t u32x_t __attribute__((vector_size(lanes * sizeof(uint32_t))));
typedef uint16_t u16x_t __attribute__((vector_size(lanes * sizeof(uint16_t))));

KILN_INLINE f16x_t load(const float* p) {
  f16x_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

KILN_INLINE f16x_t widen16(const bfloat16_t* p) {
  u16x_t h;
  std::memcpy(&h, p, sizeof h);
  u32x_t u = __builtin_convertvector(h, u32x_t) << 16;
  f16x_t f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// float16 by bit arithmetic (a conversion instruction needs F16C, which the
// clones' targets do not promise): exponent and mantissa moved into
// float32's places and scaled by 2^112, exact for normal and subnormal
// halves; inf and NaN get float32's all-ones exponent back.
KILN_INLINE f16x_t widen16(const float16_t* p) {
  u16x_t h16;
  std::memcpy(&h16, p, sizeof h16);
  u32x_t h = __builtin_convertvector(h16, u32x_t);
  u32x_t em = (h & 0x7fffu) << 13;
  f16x_t f;
  std::memcpy(&f, &em, sizeof f);
  f *= 0x1p112f;
  u32x_t r;
  std::memcpy(&r, &f, sizeof r);
  r = ((h & 0x7c00u) == 0x7c00u) ? (r | 0x7f800000u) : r;
  r |= (h & 0x8000u) << 16;
  std::memcpy(&f, &r, sizeof f);
  return f;
}

// R rows of x against one contiguous column of W (k elements): each element
// of W is read once for the R rows.
template <typename T, int R>
KILN_INLINE void dot_column_rows(const float* x, int64_t k, const T* col,
                                 float* dots) {
  f16x_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = f16x_t{};
  int64_t i = 0;
  for (; i + lanes <= k; i += lanes) {
    f16x_t wv = widen16(col + i);
    for (int r = 0; r < R; ++r) acc[r] += load(x + r * k + i) * wv;
  }
  for (int r = 0; r < R; ++r) {
    float d = 0.0f;
    for (int64_t j = i; j < k; ++j) d += x[r * k + j] * widen(col[j]);
    for (int l = 0; l < lanes; ++l) d += acc[r][l];
    dots[r] = d;
  }
}

// One row of W over columns [0, count), scaled by x[r][i] for R rows,
// added into R float32 rows of acc (row stride count).
template <typename T, int R>
KILN_INLINE void axpy_row_rows(const float* xi, int64_t xstride, const T* row,
                               int64_t count, float* acc) {
  float s[R];
  for (int r = 0; r < R; ++r) s[r] = xi[r * xstride];
  for (int64_t j = 0; j < count; ++j) {
    float w = widen(row[j]);
    for (int r = 0; r < R; ++r) acc[r * count + j] += s[r] * w;
  }
}

// The clones, one per element type, with the row count (1 to 4) switched
// inside.
#define KILN_ROWS_SWITCH(call)  \
  switch (rows) {               \
    case 1: call(1); break;     \
    case 2: call(2); break;     \
    case 3: call(3); break;     \
    default: call(4); break;    \
  }

KILN_SIMD_CLONES void dot_column(const float* x, int64_t k,
                                 const bfloat16_t* col, float* dots,
                                 int rows) {
#define KILN_CALL(R) dot_column_rows<bfloat16_t, R>(x, k, col, dots)
  KILN_ROWS_SWITCH(KILN_CALL)
#undef KILN_CALL
}
KILN_SIMD_CLONES void dot_column(const float* x, int64_t k,
                                 const float16_t* col, float* dots,
                                 int rows) {
#define KILN_CALL(R) dot_column_rows<float16_t, R>(x, k, col, dots)
  KILN_ROWS_SWITCH(KILN_CALL)
#undef KILN_CALL
}
KILN_SIMD_CLONES void axpy_row(const float* xi, int64_t xstride,
                               const bfloat16_t* row, int64_t count,
                               float* acc, int rows) {
#define KILN_CALL(R) axpy_row_rows<bfloat16_t, R>(xi, xstride, row, count, acc)
  KILN_ROWS_SWITCH(KILN_CALL)
#undef KILN_CALL
}
KILN_SIMD_CLONES void axpy_row(const float* xi, int64_t xstride,
                               const float16_t* row, int64_t count,
                               float* acc, int rows) {
#define KILN_CALL(R) axpy_row_rows<float16_t, R>(xi, xstride, row, count, acc)
  KILN_ROWS_SWITCH(KILN_CALL)
#undef KILN_CALL
}

template <typename T, int R>
void rows_by_columns(const float* x, int64_t k, const T* w, int64_t sc,
                     int64_t n, float alpha, float beta, float* out,
                     int64_t ldo) {
  // About 64 KiB of W per task.
  size_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(k, 1));
  parallel_for(n, grain, [&](size_t j0, size_t j1) {
    float dots[R];
    for (size_t j = j0; j < j1; ++j) {
      dot_column(x, k, w + j * sc, dots, R);
      for (int r = 0; r < R; ++r) {
        float& o = out[r * ldo + j];
        o = alpha * dots[r] + (beta == 0.0f ? 0.0f : beta * o);
      }
    }
  });
}

template <typename T, int R>
void rows_by_rows(const float* x, int64_t k, const T* w, int64_t sr,
                  int64_t n, float alpha, float beta, float* out,
                  int64_t ldo) {
  // Columns split among the threads; each walks all k rows of W over its
  // columns, accumulating in float32.
  size_t grain = 256;
  parallel_for(n, grain, [&](size_t j0, size_t j1) {
    int64_t count = static_cast<int64_t>(j1 - j0);
    std::vector<float> acc(static_cast<size_t>(R * count), 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      axpy_row(x + i, k, w + i * sr + j0, count, acc.data(), R);
    }
    for (int r = 0; r < R; ++r) {
      for (int64_t j = 0; j < count; ++j) {
        float& o = out[r * ldo + j0 + j];
        o = alpha * acc[r * count + j] + (beta == 0.0f ? 0.0f : beta * o);
      }
    }
  });
}

template <typename T, int R>
void block(const float* x, int64_t k, const T* w, int64_t sr, int64_t sc,
           int64_t n, float alpha, float beta, float* out) {
  if (sr == 1) {
    rows_by_columns<T, R>(x, k, w, sc, n, alpha, beta, out, n);
  } else {
    rows_by_rows<T, R>(x, k, w, sr, n, alpha, beta, out, n);
  }
}

} // namespace

template <typename T>
void half_matvec(const float* x, int64_t m, int64_t k, const T* w, int64_t sr,
                 int64_t sc, int64_t n, float alpha, float beta, float* out) {
  // Rows in blocks of 4: each pass over W serves four rows.
  for (int64_t r = 0; r < m;) {
    int64_t left = m - r;
    const float* xr = x + r * k;
    float* o = out + r * n;
    if (left >= 4) {
      block<T, 4>(xr, k, w, sr, sc, n, alpha, beta, o);
      r += 4;
    } else if (left == 3) {
      block<T, 3>(xr, k, w, sr, sc, n, alpha, beta, o);
      r += 3;
    } else if (left == 2) {
      block<T, 2>(xr, k, w, sr, sc, n, alpha, beta, o);
      r += 2;
    } else {
      block<T, 1>(xr, k, w, sr, sc, n, alpha, beta, o);
      r += 1;
    }
  }
}

template void half_matvec<float16_t>(const float*, int64_t, int64_t,
                                     const float16_t*, int64_t, int64_t,
                                     int64_t, float, float, float*);
template void half_matvec<bfloat16_t>(const float*, int64_t, int64_t,
                                      const bfloat16_t*, int64_t, int64_t,
                                      int64_t, float, float, float*);

} // namespace kiln::detail
