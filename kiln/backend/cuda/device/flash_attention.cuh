// Scaled dot-product attention forward on tensor cores, flash-attention-2
// style, for float16/bfloat16 with head dimension D == Dv in {64, 128}.
//
// A block of 4 warps takes a tile of 64 query rows of one (batch, head)
// and walks the key/value rows in tiles of 64, staged in shared memory by
// cp.async (16-byte copies, zero-filled past the end of the sequence). Warp
// w owns query rows [16w, 16w + 16) of the tile throughout:
//   S = Q K^T   wmma 16x16x16, float accumulators, stored to shared memory;
//   softmax     two lanes per row read the row's 64 scores, apply the
//               scale, the causal rule and the mask exactly as
//               device/sdpa.cuh and the CPU do, and update the row's running
//               max and sum in float (online softmax); P = exp(S - max) is
//               written as T over the row's own scores;
//   O += P V    wmma into float fragments that stay in registers for the
//               whole key loop.
// Rescaling O by exp(old max - new max) needs each accumulator element's
// row, which wmma leaves opaque: at the start each warp loads a matrix of
// row numbers into an accumulator fragment, which tells every lane the row
// of each of its elements (the layout is the same for every fragment of
// that type), and the factor comes from the row's lane by a shuffle. So O
// never goes through shared memory until the final O / sum is written.
//
// Loads and the pipeline: the next key tile is copied while this tile's
// softmax and P V run, and the value tile while S is computed. Key tiles
// wholly hidden by the causal rule are skipped, except for query tiles
// holding a row that the rule hides entirely (Lq > Lk): the CPU gives such a
// row the mean of every value (all scores equally lowest), so every key
// tile is visited there.
//
// Numerics against the CPU (backend/cpu/sdpa.cpp): products of T are exact
// in float and summed in float (in another order); a hidden key scores the
// lowest finite float, a padded one (past Lk) -inf and adds nothing; a NaN
// score wins the max and propagates; a row whose scores are all -inf ends as
// 0 / 0 = NaN. P is rounded to T before P V (as the matmul graph does), the
// sum is kept in float, O is divided in float and rounded once.
#pragma once

#include <mma.h>

#include "kiln/backend/cuda/device/flash_tiles.cuh"
#include "kiln/backend/cuda/device/sdpa.cuh"

namespace kiln::cuda {

namespace flash {

/** 16 bytes from global src to shared dst, or zeros when !valid (no bytes
 *  are read then; src need only be a valid address). */
__device__ __forceinline__ void copy16(void* dst, const void* src,
                                       bool valid) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s),
               "l"(src), "r"(n)
               : "memory");
}

__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/** Waits until at most N of this thread's copy groups are in flight. */
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/** Starts copying rows [row0, row0 + 64) of a (rows, D) slice with row
 *  stride `stride` (elements; feature stride 1, rows 16-byte aligned) into
 *  a shared tile with rows D + flash_pad_t apart; rows past `rows` become
 *  zeros. Every thread of the block (Threads of them) takes part. */
template <typename T, int D, int Threads = flash_threads>
__device__ __forceinline__ void load_tile(T* tile, const T* base,
                                          int64_t stride, int64_t row0,
                                          int64_t rows) {
  constexpr int per_row = D * int(sizeof(T)) / 16;
  constexpr int chunks = flash_rows * per_row;
  static_assert(chunks % Threads == 0);
#pragma unroll
  for (int u = 0; u < chunks / Threads; ++u) {
    int c = threadIdx.x + u * Threads;
    int r = c / per_row, col = (c % per_row) * (16 / int(sizeof(T)));
    int64_t g = row0 + r;
    bool valid = g < rows;
    const T* src = valid ? base + g * stride + col : base;
    copy16(tile + r * (D + flash_pad_t) + col, src, valid);
  }
}

} // namespace flash

/** MaskKind: 0 none, 1 boolean (false hides), 2 additive of type T (as
 *  p.mask_kind; a template parameter so that the maskless kernels carry no
 *  mask arithmetic and its registers). Any number of blocks of
 *  flash_threads threads (they loop over the B * Nq * ceil(Lq / 64) query
 *  tiles) with flash_shared_bytes(D, sizeof(T)) bytes of dynamic shared
 *  memory. Needs p.D == p.Dv == D, Lk >= 1, unit feature strides and
 *  16-byte aligned rows of q, k and v (the launcher checks). out is
 *  row-major (B, Nq, Lq, D).
 *  With stats (the backward's pre-pass, device/flash_attention_bwd.cuh)
 *  out is not written: for each query row r = (b * Nq + h) * Lq + i,
 *  stats[3r .. 3r + 2] get the row's max score, its sum of exp(score -
 *  max) and rowsum(dout * O) in float, O rounded to T as out would hold
 *  it; dout is row-major (B, Nq, Lq, D) with 16-byte aligned rows. */
template <typename T, int D, int MaskKind>
__global__ void __launch_bounds__(flash_threads, flash_min_blocks(D))
    sdpa_flash(const T* __restrict__ q, const T* __restrict__ k,
               const T* __restrict__ v, const void* __restrict__ mask,
               T* __restrict__ out, const T* __restrict__ dout,
               float* __restrict__ stats,
               const __grid_constant__ SdpaParams p) {
  using namespace nvcuda;
  static_assert(D % 16 == 0 && D * sizeof(T) % 16 == 0);
  constexpr int ldt = D + flash_pad_t;          // Q, K, V rows (elements)
  constexpr int lds = flash_keys + flash_pad_f; // score rows (floats)
  // P rows as T: the same bytes per row as the scores, so row r of P
  // overwrites the first half of row r of S and no other row.
  constexpr int ldp = lds * int(sizeof(float) / sizeof(T));
  constexpr int frags = D / 16; // accumulator fragments per warp row strip
  constexpr int key_frags = flash_keys / 16;
  static_assert(frags % key_frags == 0); // the output goes 4 fragments a time
  using AccFrag = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

  extern __shared__ __align__(128) unsigned char flash_smem[];
  T* qs = reinterpret_cast<T*>(flash_smem);
  T* ks = qs + flash_rows * ldt;
  T* vs = ks + flash_rows * ldt;
  float* ss = reinterpret_cast<float*>(vs + flash_rows * ldt);

  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  // This warp's 16 rows of scores (and of P, and the output staging).
  float* srows = ss + warp * 16 * lds;
  T* prows = reinterpret_cast<T*>(srows);

  // Which row each of this lane's accumulator elements lies in.
  int elem_row[AccFrag::num_elements];
  {
    for (int e = lane; e < 256; e += warp_size) {
      srows[(e / 16) * lds + e % 16] = static_cast<float>(e / 16);
    }
    __syncwarp();
    AccFrag rows;
    wmma::load_matrix_sync(rows, srows, lds, wmma::mem_row_major);
#pragma unroll
    for (int e = 0; e < AccFrag::num_elements; ++e) {
      elem_row[e] = static_cast<int>(rows.x[e]);
    }
    __syncwarp();
  }

  // Lanes 2r and 2r + 1 own row r of the warp's strip in the softmax; lane
  // parity picks the even or odd key columns.
  const int my_row = lane / 2, parity = lane % 2;
  const int64_t q_tiles = (p.Lq + flash_rows - 1) / flash_rows;
  const int64_t heads = p.B * p.Nq;
  const int64_t k_tiles = (p.Lk + flash_keys - 1) / flash_keys;
  const int64_t rep = p.Nq / p.Nkv, shift = p.Lk - p.Lq;
  const float scale = p.scale;
  const float lowest = lowest_finite<float>();
  const float inf = math::infinity<float>();

  for (int64_t work = blockIdx.x; work < q_tiles * heads; work += gridDim.x) {
    // The last query tiles first: under the causal rule they see the most
    // keys, so the longest blocks start earliest.
    int64_t qt = q_tiles - 1 - work / heads, bh = work % heads;
    int64_t b = bh / p.Nq, h = bh % p.Nq, kh = h / rep;
    int64_t q0 = qt * flash_rows;
    const T* qb = q + b * p.q_strides[0] + h * p.q_strides[1];
    const T* kb = k + b * p.k_strides[0] + kh * p.k_strides[1];
    const T* vb = v + b * p.v_strides[0] + kh * p.v_strides[1];
    int64_t kt_end = k_tiles;
    if (p.causal && q0 + shift >= 0) {
      int64_t q_end = q0 + flash_rows < p.Lq ? q0 + flash_rows : p.Lq;
      int64_t visible = (q_end - 1 + shift) / flash_keys + 1;
      kt_end = visible < k_tiles ? visible : k_tiles;
    }

    __syncthreads(); // the previous tile's readers are done with shared tiles
    flash::load_tile<T, D>(qs, qb, p.q_strides[2], q0, p.Lq);
    flash::load_tile<T, D>(ks, kb, p.k_strides[2], 0, p.Lk);
    flash::commit();

    AccFrag o[frags];
#pragma unroll
    for (int f = 0; f < frags; ++f) wmma::fill_fragment(o[f], 0.0f);
    // Both lanes of a row hold the same running max and sum.
    float row_max = -inf, row_sum = 0.0f;
    const int64_t i = q0 + warp * 16 + my_row; // this lane's query row
    const int64_t mask_row = b * p.mask_strides[0] + h * p.mask_strides[1] +
                             i * p.mask_strides[2];

    for (int64_t kt = 0; kt < kt_end; ++kt) {
      const int64_t k0 = kt * flash_keys;
      flash::wait<0>(); // Q and this key tile
      __syncthreads();  // ... visible to all; every warp is past the last P V
      flash::load_tile<T, D>(vs, vb, p.v_strides[2], k0, p.Lk);
      flash::commit();

      // S = Q K^T for this warp's 16 rows.
      {
        AccFrag s[key_frags];
#pragma unroll
        for (int n = 0; n < key_frags; ++n) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll 1
        for (int d = 0; d < D; d += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
          wmma::load_matrix_sync(a, qs + warp * 16 * ldt + d, ldt);
#pragma unroll
          for (int n = 0; n < key_frags; ++n) {
            // K^T's (d, j) is K's (j, d): K read column-major.
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
            wmma::load_matrix_sync(kf, ks + n * 16 * ldt + d, ldt);
            wmma::mma_sync(s[n], a, kf, s[n]);
          }
        }
#pragma unroll
        for (int n = 0; n < key_frags; ++n) {
          wmma::store_matrix_sync(srows + n * 16, s[n], lds,
                                  wmma::mem_row_major);
        }
      }
      __syncthreads(); // every warp is done with this key tile
      if (kt + 1 < kt_end) {
        flash::load_tile<T, D>(ks, kb, p.k_strides[2], k0 + flash_keys, p.Lk);
      }
      flash::commit(); // possibly empty: keeps the group count uniform
      __syncwarp();    // the strip's scores are visible to its lanes

      // Online softmax over this tile, as device/sdpa.cuh scores each key.
      // Column col is key k0 + col: padding from n_keys on, hidden by the
      // causal rule past causal_last (both tile-local, clamped into int).
      const int64_t keys_left = p.Lk - k0;
      const int n_keys = keys_left < flash_keys ? int(keys_left) : flash_keys;
      int causal_last = flash_keys; // nothing hidden
      if (p.causal) {
        int64_t last = i + shift - k0;
        causal_last = last < -1           ? -1
                      : last > flash_keys ? flash_keys
                                          : static_cast<int>(last);
      }
      float e[flash_keys / 2];
      float tile_max = -inf;
#pragma unroll
      for (int c = 0; c < flash_keys / 2; ++c) {
        int col = 2 * c + parity;
        float s = srows[my_row * lds + col] * scale;
        if (col >= n_keys) {
          s = -inf; // padding: adds nothing
        } else {
          bool hidden = col > causal_last;
          if (MaskKind != 0 && i < p.Lq) {
            int64_t off = mask_row + (k0 + col) * p.mask_strides[3];
            if constexpr (MaskKind == 1) {
              hidden = hidden || !static_cast<const bool*>(mask)[off];
            } else {
              s += cast_to<float>(static_cast<const T*>(mask)[off]);
            }
          }
          if (hidden) s = lowest;
        }
        e[c] = s;
        tile_max = MaxNaN{}(tile_max, s);
      }
      tile_max = MaxNaN{}(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      float new_max = MaxNaN{}(row_max, tile_max);
      // 1 while the max stays (also -inf to -inf); NaN once a NaN arrives.
      float alpha = new_max == row_max ? 1.0f : math::exp(row_max - new_max);
      float tile_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < flash_keys / 2; ++c) {
        e[c] = e[c] == -inf ? 0.0f : math::exp(e[c] - new_max);
        tile_sum += e[c];
      }
      tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
      row_max = new_max;
      row_sum = row_sum * alpha + tile_sum;
      __syncwarp(); // both lanes of each row have read its scores
#pragma unroll
      for (int c = 0; c < flash_keys / 2; ++c) {
        prows[my_row * ldp + 2 * c + parity] = cast_to<T>(e[c]);
      }
      // O *= alpha of each element's row (lane 2r holds row r's).
#pragma unroll
      for (int x = 0; x < AccFrag::num_elements; ++x) {
        float a = __shfl_sync(0xffffffffu, alpha, 2 * elem_row[x]);
#pragma unroll
        for (int f = 0; f < frags; ++f) o[f].x[x] *= a;
      }

      flash::wait<1>(); // this value tile (the next key tile may be pending)
      __syncthreads();  // ... visible to all, and every strip's P written
      // O += P V.
#pragma unroll 1
      for (int kk = 0; kk < flash_keys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::load_matrix_sync(pf, prows + kk, ldp);
#pragma unroll
        for (int f = 0; f < frags; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
          wmma::load_matrix_sync(vf, vs + kk * ldt + f * 16, ldt);
          wmma::mma_sync(o[f], pf, vf, o[f]);
        }
      }
    }

    // O / sum, as T, row-major; staged 4 fragments (16 x 64 floats) at a
    // time through the strip's score rows.
#pragma unroll
    for (int x = 0; x < AccFrag::num_elements; ++x) {
      float sum = __shfl_sync(0xffffffffu, row_sum, 2 * elem_row[x]);
#pragma unroll
      for (int f = 0; f < frags; ++f) o[f].x[x] /= sum;
    }
    float delta = 0.0f; // with stats: this lane's half of rowsum(dout * O)
#pragma unroll
    for (int f0 = 0; f0 < frags; f0 += key_frags) {
      __syncwarp(); // the strip's P (or the last batch) has been read
#pragma unroll
      for (int f = 0; f < key_frags; ++f) {
        wmma::store_matrix_sync(srows + f * 16, o[f0 + f], lds,
                                wmma::mem_row_major);
      }
      __syncwarp();
      if (i < p.Lq) {
        // Lanes 2r and 2r + 1 write halves of row r: 32 values each.
#pragma unroll
        for (int c = 0; c < 32; c += 8) {
          int col = parity * 32 + c;
          Vec<T, 8> chunk;
#pragma unroll
          for (int u = 0; u < 8; ++u) {
            chunk.v[u] = cast_to<T>(srows[my_row * lds + col + u]);
          }
          int64_t at = (bh * p.Lq + i) * D + f0 * 16 + col;
          if (stats) {
            Vec<T, 8> g = *reinterpret_cast<const Vec<T, 8>*>(dout + at);
#pragma unroll
            for (int u = 0; u < 8; ++u) {
              delta += cast_to<float>(chunk.v[u]) * cast_to<float>(g.v[u]);
            }
          } else {
            *reinterpret_cast<Vec<T, 8>*>(out + at) = chunk;
          }
        }
      }
    }
    if (stats) { // uniform: every lane takes part in the shuffle
      delta += __shfl_xor_sync(0xffffffffu, delta, 1);
      if (i < p.Lq && parity == 0) {
        float* st = stats + 3 * (bh * p.Lq + i);
        st[0] = row_max;
        st[1] = row_sum;
        st[2] = delta;
      }
    }
  }
}

} // namespace kiln::cuda
