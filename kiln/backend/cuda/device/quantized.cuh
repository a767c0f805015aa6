// Affine-quantized weights on the GPU (ops/quantized.cpp defines the
// format): codes of Bits bits in a little-endian bit stream of uint32
// words, 32 codes filling exactly Bits words (a "block"), and a scale and
// bias per group of 32, 64 or 128 codes, so a block never straddles groups.
//
// quantized_matvec: out = x @ dequantize(w).T for a few rows of x read
// straight from the packed codes (a decode step moves Bits / 16 of the
// bytes of a float16 weight), any width and dtype. quantized_mma: the same
// for float16/bfloat16 x at 4 and 8 bits on tensor cores, 16 rows a block;
// quantized_gemm: 64 rows a block, for a few dozen rows. dequantize: the
// weight unpacked, for the many-row case (a GEMM follows) and the
// dequantize op.
#pragma once

#include "kiln/backend/cuda/device/addresses.cuh"
#include "kiln/backend/cuda/device/async_copy.cuh"
#include "kiln/backend/cuda/device/mma.cuh"
#include "kiln/backend/cuda/device/quantized_blocks.cuh"
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

/** (a & b) | c in one instruction: written out as PTX, since with b and c
 *  both constants the compiler emits an AND and an OR. */
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b,
                                           uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/** The power of two (its exponent) at which code_at returns code j of a
 *  block: a field that ends below the mantissa's top bit (bit 23) is read
 *  where it lies, 2^shift * code; one that ends above it, from the word's
 *  high half (16 less); one that straddles two words is shifted down. */
template <int Bits>
__host__ __device__ constexpr int code_exponent(int j) {
  const int shift = j * Bits % 32;
  return shift + Bits > 32 ? 0 : shift + Bits <= 23 ? shift : shift - 16;
}

/** Code j of a block times 2^code_exponent(j), as a float: the bit field,
 *  masked where it lies, ORed into float 2^23's mantissa, then 2^23 taken
 *  off (exact, and cheaper than an integer to float conversion; one lop3
 *  and one add, no shift for most fields). The caller scales x by
 *  2^-code_exponent(j), so that each product is x * code exactly. Called
 *  in fully unrolled loops, so j, the word and the shifts are constants
 *  and v stays in registers. */
template <int Bits>
__device__ __forceinline__ float code_at(const uint32_t (&v)[Bits], int j) {
  const int bit = j * Bits, word = bit / 32, shift = bit % 32;
  constexpr uint32_t mask = (1u << Bits) - 1u, magic = 0x4b000000u;
  uint32_t biased;
  if (shift + Bits > 32) {
    const uint32_t c = (v[word] >> shift) | (v[word + 1] << (32 - shift));
    biased = and_or(c, mask, magic);
  } else if (shift + Bits <= 23) {
    biased = and_or(v[word], mask << shift, magic);
  } else {
    biased = and_or(v[word] >> 16, mask << (shift - 16), magic);
  }
  return __uint_as_float(biased) - 8388608.0f;
}

/** 2^-e as a float, for e in [0, 31]. */
__device__ __forceinline__ float inverse_power_of_two(int e) {
  return __uint_as_float(static_cast<uint32_t>(127 - e) << 23);
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

/** Eight consecutive elements of R rows of x (k apart, rows r0 + r of
 *  m) as floats, zeros for the rows past m. */
template <typename T, int R>
__device__ __forceinline__ void load_x_run(const T* p, int64_t k, int64_t r0,
                                           int64_t m, float (&xv)[R][8]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r0 + r < m) {
      load_eight(p + r * k, xv[r]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) xv[r][j] = 0.0f;
    }
  }
}

/** Where a matvec block's thread works: its batch entry z
 *  (blockIdx.z), its group's first weight row o0, the block's first row
 *  of x r0, and the entry's weight matrix (z, or the one of w_count that
 *  w_index[z] picks: GatherMM's rule, int32, negative from the end,
 *  clamped). */
struct MatvecPlace {
  int64_t z, o0, r0, matrix;
};

template <int Rows, int Threads>
__device__ __forceinline__ MatvecPlace matvec_place(const uint32_t* w_index,
                                                    int64_t w_count) {
  constexpr int groups_per_block = qmv_threads / Threads;
  const int group = threadIdx.x / Threads;
  const int64_t z = blockIdx.z;
  return {z, (int64_t(blockIdx.x) * groups_per_block + group) * qmv_outputs,
          int64_t(blockIdx.y) * Rows,
          w_index ? picked_offset(w_index[z], w_count, 1) : z};
}

/** The end of a matvec block (quantized_matvec's and
 *  quantized_matvec_fp's): each thread's sums for O weight rows and R
 *  rows of x added up over its group of Threads threads (warp shuffles,
 *  then the group's warps in order from shared memory) and stored to out
 *  (m, n) row-major, rows r0 + r of x below m, weight rows below n. */
template <typename T, int Threads, int O, int R>
__device__ __forceinline__ void matvec_store(const float (&acc)[O][R],
                                             T* __restrict__ out, int64_t m,
                                             int64_t n, int64_t r0) {
  constexpr int groups_per_block = qmv_threads / Threads;
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
  if (threadIdx.x < groups_per_block * O * R) {
    const int g = threadIdx.x / (O * R), v = threadIdx.x % (O * R);
    const int o = v / R, r = v % R;
    const int64_t row = (int64_t(blockIdx.x) * groups_per_block + g) * O + o;
    if (row < n && r0 + r < m) {
      constexpr int warps = Threads / 32;
      float a = 0.0f;
#pragma unroll
      for (int i = 0; i < warps; ++i) a += partial[g * warps + i][v];
      out[(r0 + r) * n + row] = cast_to<T>(a);
    }
  }
}

} // namespace quantized

/** out[z][r0 + r][o] = sum over k of x[z][r0 + r][k] * (scale * code +
 *  bias) for Rows rows of x (r0 = blockIdx.y * Rows, those below m) and
 *  the weight rows o of blockIdx.x: qmv_outputs rows for each group of
 *  Threads threads (128, or 64 or 32 for rows of fewer 32-code blocks
 *  than that, so that none idles: a block then takes 2 or 4 groups). A
 *  group's threads deal out the row's 32-code blocks, each thread reading
 *  every output row's codes of its block against the same x (loaded once
 *  for qmv_outputs rows); per block, scale * (x . codes) + bias * sum(x)
 *  in float32, as the CPU kernel. Sums meet through shuffles and shared
 *  memory. x (.., m, k), w (.., n, k * Bits / 32), scales and biases
 *  (.., n, k / group_size) and out (.., m, n) are row-major; blockIdx.z
 *  is the batch entry (strides in elements), whose weight matrix is entry
 *  z, or, with w_index, the one of w_count that w_index[z] picks
 *  (GatherMM's rule: int32, negative from the end, clamped). */
template <typename T, int Bits, int Rows, int Threads>
__global__ void __launch_bounds__(qmv_threads) quantized_matvec(
    const T* __restrict__ x, const uint32_t* __restrict__ w,
    const T* __restrict__ scales, const T* __restrict__ biases,
    T* __restrict__ out, int64_t m, int64_t n, int64_t k, int group_size,
    int64_t x_batch, int64_t w_batch, int64_t p_batch, int64_t out_batch,
    const uint32_t* __restrict__ w_index, int64_t w_count) {
  static_assert(Threads == 32 || Threads == 64 || Threads == 128);
  constexpr int R = Rows, O = qmv_outputs;
  // The loop below is issue-bound: its stride is a constant (a run-time
  // stride cost it 6 % more instructions at 4 bits) and the scales' group
  // a shift (group_size is 32, 64 or 128: 1, 2 or 4 blocks).
  const int group_shift = __ffs(group_size) - 6;
  const auto [z, o0, r0, matrix] =
      quantized::matvec_place<Rows, Threads>(w_index, w_count);
  const int64_t words = k / 32 * Bits, groups = k / group_size;
  x += z * x_batch + r0 * k;
  w += matrix * w_batch;
  scales += matrix * p_batch;
  biases += matrix * p_batch;
  float acc[O][R] = {};
  // The thread's blocks b: x and the codes through pointers that step on
  // (offsets b * 32 recomputed in 64 bits cost the loop 8 % more
  // instructions; in 32 bits they would overflow past k = 2^31).
  const int blocks = static_cast<int>(k / 32);
  const int first = threadIdx.x % Threads;
  const T* xb = x + int64_t(first) * 32;
  const uint32_t* wb = w + int64_t(first) * Bits;
  for (int b = first; b < blocks;
       b += Threads, xb += Threads * 32, wb += Threads * Bits) {
    uint32_t v[O][Bits];
    float s[O], bias[O];
    const int g = b >> group_shift;
#pragma unroll
    for (int o = 0; o < O; ++o) {
      // Rows past n read row n - 1 again (never stored).
      int64_t row = o0 + o < n ? o0 + o : n - 1;
      quantized::load_block<Bits>(wb + row * words, v[o]);
      s[o] = static_cast<float>(scales[row * groups + g]);
      bias[o] = static_cast<float>(biases[row * groups + g]);
    }
    // The block in four runs of eight codes: x's run for every row (zeros
    // past m), then each output row's codes against it.
    float dot[O][R] = {}, xsum[R] = {};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float xv[R][8];
      quantized::load_x_run(xb + c * 8, k, r0, m, xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          xsum[r] += xv[r][j];
          // code_at's codes come times 2^e: x times 2^-e (exact).
          const int e = quantized::code_exponent<Bits>(c * 8 + j);
          if (e != 0) xv[r][j] *= quantized::inverse_power_of_two(e);
        }
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
  quantized::matvec_store<T, Threads>(acc, out + z * out_batch, m, n, r0);
}

/** Warps of a quantized_mma block at most, the 8-row tiles of the weight
 *  that each warp takes (32 weight rows per block), and the chunks of
 *  codes each warp keeps in its ring in shared memory: qmma_stages *
 *  qmma_weight_tiles * 512 bytes a warp (8 KB; 128 KB for 16 warps). */
inline constexpr int qmma_max_warps = 16;
inline constexpr int qmma_weight_tiles = 4;
inline constexpr int qmma_stages = 4;

namespace quantized {

template <typename To, typename From>
__device__ __forceinline__ To bits_as(const From& f) {
  static_assert(sizeof(To) == sizeof(From));
  return *reinterpret_cast<const To*>(&f);
}

/** B fragments of quantized_mma from words of codes, scale * code + bias
 *  rounded to T. A code is ORed into the low mantissa bits of a 16-bit
 *  float 2^e (1024 for float16, whose ulp is 1 up to 2048; 128 for
 *  bfloat16, ulp 1 up to 256, so 4-bit codes only), which is then 2^e +
 *  code: subtracting 2^e is exact and a fused multiply-add rounds once,
 *  two codes per instruction. At 4 bits in float16 the odd nibbles stay in
 *  place, 1024 + 16 code, and an FMA by 1/16 less 64 (exact) gives the
 *  code: one shift a word rather than three. 8-bit codes in bfloat16 go
 *  through float 2^23 the same way. Per word the k16 steps' register pairs
 *  in order: at 4 bits codes (0, 4) and (1, 5), then (2, 6) and (3, 7); at
 *  8 bits (0, 2) and (1, 3) (a byte permute each). */
template <typename T, int Bits>
struct Decoder {
  static_assert(Bits == 4 || Bits == 8);
  static constexpr int regs = Bits == 4 ? 4 : 2;
  static constexpr bool half = is_same_v<T, __half>;
  static constexpr bool via_float = Bits == 8 && !half;
  using P = conditional_t<half, __half2, __nv_bfloat162>;
  static constexpr uint32_t magic = half ? 0x64006400u : 0x43004300u;
  P scale, bias;
  float fscale, fbias;

  __device__ __forceinline__ void set(T s, T b) {
    if constexpr (via_float) {
      fscale = static_cast<float>(s), fbias = static_cast<float>(b);
    } else {
      scale = P(s, s), bias = P(b, b);
    }
  }

  /** scale * code + bias from a pair 2^e + code. */
  __device__ __forceinline__ uint32_t pair(uint32_t biased) const {
    const uint32_t base = magic; // a copy: bits_as takes a reference
    P h = bits_as<P>(biased), m = bits_as<P>(base);
    return bits_as<uint32_t>(__hfma2(__hsub2(h, m), scale, bias));
  }

  /** The same from a float16 pair 1024 + 16 code. */
  __device__ __forceinline__ uint32_t high_pair(uint32_t biased) const {
    const __half2 h = bits_as<__half2>(biased);
    const __half2 code = __hfma2(h, __half2(__half(0.0625f), __half(0.0625f)),
                                 __half2(__half(-64.0f), __half(-64.0f)));
    return bits_as<uint32_t>(__hfma2(code, scale, bias));
  }

  __device__ __forceinline__ void fragments(uint32_t q,
                                            uint32_t (&r)[regs]) const {
    if constexpr (Bits == 4 && half) {
      const uint32_t q2 = q >> 8;
      r[0] = pair(and_or(q, 0x000f000fu, magic));
      r[1] = high_pair(and_or(q, 0x00f000f0u, magic));
      r[2] = pair(and_or(q2, 0x000f000fu, magic));
      r[3] = high_pair(and_or(q2, 0x00f000f0u, magic));
    } else if constexpr (Bits == 4) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        r[i] = pair(and_or(q >> (4 * i), 0x000f000fu, magic));
      }
    } else if constexpr (!via_float) {
      r[0] = pair(__byte_perm(q, 0x64646464u, 0x4240));
      r[1] = pair(__byte_perm(q, 0x64646464u, 0x4341));
    } else {
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float c = __uint_as_float(__byte_perm(q, 0x4b000000u, 0x7540 | i)) -
                  8388608.0f;
        v[i] = fmaf(c, fscale, fbias);
      }
      r[0] = bits_as<uint32_t>(__floats2bfloat162_rn(v[0], v[2]));
      r[1] = bits_as<uint32_t>(__floats2bfloat162_rn(v[1], v[3]));
    }
  }
};

/** Row half h (0: row g, 1: row g + 8) of the A fragments of one word's
 *  k16 steps, from x at the positions of the word's codes in Decoder's
 *  pairs: 4 bits, (0, 4) and (1, 5), then (2, 6) and (3, 7), of 8 values
 *  in v (x, y, z, w: values 0-1, 2-3, 4-5, 6-7); 8 bits, (0, 2) and (1, 3)
 *  of 4 values in v.x and v.y. */
template <int Bits>
__device__ __forceinline__ void x_pairs(const uint4& v, int h,
                                        uint32_t (&a)[8 / Bits][4]) {
  if constexpr (Bits == 4) {
    a[0][h] = __byte_perm(v.x, v.z, 0x5410);
    a[0][h + 2] = __byte_perm(v.x, v.z, 0x7632);
    a[1][h] = __byte_perm(v.y, v.w, 0x5410);
    a[1][h + 2] = __byte_perm(v.y, v.w, 0x7632);
  } else {
    a[0][h] = __byte_perm(v.x, v.y, 0x5410);
    a[0][h + 2] = __byte_perm(v.x, v.y, 0x7632);
  }
}

/** x_pairs' values of one word: 8 (4 bits) or 4 (8 bits) elements of 16
 *  bits from global p, or zeros when !valid (p is not read then). */
template <int Bits>
__device__ __forceinline__ uint4 x_values(const void* p, bool valid) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (!valid) return v;
  if constexpr (Bits == 4) {
    v = __ldg(reinterpret_cast<const uint4*>(p));
  } else {
    uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
    v.x = u.x, v.y = u.y;
  }
  return v;
}

/** A fragments of one word's k16 steps for rows g (xr[0]) and g + 8
 *  (xr[1]) of the block's 16, x from k0 (x_pairs); zeros when !valid. */
template <typename T, int Bits>
__device__ __forceinline__ void x_fragments(const T* const (&xr)[2],
                                            bool valid, int64_t k0,
                                            uint32_t (&a)[8 / Bits][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    x_pairs<Bits>(x_values<Bits>(xr[h] + k0, valid), h, a);
  }
}

} // namespace quantized

/** out[z] = x[z] @ dequantize(w[matrix]).T on tensor cores for T float16
 *  or bfloat16 and Bits 4 or 8. A block takes 16 rows of x (from r0 =
 *  blockIdx.y * 16; past m, row m - 1 again, its outputs not stored)
 *  against the 32 weight rows of blockIdx.x, and its warps deal out the
 *  inner dimension in chunks: per weight row, a quad of lanes reads 16
 *  bytes of codes each (128 codes at 4 bits, 64 at 8). The codes stream through
 * a ring of qmma_stages chunks per warp in shared memory (cp.async; each lane
 * reads back only what it copied, so no barrier), qmma_stages - 1 chunks ahead
 * of the one decoded, and the scales and biases one chunk ahead in registers,
 * so that loads stay in flight while the warp computes. The weight keeps its
 * layout: an mma step sums over its 16 k slots in any order, so lane t's slots
 * are mapped onto the codes that its own registers hold (Decoder's pairs) and
 * its A fragment is gathered from x at the same positions (x_fragments).
 * Products sum in float32; the warps' partial tiles add up in shared memory
 * (the ring's, reused) in warp order (the same sums every run). Dynamic shared
 * memory: warps * qmma_weight_tiles
 *  * 512 bytes times qmma_stages or, if fewer, the most chunks a warp
 *  takes. Arguments as quantized_matvec's. */
template <typename T, int Bits>
__global__ void __launch_bounds__(32 * qmma_max_warps) quantized_mma(
    const T* __restrict__ x, const uint32_t* __restrict__ w,
    const T* __restrict__ scales, const T* __restrict__ biases,
    T* __restrict__ out, int64_t m, int64_t n, int64_t k, int group_size,
    int64_t x_batch, int64_t w_batch, int64_t p_batch, int64_t out_batch,
    const uint32_t* __restrict__ w_index, int64_t w_count) {
  constexpr int NT = qmma_weight_tiles, S = qmma_stages;
  constexpr int per_lane = 128 / Bits, chunk = 4 * per_lane;
  constexpr int steps = 8 / Bits; // k16 steps per word
  using Dec = quantized::Decoder<T, Bits>;
  extern __shared__ __align__(16) unsigned char qmma_smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t z = blockIdx.z;
  const int64_t n0 = int64_t(blockIdx.x) * 8 * NT;
  const int64_t r0 = int64_t(blockIdx.y) * 16;
  const int64_t words = k / 32 * Bits, groups = k / group_size;
  const int64_t matrix = w_index ? picked_offset(w_index[z], w_count, 1) : z;
  x += z * x_batch;
  w += matrix * w_batch;
  scales += matrix * p_batch;
  biases += matrix * p_batch;
  // This lane's weight rows, one per 8-row tile, and its rows of x, g and
  // g + 8; past n or m, the last row again (an output row depends on its
  // own row of x and column of the weight alone, and these are never
  // stored).
  const uint32_t* wr[NT];
  const T *sr[NT], *br[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int64_t row = n0 + 8 * i + g < n ? n0 + 8 * i + g : n - 1;
    wr[i] = w + row * words;
    sr[i] = scales + row * groups;
    br[i] = biases + row * groups;
  }
  const T* xr[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t row = r0 + 8 * h + g;
    xr[h] = x + (row < m ? row : m - 1) * k;
  }
  const int group_shift = __ffs(group_size) - 1; // a power of two
  // The warp's chunks are warp, warp + warps, ...: `mine` of them. Its
  // ring: `slots` (S, or fewer when no warp has S chunks) of NT * 32
  // 16-byte units, lane-minor.
  const int64_t chunks = (k + chunk - 1) / chunk;
  const int64_t mine = warp < chunks ? (chunks - warp + warps - 1) / warps : 0;
  const int64_t most = (chunks + warps - 1) / warps;
  const int slots = most < S ? static_cast<int>(most) : S;
  uint4* ring = reinterpret_cast<uint4*>(qmma_smem) + warp * slots * NT * 32;
  // Lane t's first code of the warp's i-th chunk.
  auto first_code = [&](int64_t i) {
    return (warp + i * warps) * chunk + t * per_lane;
  };
  // Starts copying the warp's i-th chunk into slot i % S (zeros past k);
  // past the warp's chunks nothing is copied (the slot may not exist), but
  // a group is committed all the same, so that wait_copies counts right.
  auto issue = [&](int64_t i) {
    if (i < mine) {
      const int64_t kk = first_code(i);
      const bool valid = kk < k;
      uint4* slot = ring + (i % S) * NT * 32;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        copy16_async(slot + j * 32 + lane,
                     valid ? wr[j] + kk * Bits / 32 : w, valid);
      }
    }
    commit_copies();
  };
  // The scales and biases of the warp's i-th chunk (the first group's
  // past k: finite, against zeros of x); past its chunks, unchanged.
  T sc[NT], bi[NT];
  auto params = [&](int64_t i, T(&s)[NT], T(&b)[NT]) {
    if (i >= mine) {
#pragma unroll
      for (int j = 0; j < NT; ++j) s[j] = sc[j], b[j] = bi[j];
      return;
    }
    const int64_t kk = first_code(i);
    const int64_t grp = (kk < k ? kk : 0) >> group_shift;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      s[j] = sr[j][grp];
      b[j] = br[j][grp];
    }
  };
#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue(i);
  params(0, sc, bi);
  float acc[NT][4] = {};
  for (int64_t i = 0; i < mine; ++i) {
    issue(i + S - 1);
    T next_sc[NT], next_bi[NT];
    params(i + 1, next_sc, next_bi);
    wait_copies<S - 1>(); // chunk i's group (S - 1 younger ones may wait)
    const uint4* slot = ring + (i % S) * NT * 32;
    uint4 q[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) q[j] = slot[j * 32 + lane];
    // Lanes past k (its last chunk's) add zeros: their x is zero, their
    // codes (zeros) decode to finite biases.
    const int64_t kk = first_code(i);
    const bool valid = kk < k;
    Dec dec[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) dec[j].set(sc[j], bi[j]);
#pragma unroll
    for (int word = 0; word < 4; ++word) {
      uint32_t b[NT][Dec::regs];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint32_t v = word == 0   ? q[j].x
                           : word == 1 ? q[j].y
                           : word == 2 ? q[j].z
                                       : q[j].w;
        dec[j].fragments(v, b[j]);
      }
      uint32_t a[steps][4];
      quantized::x_fragments<T, Bits>(xr, valid, kk + word * (per_lane / 4),
                                      a);
#pragma unroll
      for (int st = 0; st < steps; ++st) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma16816<T>(acc[j], a[st], b[j][2 * st], b[j][2 * st + 1]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) sc[j] = next_sc[j], bi[j] = next_bi[j];
  }
  wait_copies<0>(); // the ring's last (empty) copies, before its reuse
  __syncthreads();  // every warp is done with its ring
  // The warps' C fragments, lane-minor, in the ring's memory (2 KB a
  // warp); then each output summed over the warps in order.
  constexpr int values = NT * 4;
  float* part = reinterpret_cast<float*>(qmma_smem);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      part[(warp * values + j * 4 + e) * 32 + lane] = acc[j][e];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < values * 32; idx += blockDim.x) {
    const int v = idx / 32, l = idx % 32;
    float sum = 0.0f;
    for (int wp = 0; wp < warps; ++wp) {
      sum += part[(wp * values + v) * 32 + l];
    }
    const int i = v / 4, e = v % 4;
    const int64_t row = r0 + l / 4 + (e >= 2 ? 8 : 0);
    const int64_t col = n0 + 8 * i + 2 * (l % 4) + (e & 1);
    if (row < m && col < n) {
      out[z * out_batch + row * n + col] = cast_to<T>(sum);
    }
  }
}

/** quantized_gemm's block: 8 warps, 2 (over rows of x) by 4 (over weight
 *  rows), each taking 32 rows of x by 32 weight rows: 64 by 128. Two
 *  blocks fit on an SM (128 registers a thread), so one block's loads
 *  overlap the other's arithmetic. */
inline constexpr int qgemm_threads = 256;
inline constexpr int qgemm_rows = 64;
inline constexpr int qgemm_cols = 128;
inline constexpr int qgemm_blocks_per_sm = 2;

namespace quantized {

/** Where quantized_gemm keeps a chunk of x in shared memory (elements):
 *  row r's lane-t run (the values of lane t's codes) starts at r * stride
 *  + t * run. Chosen so that the 16-byte loads of an access phase (eight
 *  lanes: rows g and g + 1, t = 0 to 3) fall in distinct banks: at 4 bits
 *  the runs are 64 bytes, padded to 80 (banks 0, 20, 8, 28), and rows are
 *  320 bytes (the next row's runs start 16 banks on); at 8 bits a load
 *  takes two words' values (runs of 32 bytes: banks 0, 8, 16, 24) and
 *  rows are 144 bytes (4 banks on). */
template <int Bits>
struct StagedX {
  static constexpr int chunk = 512 / Bits; // codes per weight row
  static constexpr int run = Bits == 4 ? chunk / 4 + 8 : chunk / 4;
  static constexpr int stride = Bits == 4 ? 4 * run : chunk + 8;
  static constexpr int size = qgemm_rows * stride;
  /** Element offset of the 16-byte unit holding chunk column `col` (a
   *  multiple of 8) of row r. */
  static __device__ __forceinline__ int at(int r, int col) {
    return r * stride + col / (chunk / 4) * run + col % (chunk / 4);
  }
};

} // namespace quantized

/** out[z] = x[z] @ dequantize(w[z]).T on tensor cores for more rows of x
 *  than quantized_mma takes (T float16 or bfloat16, Bits 4 or 8): a block
 *  computes 64 rows of x (from blockIdx.y * 64; past m, zeros) by 128
 *  weight rows (blockIdx.x's), walking the inner dimension in
 *  quantized_mma's chunks (512 / Bits codes: per weight row, a quad of
 *  lanes reads 16 bytes of codes each). x's 64 rows of a chunk are staged
 *  in shared memory by cp.async (zeros past m and past k; StagedX's
 *  layout), two buffers deep, and each warp reads its A fragments from
 *  there at the positions of its lanes' codes (x_pairs) for its two m16
 *  tiles; a lane's codes, scales and biases for the next chunk load into
 *  registers while this one's are decoded (Decoder), each B fragment
 *  serving both m16 tiles. blockIdx.z is the batch entry times `splits`,
 *  plus the split: split s takes the s-th of `splits` equal runs of
 *  chunks and, with more than one, stores its float32 sums in
 *  partial[(s * batch + entry) * m * n ...] for sum_partials to add in
 *  split order; with one, the block writes out. group_size is a power of
 *  two. Strides as quantized_matvec's (elements). */
template <typename T, int Bits>
__global__ void __launch_bounds__(qgemm_threads, qgemm_blocks_per_sm)
    quantized_gemm(const T* __restrict__ x, const uint32_t* __restrict__ w,
                   const T* __restrict__ scales, const T* __restrict__ biases,
                   T* __restrict__ out, float* __restrict__ partial,
                   int64_t m, int64_t n, int64_t k, int group_size,
                   int64_t x_batch, int64_t w_batch, int64_t p_batch,
                   int64_t out_batch, int splits) {
  constexpr int NT = 4, MT = 2; // n8 tiles and m16 tiles per warp
  constexpr int per_lane = 128 / Bits, chunk = 4 * per_lane;
  constexpr int steps = 8 / Bits;
  using X = quantized::StagedX<Bits>;
  // A thread's 16-byte copies of a chunk of x: one column, rows `hop`
  // apart.
  constexpr int row_units = chunk / 8, hop = qgemm_threads / row_units;
  constexpr int copies = qgemm_rows / hop;
  using Dec = quantized::Decoder<T, Bits>;
  __shared__ alignas(16) T xs[2][X::size];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_m = warp % 2, warp_n = warp / 2;
  const int64_t batch = gridDim.z / splits;
  const int64_t z = blockIdx.z / splits;
  const int split = static_cast<int>(blockIdx.z % splits);
  const int64_t n0 = int64_t(blockIdx.x) * qgemm_cols + warp_n * 32;
  const int64_t r0 = int64_t(blockIdx.y) * qgemm_rows;
  const int64_t words = k / 32 * Bits, groups = k / group_size;
  const int group_shift = __ffs(group_size) - 1;
  x += z * x_batch;
  w += z * w_batch;
  scales += z * p_batch;
  biases += z * p_batch;
  const int64_t chunks = (k + chunk - 1) / chunk;
  const int64_t per_split = (chunks + splits - 1) / splits;
  const int64_t c0 = split * per_split;
  const int64_t c1 = c0 + per_split < chunks ? c0 + per_split : chunks;
  // This lane's weight rows (past n: row n - 1 again, never stored), as
  // 32-bit indices: pointers would take 24 registers.
  int wrow[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    wrow[i] = static_cast<int>(n0 + 8 * i + g < n ? n0 + 8 * i + g : n - 1);
  }
  const int copy_col = threadIdx.x % row_units * 8;
  const int copy_row = threadIdx.x / row_units;
  const T* x_col = x + (r0 + copy_row) * k + copy_col;
  // Starts staging chunk c's rows of x into buffer b.
  auto stage = [&](int64_t c, int b) {
    const bool in_k = c * chunk + copy_col < k;
#pragma unroll
    for (int i = 0; i < copies; ++i) {
      const bool valid = in_k && r0 + copy_row + i * hop < m;
      const T* src = x_col + (int64_t(i) * hop * k + c * chunk);
      copy16_async(&xs[b][X::at(copy_row + i * hop, copy_col)],
                   valid ? src : x, valid);
    }
    commit_copies();
  };
  // A lane's codes of a chunk (one 16-byte load per weight row), and the
  // scale and bias of their group.
  struct Codes {
    uint32_t q[NT][4];
    T s[NT], bias[NT];
  };
  static_assert(sizeof(Codes) == (16 * NT + 4 * NT));
  // Loads chunk c's codes; past the split or past k, those of the row's
  // start (finite, and against zeros of x), so that no load is guarded.
  auto load = [&](int64_t c, Codes& to) {
    int64_t kk = c * chunk + t * per_lane;
    kk = c < c1 && kk < k ? kk : 0;
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(
          w + wrow[i] * words + kk * Bits / 32));
      to.q[i][0] = v.x, to.q[i][1] = v.y, to.q[i][2] = v.z, to.q[i][3] = v.w;
      to.s[i] = scales[wrow[i] * groups + (kk >> group_shift)];
      to.bias[i] = biases[wrow[i] * groups + (kk >> group_shift)];
    }
  };
  float acc[MT][NT][4] = {};
  // Chunk c from buffer b with codes `now`, while chunk c + 1's rows of x
  // stage into the other buffer and its codes load into `next`.
  auto walk = [&](int64_t c, int b, const Codes& now, Codes& next) {
    if (c + 1 < c1) {
      stage(c + 1, b ^ 1);
    } else {
      commit_copies(); // an empty group: the wait below counts groups
    }
    load(c + 1, next);
    wait_copies<1>(); // this chunk's rows (this thread's copies)
    __syncthreads();  // and every other thread's
    Dec dec[NT];
#pragma unroll
    for (int i = 0; i < NT; ++i) dec[i].set(now.s[i], now.bias[i]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t bf[NT][Dec::regs];
#pragma unroll
      for (int i = 0; i < NT; ++i) dec[i].fragments(now.q[i][j], bf[i]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t a[steps][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = warp_m * 32 + mt * 16 + 8 * h + g;
          // At 8 bits one 16-byte load holds words j and j + 1's values.
          const T* p =
              &xs[b][r * X::stride + t * X::run + (j & ~(Bits / 8)) *
                                                      (per_lane / 4)];
          uint4 v = *reinterpret_cast<const uint4*>(p);
          if (Bits == 8 && (j & 1)) v.x = v.z, v.y = v.w;
          quantized::x_pairs<Bits>(v, h, a);
        }
#pragma unroll
        for (int st = 0; st < steps; ++st) {
#pragma unroll
          for (int i = 0; i < NT; ++i) {
            mma16816<T>(acc[mt][i], a[st], bf[i][2 * st], bf[i][2 * st + 1]);
          }
        }
      }
    }
    __syncthreads(); // buffer b is staged again two chunks on
  };
  // Two chunks a turn, the codes' registers trading roles (no copies).
  Codes even, odd;
  if (c0 < c1) {
    stage(c0, 0);
    load(c0, even);
  }
  for (int64_t c = c0; c < c1; c += 2) {
    walk(c, 0, even, odd);
    if (c + 1 < c1) walk(c + 1, 1, odd, even);
  }
  // C fragments: rows g and g + 8 of each m16 tile, columns 2t and 2t + 1
  // of each n8 tile.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < NT; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = r0 + warp_m * 32 + mt * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t col = n0 + 8 * i + 2 * t + (e & 1);
        if (row >= m || col >= n) continue;
        if (splits == 1) {
          out[z * out_batch + row * n + col] = cast_to<T>(acc[mt][i][e]);
        } else {
          partial[((split * batch + z) * m + row) * n + col] = acc[mt][i][e];
        }
      }
    }
  }
}

/** out[i] = the sum over s < splits of partial[s * size + i], in order,
 *  rounded to T (quantized_gemm's splits of the inner dimension). */
template <typename T>
__global__ void sum_partials(const float* __restrict__ partial,
                             T* __restrict__ out, int64_t size, int splits) {
  for (int64_t i = first_index<1>(); i < size; i += grid_step<1>()) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * size + i];
    out[i] = cast_to<T>(sum);
  }
}

/** Unpacks `blocks` 32-code blocks of w (row-major, rows of whole groups)
 *  into out: code * scale + bias in S (the scales' type), each step
 *  rounded to S as the graph of ops computes it, then cast to Out. A
 *  thread takes a run of 8 codes (a quarter block: Bits bytes, read from
 *  the one or two words that hold it), so a warp's stores cover one
 *  contiguous span (512 bytes of float16) rather than 32 runs 64 bytes
 *  apart. */
template <typename S, typename Out, int Bits>
__global__ void dequantize(const uint32_t* __restrict__ w,
                           const S* __restrict__ scales,
                           const S* __restrict__ biases, Out* __restrict__ out,
                           int64_t blocks, int group_size) {
  constexpr uint64_t mask = (1u << Bits) - 1u;
  const int64_t runs = blocks * 4;
  for (int64_t r = first_index<1>(); r < runs; r += grid_step<1>()) {
    // The run's bits start at bit 8 * Bits * (r % 4) of its block; with
    // Bits at most 8 they end within the next word (Bits 5: at bit 24 +
    // 40 = 64 of the two).
    const uint32_t* p = w + r / 4 * Bits;
    const int bit = int(r % 4) * 8 * Bits, word = bit / 32, shift = bit % 32;
    uint64_t codes = __ldg(p + word);
    if (shift + 8 * Bits > 32) codes |= uint64_t(__ldg(p + word + 1)) << 32;
    codes >>= shift;
    const int64_t g = r * 8 / group_size;
    const float s = static_cast<float>(scales[g]);
    const float c = static_cast<float>(biases[g]);
    // 8 outputs in whole 16-byte stores for every output type.
    constexpr int per = 16 / sizeof(Out);
#pragma unroll
    for (int i = 0; i < 8 / per; ++i) {
      Vec<Out, per> v;
#pragma unroll
      for (int j = 0; j < per; ++j) {
        const uint32_t code = uint32_t(codes >> ((i * per + j) * Bits) & mask);
        float q = __uint_as_float(0x4b000000u | code) - 8388608.0f;
        // _rn: no multiply-add contraction (the graph rounds twice).
        float y = static_cast<float>(cast_to<S>(__fmul_rn(q, s)));
        v.v[j] = cast_to<Out>(cast_to<S>(__fadd_rn(y, c)));
      }
      reinterpret_cast<Vec<Out, per>*>(out + r * 8)[i] = v;
    }
  }
}

} // namespace kiln::cuda
