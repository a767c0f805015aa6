// Scaled dot-product attention backward on tensor cores, flash-attention-2
// style, for float16/bfloat16 with head dimension D == Dv in {64, 128}:
// dq, dk, dv from q, k, v, the mask, dO and per-row statistics.
//
// The pre-pass is the forward kernel (device/flash_attention.cuh) run with
// `stats`: for every query row it stores the max score m, the sum l of
// exp(score - m) and delta = rowsum(dO * O) in float. Then this kernel: a
// block of 8 warps takes 64 keys of one (batch, kv head) and keeps their K
// and V tiles in shared memory and their dK and dV in float wmma fragments
// (registers) while it walks every query tile of every query head sharing
// that kv head (grouped-query heads sum there). Per query tile of 64 rows:
//   S^T  = K Q^T and dP^T = V dO^T   (warp w: keys 16 (w % 4) .. + 16,
//                                     queries 32 (w / 4) .. + 32)
//   P    = exp(S * scale - m) / l   (scale, causal rule and mask as the
//                                     forward applies them)
//   dS   = P (dP - delta), 0 where a key is hidden (the graph's `where`
//          passes no gradient there)
//   P^T and dS^T are stored to shared memory as T, then
//   dV  += P^T dO,  dK += dS^T Q       (warp w: keys 16 (w % 4) .. + 16,
//                                     features D/2 (w / 4) .. + D/2)
//   dQ  += dS K * scale                 (warp w: queries 16 (w % 4) .. + 16,
//                                     features D/2 (w / 4) .. + D/2), by
//          atomicAdd into a zeroed float scratch that the launcher rounds to
//          T at the end.
// Every accumulator element's row and column come from a matrix of indices
// loaded once into an accumulator fragment (wmma keeps its layout opaque;
// the forward, on mma.sync, knows it from the PTX fragment layout).
// Query tiles that the causal rule hides wholly from the block's keys are
// skipped, unless a row of the tile sees no key at all (Lq > Lk): such a
// row's P is 1 / Lk everywhere (as in the forward), which reaches dV.
//
// Numerics against the CPU's graph: P and dS are rounded to T before their
// products (as the graph rounds them), every product accumulates in float;
// delta comes from the rounded O, the graph's from P and dP (equal in exact
// arithmetic). A padded key (past Lk) or query row (past Lq) contributes
// nothing.
#pragma once

#include <mma.h>

#include "kiln/backend/cuda/device/flash_attention.cuh"

namespace kiln::cuda {

/** MaskKind as sdpa_flash. Any number of blocks of flash_bwd_threads threads
 *  (they loop over the B * Nkv * ceil(Lk / 64) key tiles) with
 *  flash_bwd_shared_bytes(D, sizeof(T)) bytes of dynamic shared memory.
 *  q, k, v as sdpa_flash needs them; dout row-major (B, Nq, Lq, D) with
 *  16-byte aligned rows; stats from sdpa_flash's pre-pass; dq a zeroed
 *  float (B, Nq, Lq, D) scratch; dk and dv row-major (B, Nkv, Lk, D). */
template <typename T, int D, int MaskKind>
__global__ void __launch_bounds__(flash_bwd_threads, flash_bwd_min_blocks(D))
    sdpa_flash_bwd(const T* __restrict__ q, const T* __restrict__ k,
                   const T* __restrict__ v, const void* __restrict__ mask,
                   const T* __restrict__ dout,
                   const float* __restrict__ stats, float* __restrict__ dq,
                   T* __restrict__ dk, T* __restrict__ dv,
                   const __grid_constant__ SdpaParams p) {
  using namespace nvcuda;
  static_assert(D % 32 == 0 && D * sizeof(T) % 16 == 0);
  static_assert(flash_rows == 64 && flash_keys == 64 &&
                flash_bwd_threads == 8 * warp_size);
  constexpr int ldt = D + flash_pad_t;          // K, V, Q, dO rows
  constexpr int ldp = flash_rows + flash_pad_t; // P^T, dS^T rows (queries)
  constexpr int half_frags = D / 32; // fragments per warp over D / 2
  using AccFrag = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
  using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
  using ColA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major>;
  using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
  using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;

  extern __shared__ __align__(128) unsigned char flash_bwd_smem[];
  T* ks = reinterpret_cast<T*>(flash_bwd_smem);
  T* vs = ks + flash_keys * ldt;
  T* qs = vs + flash_keys * ldt;
  T* dos = qs + flash_rows * ldt;
  T* pt = dos + flash_rows * ldt; // P^T: a row per key, a column per query
  T* dst = pt + flash_keys * ldp; // dS^T
  float* row_m = reinterpret_cast<float*>(dst + flash_keys * ldp);
  float* row_inv_l = row_m + flash_rows;
  float* row_delta = row_inv_l + flash_rows;

  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int strip = warp % 4; // 16 rows of a 64-row tile
  const int half = warp / 4;  // 32 query columns, or D / 2 features
  const int col0 = half * (D / 2);

  // 16 * row + column of each of this lane's accumulator elements (the
  // layout is the same for every accumulator fragment). The scratch is this
  // warp's 1 KiB of P^T, written only after the first __syncthreads below.
  int elem_rc[AccFrag::num_elements];
  {
    float* idx = reinterpret_cast<float*>(pt) + warp * 256;
    for (int e = lane; e < 256; e += warp_size) idx[e] = static_cast<float>(e);
    __syncwarp();
    AccFrag rc;
    wmma::load_matrix_sync(rc, idx, 16, wmma::mem_row_major);
#pragma unroll
    for (int e = 0; e < AccFrag::num_elements; ++e) {
      elem_rc[e] = static_cast<int>(rc.x[e]);
    }
    __syncwarp();
  }

  const int64_t q_tiles = (p.Lq + flash_rows - 1) / flash_rows;
  const int64_t k_tiles = (p.Lk + flash_keys - 1) / flash_keys;
  const int64_t kv_heads = p.B * p.Nkv;
  const int64_t rep = p.Nq / p.Nkv, shift = p.Lk - p.Lq;
  const float scale = p.scale;
  const float lowest = lowest_finite<float>();
  const float inf = math::infinity<float>();

  for (int64_t work = blockIdx.x; work < k_tiles * kv_heads;
       work += gridDim.x) {
    // The first key tiles first: under the causal rule they see the most
    // query rows, so the longest blocks start earliest.
    int64_t kt = work / kv_heads, bkh = work % kv_heads;
    int64_t b = bkh / p.Nkv, kh = bkh % p.Nkv;
    int64_t k0 = kt * flash_keys;
    const T* kb = k + b * p.k_strides[0] + kh * p.k_strides[1];
    const T* vb = v + b * p.v_strides[0] + kh * p.v_strides[1];

    __syncthreads(); // the previous work item is done with the K, V tiles
    flash::load_tile<T, D, flash_bwd_threads>(ks, kb, p.k_strides[2], k0,
                                              p.Lk);
    flash::load_tile<T, D, flash_bwd_threads>(vs, vb, p.v_strides[2], k0,
                                              p.Lk);
    flash::commit();

    AccFrag dk_acc[half_frags], dv_acc[half_frags];
#pragma unroll
    for (int f = 0; f < half_frags; ++f) {
      wmma::fill_fragment(dk_acc[f], 0.0f);
      wmma::fill_fragment(dv_acc[f], 0.0f);
    }

    for (int64_t t = 0; t < rep * q_tiles; ++t) {
      const int64_t h = kh * rep + t / q_tiles;
      const int64_t q0 = (t % q_tiles) * flash_rows;
      if (p.causal) {
        // No row sees a key of this tile, and every row sees some key
        // elsewhere (so its P is 0 here): nothing to add.
        int64_t q_last = (q0 + flash_rows < p.Lq ? q0 + flash_rows : p.Lq) - 1;
        if (q_last + shift < k0 && q0 + shift >= 0) continue;
      }
      const int64_t bh = b * p.Nq + h;
      const T* qb = q + b * p.q_strides[0] + h * p.q_strides[1];

      __syncthreads(); // every warp is done with the last tile's Q, dO, P^T
      flash::load_tile<T, D, flash_bwd_threads>(qs, qb, p.q_strides[2], q0,
                                                p.Lq);
      flash::load_tile<T, D, flash_bwd_threads>(dos, dout + bh * p.Lq * D, D,
                                                q0, p.Lq);
      flash::commit();
      if (threadIdx.x < flash_rows) {
        int64_t i = q0 + threadIdx.x;
        float m = 0.0f, l = 1.0f, delta = 0.0f; // padding rows: unused
        if (i < p.Lq) {
          const float* st = stats + 3 * (bh * p.Lq + i);
          m = st[0];
          l = st[1];
          delta = st[2];
        }
        row_m[threadIdx.x] = m;
        row_inv_l[threadIdx.x] = 1.0f / l;
        row_delta[threadIdx.x] = delta;
      }
      flash::wait<0>(); // K, V (first tile), Q and dO
      __syncthreads();

      // S^T and dP^T for this warp's 16 keys and 32 queries, 16 at a time;
      // P^T and dS^T to shared memory.
      [[maybe_unused]] const int64_t mask_head =
          b * p.mask_strides[0] + h * p.mask_strides[1];
#pragma unroll 1
      for (int f = 0; f < 2; ++f) {
        const int qq = half * 32 + f * 16;
        AccFrag s, dp;
        wmma::fill_fragment(s, 0.0f);
        wmma::fill_fragment(dp, 0.0f);
#pragma unroll 1
        for (int d = 0; d < D; d += 16) {
          // Q^T's (d, i) is Q's (i, d): Q read column-major; dO the same.
          RowA a;
          ColB bt;
          wmma::load_matrix_sync(a, ks + strip * 16 * ldt + d, ldt);
          wmma::load_matrix_sync(bt, qs + qq * ldt + d, ldt);
          wmma::mma_sync(s, a, bt, s);
          wmma::load_matrix_sync(a, vs + strip * 16 * ldt + d, ldt);
          wmma::load_matrix_sync(bt, dos + qq * ldt + d, ldt);
          wmma::mma_sync(dp, a, bt, dp);
        }
#pragma unroll
        for (int e = 0; e < AccFrag::num_elements; ++e) {
          const int jl = strip * 16 + elem_rc[e] / 16;
          const int il = qq + elem_rc[e] % 16;
          const int64_t i = q0 + il, j = k0 + jl;
          float pv = 0.0f, ds = 0.0f; // padding: contributes nothing
          if (i < p.Lq && j < p.Lk) {
            float sc = s.x[e] * scale;
            bool hidden = p.causal && j > i + shift;
            if constexpr (MaskKind != 0) {
              int64_t off =
                  mask_head + i * p.mask_strides[2] + j * p.mask_strides[3];
              if constexpr (MaskKind == 1) {
                hidden = hidden || !static_cast<const bool*>(mask)[off];
              } else {
                sc += cast_to<float>(static_cast<const T*>(mask)[off]);
              }
            }
            if (hidden) sc = lowest;
            pv = sc == -inf ? 0.0f
                            : math::exp(sc - row_m[il]) * row_inv_l[il];
            ds = hidden ? 0.0f : pv * (dp.x[e] - row_delta[il]);
          }
          pt[jl * ldp + il] = cast_to<T>(pv);
          dst[jl * ldp + il] = cast_to<T>(ds);
        }
      }
      __syncthreads(); // P^T and dS^T complete

      // dV += P^T dO and dK += dS^T Q over the tile's 64 queries.
#pragma unroll 1
      for (int kk = 0; kk < flash_rows; kk += 16) {
        RowA pa, da;
        wmma::load_matrix_sync(pa, pt + strip * 16 * ldp + kk, ldp);
        wmma::load_matrix_sync(da, dst + strip * 16 * ldp + kk, ldp);
#pragma unroll
        for (int f = 0; f < half_frags; ++f) {
          RowB bf;
          wmma::load_matrix_sync(bf, dos + kk * ldt + col0 + f * 16, ldt);
          wmma::mma_sync(dv_acc[f], pa, bf, dv_acc[f]);
          wmma::load_matrix_sync(bf, qs + kk * ldt + col0 + f * 16, ldt);
          wmma::mma_sync(dk_acc[f], da, bf, dk_acc[f]);
        }
      }

      // dQ += dS K * scale for this warp's 16 queries and D / 2 features;
      // dS's (i, j) is dS^T's (j, i): read column-major.
      float* dq_head = dq + bh * p.Lq * D;
#pragma unroll 1
      for (int f = 0; f < half_frags; ++f) {
        const int col = col0 + f * 16;
        AccFrag acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < flash_keys; kk += 16) {
          ColA a;
          RowB bf;
          wmma::load_matrix_sync(a, dst + kk * ldp + strip * 16, ldp);
          wmma::load_matrix_sync(bf, ks + kk * ldt + col, ldt);
          wmma::mma_sync(acc, a, bf, acc);
        }
#pragma unroll
        for (int e = 0; e < AccFrag::num_elements; ++e) {
          int64_t i = q0 + strip * 16 + elem_rc[e] / 16;
          if (i < p.Lq) {
            atomicAdd(dq_head + i * D + col + elem_rc[e] % 16,
                      acc.x[e] * scale);
          }
        }
      }
    }
    flash::wait<0>(); // (every copy was waited for already; kept for safety)

    // dK * scale and dV, as T, row-major, straight from the fragments.
#pragma unroll
    for (int f = 0; f < half_frags; ++f) {
#pragma unroll
      for (int e = 0; e < AccFrag::num_elements; ++e) {
        int64_t j = k0 + strip * 16 + elem_rc[e] / 16;
        if (j < p.Lk) {
          int64_t at = (bkh * p.Lk + j) * D + col0 + f * 16 + elem_rc[e] % 16;
          dk[at] = cast_to<T>(dk_acc[f].x[e] * scale);
          dv[at] = cast_to<T>(dv_acc[f].x[e]);
        }
      }
    }
  }
}

} // namespace kiln::cuda
