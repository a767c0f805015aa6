// Weights in the microscaling modes on the GPU (ops/quantized_fp.cpp
// defines them): codes of Bits bits, e2m1 at 4 and e4m3 at 8, packed from
// the low bits of uint32 words, and a uint8 scale per group of GroupSize
// codes: e8m0 (a power of two) for 32, e4m3 for nvfp4's 16.
//
// Both code formats are float16's with fewer exponent bits: a code's
// magnitude bits moved into float16's exponent and mantissa fields read
// as the code's value times 2^-14 (e2m1, exponent bias 1 against 15) or
// 2^-8 (e4m3, bias 7), subnormals included; a shift and a mask or two
// decode two codes of a word at once, with no table and no conversion
// instruction but float16 to float32.
//
// quantized_matvec_fp: out = x @ dequantize(w).T for a few rows of x read
// straight from the codes (quantized_matvec's blocks and reduction);
// dequantize_fp: the weight unpacked, bit for bit as the CPU's.
#pragma once

#include "kiln/backend/cuda/device/quantized.cuh"

namespace kiln::cuda {

namespace quantized {

template <int S>
__device__ __forceinline__ uint32_t shift_left(uint32_t v) {
  if constexpr (S >= 0) {
    return v << S;
  } else {
    return v >> -S;
  }
}

/** A decoded code's value over its float16 reading: 2^14 for e2m1, 2^8
 *  for e4m3. */
template <int Bits>
inline constexpr float fp_unscale = Bits == 4 ? 16384.0f : 256.0f;

/** The codes at bits P and P + 16 of v as a float16 pair (the one at P in
 *  the low half), each its value / fp_unscale<Bits>: the magnitude's
 *  Bits - 1 bits moved to end where float16's mantissa field keeps as
 *  many bits as the code's (1 for e2m1, 3 for e4m3), the sign to bit 15. */
template <int Bits, int P>
__device__ __forceinline__ uint32_t fp_pair(uint32_t v) {
  constexpr int mantissa = Bits == 4 ? 1 : 3, to = 10 - mantissa;
  constexpr int sign = P + Bits - 1;
  constexpr uint32_t magnitude = ((1u << (Bits - 1)) - 1u) * 0x10001u << to;
  return and_or(shift_left<15 - sign>(v), 0x80008000u,
                shift_left<to - P>(v) & magnitude);
}

__device__ __forceinline__ void halves(uint32_t h, float& lo, float& hi) {
  lo = __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
  hi = __half2float(__ushort_as_half(static_cast<unsigned short>(h >> 16)));
}

/** The 8 codes of run c of a block (codes 8c to 8c + 7: word c at 4 bits,
 *  words 2c and 2c + 1 at 8), each its value / fp_unscale<Bits>. */
template <int Bits>
__device__ __forceinline__ void fp_run(const uint32_t (&v)[Bits], int c,
                                       float (&q)[8]) {
  if constexpr (Bits == 4) {
    const uint32_t w = v[c];
    halves(fp_pair<4, 0>(w), q[0], q[4]);
    halves(fp_pair<4, 4>(w), q[1], q[5]);
    halves(fp_pair<4, 8>(w), q[2], q[6]);
    halves(fp_pair<4, 12>(w), q[3], q[7]);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t w = v[2 * c + h];
      halves(fp_pair<8, 0>(w), q[4 * h], q[4 * h + 2]);
      halves(fp_pair<8, 8>(w), q[4 * h + 1], q[4 * h + 3]);
    }
  }
}

/** Whether any of the Bits words holds an e4m3 NaN (0x7f or 0xff: low
 *  seven bits all set, which adding 1 carries into bit 7). */
template <int Bits>
__device__ __forceinline__ bool any_e4m3_nan(const uint32_t (&v)[Bits]) {
  uint32_t any = 0;
#pragma unroll
  for (int i = 0; i < Bits; ++i) any |= (v[i] & 0x7f7f7f7fu) + 0x01010101u;
  return (any & 0x80808080u) != 0;
}

/** A group's scale as a float: 2^(c - 127) for e8m0 (2^-127 a
 *  subnormal; 255 reads as infinity, as the CPU's table has it), or the
 *  e4m3 value of c (NaN for 0x7f and 0xff). */
template <bool E4m3>
__device__ __forceinline__ float fp_scale(uint32_t c) {
  if constexpr (E4m3) {
    if ((c & 0x7fu) == 0x7fu) return __uint_as_float(0x7fc00000u);
    float lo, hi;
    halves(fp_pair<8, 0>(c), lo, hi);
    return lo * fp_unscale<8>;
  } else {
    return __uint_as_float(c != 0 ? c << 23 : 0x00400000u);
  }
}

} // namespace quantized

/** out[z][r0 + r][o] = sum over k of x[z][r0 + r][k] * scale * value for
 *  Rows rows of x and qmv_outputs weight rows per group of Threads
 *  threads, as quantized_matvec (its blocks, pointers and reduction; each
 *  thread a 32-code block at a time). Per group of codes, (x . values) in
 *  float32 times the scale, as the CPU kernel. x (.., m, k), w (.., n, k *
 *  Bits / 32), scales (.., n, k / GroupSize) uint8 and out (.., m, n)
 *  row-major; k a multiple of 32; blockIdx.z the batch entry, its weight
 *  entry z or the one of w_count that w_index[z] picks (GatherMM's rule). */
template <typename T, int Bits, int GroupSize, int Rows, int Threads>
__global__ void __launch_bounds__(qmv_threads) quantized_matvec_fp(
    const T* __restrict__ x, const uint32_t* __restrict__ w,
    const uint8_t* __restrict__ scales, T* __restrict__ out, int64_t m,
    int64_t n, int64_t k, int64_t x_batch, int64_t w_batch, int64_t p_batch,
    int64_t out_batch, const uint32_t* __restrict__ w_index,
    int64_t w_count) {
  static_assert(Bits == 4 || Bits == 8);
  static_assert(GroupSize == 16 || GroupSize == 32);
  constexpr int R = Rows, O = qmv_outputs;
  // Groups in a 32-code block, and 8-code runs in a group.
  constexpr int block_groups = 32 / GroupSize, group_runs = GroupSize / 8;
  const auto [z, o0, r0, matrix] =
      quantized::matvec_place<Rows, Threads>(w_index, w_count);
  const int64_t words = k / 32 * Bits, groups = k / GroupSize;
  x += z * x_batch + r0 * k;
  w += matrix * w_batch;
  scales += matrix * p_batch;
  float acc[O][R] = {};
  const int blocks = static_cast<int>(k / 32);
  const int first = threadIdx.x % Threads;
  const T* xb = x + int64_t(first) * 32;
  const uint32_t* wb = w + int64_t(first) * Bits;
  const uint8_t* sb = scales + int64_t(first) * block_groups;
  for (int b = first; b < blocks; b += Threads, xb += Threads * 32,
           wb += Threads * Bits, sb += Threads * block_groups) {
    uint32_t v[O][Bits];
    float s[O][block_groups];
#pragma unroll
    for (int o = 0; o < O; ++o) {
      // Rows past n read row n - 1 again (never stored).
      const int64_t row = o0 + o < n ? o0 + o : n - 1;
      quantized::load_block<Bits>(wb + row * words, v[o]);
#pragma unroll
      for (int g = 0; g < block_groups; ++g) {
        s[o][g] = quantized::fp_scale<GroupSize == 16>(sb[row * groups + g]);
      }
      if constexpr (Bits == 8) {
        // An e4m3 NaN code makes the block's share NaN, as its product
        // would be.
        if (quantized::any_e4m3_nan(v[o])) s[o][0] = __uint_as_float(~0u);
      }
    }
    float dot[O][R] = {};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float xv[R][8];
      quantized::load_x_run(xb + c * 8, k, r0, m, xv);
#pragma unroll
      for (int o = 0; o < O; ++o) {
        float q[8];
        quantized::fp_run<Bits>(v[o], c, q);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int r = 0; r < R; ++r) dot[o][r] += xv[r][j] * q[j];
        }
      }
      if ((c + 1) % group_runs == 0) {
        // The group's sums: times the decode's 2^14 or 2^8 first (exact),
        // so a large scale does not overflow before the sum shrinks it.
        const int g = c / group_runs;
#pragma unroll
        for (int o = 0; o < O; ++o) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            acc[o][r] += dot[o][r] * quantized::fp_unscale<Bits> * s[o][g];
            dot[o][r] = 0.0f;
          }
        }
      }
    }
  }
  quantized::matvec_store<T, Threads>(acc, out + z * out_batch, m, n, r0);
}

/** Unpacks `runs` 8-code runs of w (row-major, rows of whole groups) into
 *  out: value * (scale * factor[0], when factor is given) in float32, then
 *  cast to Out, as the CPU kernel computes it. A thread takes a run (Bits
 *  bytes), so a warp's stores cover one contiguous span. */
template <typename Out, int Bits, int GroupSize>
__global__ void dequantize_fp(const uint32_t* __restrict__ w,
                              const uint8_t* __restrict__ scales,
                              const float* __restrict__ factor,
                              Out* __restrict__ out, int64_t runs) {
  for (int64_t r = first_index<1>(); r < runs; r += grid_step<1>()) {
    uint32_t v[Bits];
    const uint32_t* p = w + r * (Bits / 4);
    v[0] = __ldg(p);
    if constexpr (Bits == 8) v[1] = __ldg(p + 1);
    float q[8];
    quantized::fp_run<Bits>(v, 0, q); // run 0: the first word or two
    float s = quantized::fp_scale<GroupSize == 16>(scales[r * 8 / GroupSize]);
    if (factor) s = s * factor[0];
    constexpr int per = 16 / sizeof(Out);
#pragma unroll
    for (int i = 0; i < 8 / per; ++i) {
      Vec<Out, per> o;
#pragma unroll
      for (int j = 0; j < per; ++j) {
        float value = q[i * per + j] * quantized::fp_unscale<Bits>;
        if constexpr (Bits == 8) {
          // e4m3's NaN codes.
          const uint32_t code = v[(i * per + j) / 4] >> ((i * per + j) % 4 * 8);
          if ((code & 0x7fu) == 0x7fu) value = __uint_as_float(0x7fc00000u);
        }
        o.v[j] = cast_to<Out>(value * s);
      }
      reinterpret_cast<Vec<Out, per>*>(out + r * 8)[i] = o;
    }
  }
}

} // namespace kiln::cuda
