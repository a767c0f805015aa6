// Affine-quantized weights on the GPU (ops/quantized.cpp defines the
// format): codes of Bits bits in a little-endian bit stream of uint32
// words, 32 codes filling exactly Bits words (a "block"), and a scale and
// bias per group of 32, 64 or 128 codes, so a block never straddles groups.
//
// quantized_matvec: out = x @ dequantize(w).T for a few rows of x read
// straight from the packed codes (a decode step moves Bits / 16 of the
// bytes of a float16 weight). dequantize: the weight unpacked, for the
// many-row case (a GEMM follows) and the dequantize op.
#pragma once

#include "kiln/backend/cuda/device/addresses.cuh"
#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

namespace quantized {

/** The Bits words of one 32-code block, loaded in the widest accesses the
 *  block's alignment allows (rows of blocks start on a block boundary of a
 *  16-byte aligned buffer: 4 * Bits bytes). */
template <int Bits>
__device__ __forceinline__ void load_block(const uint32_t* p,
                                           uint32_t (&v)[Bits]) {
  if constexpr (Bits % 4 == 0) {
#pragma unroll
    for (int i = 0; i < Bits / 4; ++i) {
      uint4 u = __ldg(reinterpret_cast<const uint4*>(p) + i);
      v[4 * i] = u.x, v[4 * i + 1] = u.y, v[4 * i + 2] = u.z,
      v[4 * i + 3] = u.w;
    }
  } else if constexpr (Bits % 2 == 0) {
#pragma unroll
    for (int i = 0; i < Bits / 2; ++i) {
      uint2 u = __ldg(reinterpret_cast<const uint2*>(p) + i);
      v[2 * i] = u.x, v[2 * i + 1] = u.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < Bits; ++i) v[i] = __ldg(p + i);
  }
}

/** Code j of a block as a float: the bit field ORed into float 2^23's
 *  mantissa, then 2^23 taken off (exact, and cheaper than an integer to
 *  float conversion). Called in fully unrolled loops, so j, the word and
 *  the shifts are constants and v stays in registers. */
template <int Bits>
__device__ __forceinline__ float code_at(const uint32_t (&v)[Bits], int j) {
  const int bit = j * Bits, word = bit / 32, shift = bit % 32;
  constexpr uint32_t mask = (1u << Bits) - 1u;
  uint32_t c = v[word] >> shift;
  if (shift + Bits > 32) c |= v[word + 1] << (32 - shift);
  return __uint_as_float(0x4b000000u | (c & mask)) - 8388608.0f;
}

/** Eight consecutive elements of x as floats. */
template <typename T>
__device__ __forceinline__ void load_eight(const T* p, float (&f)[8]) {
  if constexpr (sizeof(T) == 2) {
    uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const T* h = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = static_cast<float>(h[i]);
  } else {
    float4 a = __ldg(reinterpret_cast<const float4*>(p));
    float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
    f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  }
}

} // namespace quantized

/** Threads and output rows of a quantized_matvec block. */
inline constexpr int qmv_threads = 128;
inline constexpr int qmv_outputs = 4;

/** out[z][r0 + r][o] = sum over k of x[z][r0 + r][k] * (scale * code +
 *  bias) for Rows rows of x (r0 = blockIdx.y * Rows, those below m) and
 *  qmv_outputs rows o of the weight (blockIdx.x's). The block's 128
 *  threads deal out the row's 32-code blocks, each thread reading every
 *  output row's codes of its block against the same x (loaded once for
 *  qmv_outputs rows); per block, scale * (x . codes) + bias * sum(x) in
 *  float32, as the CPU kernel. Sums meet through shuffles and shared
 *  memory. x (.., m, k), w (.., n, k * Bits / 32), scales and biases
 *  (.., n, k / group_size) and out (.., m, n) are row-major; blockIdx.z
 *  is the batch entry (strides in elements), whose weight matrix is entry
 *  z, or, with w_index, the one of w_count that w_index[z] picks
 *  (GatherMM's rule: int32, negative from the end, clamped). */
template <typename T, int Bits, int Rows>
__global__ void __launch_bounds__(qmv_threads) quantized_matvec(
    const T* __restrict__ x, const uint32_t* __restrict__ w,
    const T* __restrict__ scales, const T* __restrict__ biases,
    T* __restrict__ out, int64_t m, int64_t n, int64_t k, int group_size,
    int64_t x_batch, int64_t w_batch, int64_t p_batch, int64_t out_batch,
    const uint32_t* __restrict__ w_index, int64_t w_count) {
  constexpr int R = Rows, O = qmv_outputs;
  const int64_t z = blockIdx.z;
  const int64_t o0 = int64_t(blockIdx.x) * O;
  const int64_t r0 = int64_t(blockIdx.y) * R;
  const int64_t words = k / 32 * Bits, groups = k / group_size;
  const int64_t matrix = w_index ? picked_offset(w_index[z], w_count, 1) : z;
  x += z * x_batch + r0 * k;
  w += matrix * w_batch;
  scales += matrix * p_batch;
  biases += matrix * p_batch;
  float acc[O][R] = {};
  for (int64_t b = threadIdx.x; b < k / 32; b += qmv_threads) {
    uint32_t v[O][Bits];
    float s[O], bias[O];
    const int64_t g = b * 32 / group_size;
#pragma unroll
    for (int o = 0; o < O; ++o) {
      // Rows past n read row n - 1 again (never stored).
      int64_t row = o0 + o < n ? o0 + o : n - 1;
      quantized::load_block<Bits>(w + row * words + b * Bits, v[o]);
      s[o] = static_cast<float>(scales[row * groups + g]);
      bias[o] = static_cast<float>(biases[row * groups + g]);
    }
    // The block in four runs of eight codes: x's run for every row (zeros
    // past m), then each output row's codes against it.
    float dot[O][R] = {}, xsum[R] = {};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float xv[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r0 + r < m) {
          quantized::load_eight(x + r * k + b * 32 + c * 8, xv[r]);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) xv[r][j] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) xsum[r] += xv[r][j];
      }
#pragma unroll
      for (int o = 0; o < O; ++o) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float q = quantized::code_at<Bits>(v[o], c * 8 + j);
#pragma unroll
          for (int r = 0; r < R; ++r) dot[o][r] += xv[r][j] * q;
        }
      }
    }
#pragma unroll
    for (int o = 0; o < O; ++o) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[o][r] += s[o] * dot[o][r] + bias[o] * xsum[r];
      }
    }
  }
  // Warp sums, then the warps' sums in shared memory.
  __shared__ float partial[qmv_threads / 32][O * R];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 0; o < O; ++o) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float a = acc[o][r];
#pragma unroll
      for (int d = 16; d > 0; d /= 2) a += __shfl_xor_sync(0xffffffffu, a, d);
      if (lane == 0) partial[warp][o * R + r] = a;
    }
  }
  __syncthreads();
  if (threadIdx.x < O * R) {
    int o = threadIdx.x / R, r = threadIdx.x % R;
    if (o0 + o < n && r0 + r < m) {
      float a = 0.0f;
#pragma unroll
      for (int i = 0; i < qmv_threads / 32; ++i) a += partial[i][o * R + r];
      out[z * out_batch + (r0 + r) * n + o0 + o] = cast_to<T>(a);
    }
  }
}

/** Unpacks `blocks` 32-code blocks of w (row-major, rows of whole groups)
 *  into out: code * scale + bias in S (the scales' type), each step
 *  rounded to S as the graph of ops computes it, then cast to Out. One
 *  block of codes per thread. */
template <typename S, typename Out, int Bits>
__global__ void dequantize(const uint32_t* __restrict__ w,
                           const S* __restrict__ scales,
                           const S* __restrict__ biases, Out* __restrict__ out,
                           int64_t blocks, int group_size) {
  for (int64_t b = first_index<1>(); b < blocks; b += grid_step<1>()) {
    uint32_t v[Bits];
    quantized::load_block<Bits>(w + b * Bits, v);
    const int64_t g = b * 32 / group_size;
    const float s = static_cast<float>(scales[g]);
    const float c = static_cast<float>(biases[g]);
    // 32 outputs in whole 16-byte stores for every output type.
    constexpr int per = 16 / sizeof(Out);
#pragma unroll
    for (int i = 0; i < 32 / per; ++i) {
      Vec<Out, per> r;
#pragma unroll
      for (int j = 0; j < per; ++j) {
        float q = quantized::code_at<Bits>(v, i * per + j);
        // _rn: no multiply-add contraction (the graph rounds twice).
        float y = static_cast<float>(cast_to<S>(__fmul_rn(q, s)));
        r.v[j] = cast_to<Out>(cast_to<S>(__fadd_rn(y, c)));
      }
      reinterpret_cast<Vec<Out, per>*>(out + b * 32)[i] = r;
    }
  }
}

} // namespace kiln::cuda
