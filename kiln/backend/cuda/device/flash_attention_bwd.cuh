// Scaled dot-product attention backward on tensor cores, flash-attention-2
// style, for float16/bfloat16 with head dimension D == Dv in {64, 128}:
// dq, dk, dv from q, k, v, the mask, dO and per-row statistics.
//
// The pre-pass is the forward kernel (device/flash_attention.cuh) run with
// `stats`: for every query row it stores its max score m (0 where m is
// -inf), 1 / l for the sum l of exp(score - m), and delta = rowsum(dO * O)
// in float. Then this kernel: a
// block of 4 warps takes 64 keys of one (batch, kv head), keeps their K and
// V tiles in shared memory and walks every query tile of every query head
// sharing that kv head (grouped-query heads sum into the same dK and dV).
// Warp w owns keys [16w, 16w + 16) of the tile throughout; their dK and dV
// (16 x D each) stay in its registers as float C fragments of
// `mma.sync.aligned.m16n8k16` (the layouts, g = lane / 4 and t = lane % 4,
// are in mma.cuh, the `ldmatrix` loads in flash_attention.cuh; its helpers
// flash::ldmatrix_x4 and pack_pair serve here). The Q and
// dO tiles of the walk's next query tile and its rows' statistics are
// copied by cp.async into a second buffer while this one is used (one
// barrier publishes them). Per query tile of 64 rows,
// `flash_bwd_query_chunk(D)` queries at a time:
//   S^T  = K Q^T, dP^T = V dO^T  C fragments with keys as rows (g, g + 8)
//                                and queries as columns (2t, 2t + 1): K's
//                                and V's strips are A (ldmatrix), Q's and
//                                dO's rows are B (a query is a column);
//   P    = 2^((S * scale - m) log2 e) / l, dS = P (dP - delta) (the
//          forward's flash::exp2_approx), in place, each
//          lane knowing its elements' key and query from the C layout;
//          scale, causal rule and mask as the forward applies them; dS = 0
//          where a key is hidden (the graph's `where` passes no gradient);
//   dV  += P^T dO, dK += dS^T Q  P^T and dS^T rounded to T are packed from
//                                the C registers into A fragments (C tiles
//                                2j and 2j + 1 are the A of queries 16j ..
//                                16j + 15, as the forward packs P), dO and
//                                Q are B by ldmatrix .trans from their rows:
//                                no shared-memory round trip;
//   dS^T is also stored as T to shared memory (64 keys x 64 queries), then
//   after a barrier
//   dQ  += dS K * scale          warp w: queries [16w, 16w + 16) of the
//                                tile; dS's A fragments by .trans from
//                                dS^T's rows, K's B by .trans from its rows;
//          each lane adds its C elements (query rows g, g + 8, features
//          8n + 2t and 8n + 2t + 1: one float2 atomicAdd on sm_90) into a
//          zeroed float scratch that the launcher rounds to T at the end
//          (every key block adds to the same dQ rows; keeping dQ in
//          registers instead would need the transposed walk, query tiles
//          outer, and then dK and dV would need the atomics).
// Query tiles that the causal rule hides wholly from the block's keys are
// skipped, unless a row of the tile sees no key at all (Lq > Lk): such a
// row's P is 1 / Lk everywhere (as in the forward), which reaches dV.
//
// Per 64 x 64 tile: 5 products of 2 * 64 * 64 * D FLOP (S^T, dP^T, dV,
// dK, dQ), 2.6 MFLOP at D = 64 and 5.2 at D = 128 on tensor cores, as
// before. Shared-memory reads per tile and block at D = 64 (chunks of 32
// queries): each warp reads its K and V strips once per chunk (2 x 4 KiB)
// and Q and dO twice (for S^T, dP^T and for dV, dK: 2 x 16 KiB), 40 KiB,
// 160 KiB for the block; the dQ step reads dS (2 KiB) and K (8 KiB) per
// warp, 40 KiB; about 200 KiB (12.7 FLOP per byte), and dS^T is written
// once (8 KiB, 4-byte stores without bank conflicts). The wmma version
// read about 288 KiB (its 8 warps loaded K, V, Q and dO for S^T and dP^T,
// 128 KiB, P^T, dS^T, dO and Q for dV and dK, 96 KiB, dS^T and K for dQ,
// 64 KiB: 8.8 FLOP per byte), stored P^T and dS^T (16 KiB) as 2-byte
// scattered stores, and indexed every accumulator element through an
// index matrix.
//
// Numerics against the CPU's graph: P and dS are rounded to T before their
// products (as the graph rounds them), every product accumulates in float;
// delta comes from the rounded O, the graph's from P and dP (equal in exact
// arithmetic). A padded key (past Lk) or query row (past Lq) contributes
// nothing: its tile rows are zero-filled and its P and dS are 0.
#pragma once

#include "kiln/backend/cuda/device/flash_attention.cuh"

namespace kiln::cuda {

namespace flash {

/** at[0] += lo, at[1] += hi atomically, at 8-byte aligned: one vector atomic
 *  on sm_90 and later (half the atomic instructions), two scalar ones
 *  before. Each float is added atomically either way. */
__device__ __forceinline__ void atomic_add_pair(float* at, float lo,
                                                float hi) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(lo, hi));
#else
  atomicAdd(at, lo);
  atomicAdd(at + 1, hi);
#endif
}

} // namespace flash

/** MaskKind as sdpa_flash. Any number of blocks of flash_bwd_threads threads
 *  (they loop over the B * Nkv * ceil(Lk / 64) key tiles) with
 *  flash_bwd_shared_bytes(D, sizeof(T)) bytes of dynamic shared memory.
 *  q, k, v and dout (through p.dout_strides) as sdpa_flash needs them;
 *  stats from sdpa_flash's pre-pass; dq a zeroed
 *  float (B, Nq, Lq, D) scratch; dk and dv row-major (B, Nkv, Lk, D). */
template <typename T, int D, int MaskKind>
__global__ void __launch_bounds__(flash_bwd_threads, flash_bwd_min_blocks(D))
    sdpa_flash_bwd(const T* __restrict__ q, const T* __restrict__ k,
                   const T* __restrict__ v, const void* __restrict__ mask,
                   const T* __restrict__ dout,
                   const float* __restrict__ stats, float* __restrict__ dq,
                   T* __restrict__ dk, T* __restrict__ dv,
                   const __grid_constant__ SdpaParams p) {
  static_assert(D % 16 == 0 && D * sizeof(T) % 16 == 0);
  static_assert(flash_rows == 64 && flash_keys == 64 &&
                flash_bwd_threads == 4 * warp_size);
  constexpr int ldt = D + flash_pad_t;          // K, V, Q, dO rows
  constexpr int ldp = flash_rows + flash_pad_t; // dS^T rows (queries)
  constexpr int d_steps = D / 16;               // k16 steps over features
  constexpr int d_tiles = D / 8;                // n8 tiles over features
  constexpr int chunk = flash_bwd_query_chunk(D);
  constexpr int c_tiles = chunk / 8; // n8 tiles of S^T (queries) per chunk
  static_assert(flash_rows % chunk == 0 && chunk % 16 == 0);

  constexpr int tile = flash_rows * ldt;        // one staged tile (elements)
  constexpr int stat_floats = 3 * flash_rows;   // a query tile's statistics

  // K and V; two buffers of Q and dO tiles (the next query tile's load while
  // one is used); dS^T (a row per key, a column per query); two buffers of
  // the query rows' statistics as stored (max, sum, delta per row).
  extern __shared__ __align__(128) unsigned char flash_bwd_smem[];
  T* ks = reinterpret_cast<T*>(flash_bwd_smem);
  T* vs = ks + tile;
  T* q_bufs = vs + tile;
  T* dst = q_bufs + 4 * tile;
  float* stat_bufs = reinterpret_cast<float*>(dst + flash_keys * ldp);

  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int g = lane / 4, t2 = 2 * (lane % 4); // C layout: row g, column t2
  // ldmatrix row addresses, as in sdpa_flash. a_row, a_col: A from rows
  // that are A's rows (the K and V strips) and B by .trans from rows that
  // are B's rows (dO, Q, K over queries or keys): lane l points at row
  // l % 16, column 8 (l / 16). b_row, b_col: B from rows that are B's
  // columns (Q and dO for S^T and dP^T) and A by .trans from rows that are
  // A's columns (dS from dS^T): row l % 8 + 8 (l / 16), column 8 ((l / 8)
  // % 2).
  const int a_row = lane % 16, a_col = 8 * (lane / 16);
  const int b_row = lane % 8 + 8 * (lane / 16), b_col = 8 * ((lane / 8) % 2);
  const int key_strip = warp * 16; // the warp's 16 keys of the tile

  const int64_t q_tiles = (p.Lq + flash_rows - 1) / flash_rows;
  const int64_t k_tiles = (p.Lk + flash_keys - 1) / flash_keys;
  const int64_t kv_heads = p.B * p.Nkv;
  const int64_t rep = p.Nq / p.Nkv, shift = p.Lk - p.Lq;
  const float scale = p.scale;
  const float lowest = lowest_finite<float>();

  for (int64_t work = blockIdx.x; work < k_tiles * kv_heads;
       work += gridDim.x) {
    // The first key tiles first: under the causal rule they see the most
    // query rows, so the longest blocks start earliest.
    int64_t kt = work / kv_heads, bkh = work % kv_heads;
    int64_t b = bkh / p.Nkv, kh = bkh % p.Nkv;
    int64_t k0 = kt * flash_keys;
    const T* kb = k + b * p.k_strides[0] + kh * p.k_strides[1];
    const T* vb = v + b * p.v_strides[0] + kh * p.v_strides[1];
    // This lane's keys (rows g and g + 8 of the warp's strip) in the
    // sequence.
    const int64_t key[2] = {k0 + key_strip + g, k0 + key_strip + g + 8};

    __syncthreads(); // the previous work item is done with the K, V tiles
    flash::load_tile<T, D, flash_bwd_threads>(ks, kb, p.k_strides[2], k0,
                                              p.Lk);
    flash::load_tile<T, D, flash_bwd_threads>(vs, vb, p.v_strides[2], k0,
                                              p.Lk);
    commit_copies();

    // dK and dV of the warp's 16 keys over all D features: C fragments of
    // features 8n .. 8n + 7.
    float dk_acc[d_tiles][4], dv_acc[d_tiles][4];
#pragma unroll
    for (int n = 0; n < d_tiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
    }

    // The walk over (query head, query tile) pairs: t's head is kh * rep +
    // t / q_tiles. Query tiles that the causal rule hides wholly from the
    // block's keys, while each of their rows sees some key elsewhere (so its
    // P is 0 here), add nothing and are skipped.
    const int64_t walk = rep * q_tiles;
    auto next_visible = [&](int64_t t) {
      for (; t < walk && p.causal; ++t) {
        int64_t q0 = (t % q_tiles) * flash_rows;
        int64_t q_last = (q0 + flash_rows < p.Lq ? q0 + flash_rows : p.Lq) - 1;
        if (!(q_last + shift < k0 && q0 + shift >= 0)) break;
      }
      return t;
    };
    // Starts copying walk step t's Q and dO tiles and statistics into
    // buffer `buf` (rows past Lq become zeros), as one copy group.
    auto load_queries = [&](int64_t t, int buf) {
      int64_t h = kh * rep + t / q_tiles, q0 = (t % q_tiles) * flash_rows;
      int64_t bh = b * p.Nq + h;
      T* qd = q_bufs + buf * 2 * tile;
      flash::load_tile<T, D, flash_bwd_threads>(
          qd, q + b * p.q_strides[0] + h * p.q_strides[1], p.q_strides[2],
          q0, p.Lq);
      flash::load_tile<T, D, flash_bwd_threads>(
          qd + tile, dout + b * p.dout_strides[0] + h * p.dout_strides[1],
          p.dout_strides[2], q0, p.Lq);
      const float* st = stats + 3 * (bh * p.Lq + q0);
      float* sb = stat_bufs + buf * stat_floats;
      for (int c = threadIdx.x; c < stat_floats; c += flash_bwd_threads) {
        bool valid = q0 + c / 3 < p.Lq;
        copy4_async(sb + c, valid ? st + c : stats, valid);
      }
      commit_copies();
    };

    int64_t t = next_visible(0);
    if (t < walk) load_queries(t, 0);
    for (int buf = 0; t < walk; buf ^= 1) {
      const int64_t t_next = next_visible(t + 1);
      const int64_t h = kh * rep + t / q_tiles;
      const int64_t q0 = (t % q_tiles) * flash_rows;
      const int64_t bh = b * p.Nq + h;
      const T* qs = q_bufs + buf * 2 * tile;
      const T* dos = qs + tile;
      const float* st = stat_bufs + buf * stat_floats;

      wait_copies<0>(); // K, V (first step), this step's Q, dO, statistics
      __syncthreads();  // ... are visible; every warp is done with the other
                        // buffer and with dS^T (the last step)
      if (t_next < walk) load_queries(t_next, buf ^ 1);

      [[maybe_unused]] const int64_t mask_head =
          b * p.mask_strides[0] + h * p.mask_strides[1];
      // The warp's 16 keys against the tile's queries, `chunk` at a time
      // (fewer live score registers at D = 128).
#pragma unroll 1
      for (int c0 = 0; c0 < flash_rows; c0 += chunk) {
        // S^T = K Q^T and dP^T = V dO^T: s[n], dp[n] are queries c0 + 8n
        // .. + 7 (columns), keys g and g + 8 of the strip (rows).
        float s[c_tiles][4], dp[c_tiles][4];
#pragma unroll
        for (int n = 0; n < c_tiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
        }
#pragma unroll
        for (int kd = 0; kd < d_steps; ++kd) {
          unsigned ka[4], va[4];
          flash::ldmatrix_x4<false>(
              ka, ks + (key_strip + a_row) * ldt + kd * 16 + a_col);
          flash::ldmatrix_x4<false>(
              va, vs + (key_strip + a_row) * ldt + kd * 16 + a_col);
#pragma unroll
          for (int n = 0; n < c_tiles; n += 2) {
            unsigned qf[4], df[4];
            const int at = (c0 + n * 8 + b_row) * ldt + kd * 16 + b_col;
            flash::ldmatrix_x4<false>(qf, qs + at);
            flash::ldmatrix_x4<false>(df, dos + at);
            mma16816<T>(s[n], ka, qf[0], qf[1]);
            mma16816<T>(s[n + 1], ka, qf[2], qf[3]);
            mma16816<T>(dp[n], va, df[0], df[1]);
            mma16816<T>(dp[n + 1], va, df[2], df[3]);
          }
        }

        // P and dS in place of S^T and dP^T. Element (n, e) of this lane is
        // key key[e / 2] and tile query il = c0 + 8n + t2 + e % 2.
#pragma unroll
        for (int n = 0; n < c_tiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int il = c0 + 8 * n + t2 + e % 2;
            const int64_t i = q0 + il, j = key[e / 2];
            float pv = 0.0f, ds = 0.0f; // padding: contributes nothing
            if (i < p.Lq && j < p.Lk) {
              float sc = s[n][e] * scale;
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
              const float* row_stats = st + 3 * il; // m, 1 / l, delta
              pv = flash::exp2_approx((sc - row_stats[0]) * flash::log2e) *
                   row_stats[1];
              ds = hidden ? 0.0f : pv * (dp[n][e] - row_stats[2]);
            }
            s[n][e] = pv;
            dp[n][e] = ds;
          }
          // dS^T as T for dQ: rows key_strip + g (+ 8), queries il, il + 1.
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            Vec<T, 2> pair{{cast_to<T>(dp[n][2 * r]),
                            cast_to<T>(dp[n][2 * r + 1])}};
            *reinterpret_cast<Vec<T, 2>*>(
                dst + (key_strip + g + 8 * r) * ldp + c0 + 8 * n + t2) = pair;
          }
        }

        // dV += P^T dO and dK += dS^T Q: P^T and dS^T (rounded to T) are A
        // fragments straight from the registers (C tiles 2j and 2j + 1 are
        // queries c0 + 16j .. + 15); dO and Q are B by .trans from their
        // rows (queries), two feature tiles per load.
#pragma unroll
        for (int j = 0; j < c_tiles / 2; ++j) {
          unsigned pf[4] = {flash::pack_pair<T>(s[2 * j][0], s[2 * j][1]),
                            flash::pack_pair<T>(s[2 * j][2], s[2 * j][3]),
                            flash::pack_pair<T>(s[2 * j + 1][0],
                                                s[2 * j + 1][1]),
                            flash::pack_pair<T>(s[2 * j + 1][2],
                                                s[2 * j + 1][3])};
          unsigned sf[4] = {flash::pack_pair<T>(dp[2 * j][0], dp[2 * j][1]),
                            flash::pack_pair<T>(dp[2 * j][2], dp[2 * j][3]),
                            flash::pack_pair<T>(dp[2 * j + 1][0],
                                                dp[2 * j + 1][1]),
                            flash::pack_pair<T>(dp[2 * j + 1][2],
                                                dp[2 * j + 1][3])};
#pragma unroll
          for (int n = 0; n < d_tiles; n += 2) {
            unsigned of[4], qf[4];
            const int at = (c0 + 16 * j + a_row) * ldt + n * 8 + a_col;
            flash::ldmatrix_x4<true>(of, dos + at);
            flash::ldmatrix_x4<true>(qf, qs + at);
            mma16816<T>(dv_acc[n], pf, of[0], of[1]);
            mma16816<T>(dv_acc[n + 1], pf, of[2], of[3]);
            mma16816<T>(dk_acc[n], sf, qf[0], qf[1]);
            mma16816<T>(dk_acc[n + 1], sf, qf[2], qf[3]);
          }
        }
      }
      __syncthreads(); // dS^T complete

      // dQ += dS K * scale: warp w takes queries 16w .. 16w + 15 of the
      // tile. dS (A) comes from dS^T's rows by .trans (matrices: keys 0-7 x
      // queries 0-7, 0-7 x 8-15, 8-15 x 0-7, 8-15 x 8-15, transposed, are
      // A's four quarters), K (B) from its rows by .trans. Each lane adds
      // its C elements: query rows g, g + 8, features 8n + t2 (+ 1).
      float* dq_head = dq + bh * p.Lq * D;
      const int64_t dq_row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
      constexpr int dq_tiles = d_tiles < 8 ? d_tiles : 8; // per pass
#pragma unroll 1
      for (int f0 = 0; f0 < d_tiles; f0 += dq_tiles) {
        float acc[dq_tiles][4];
#pragma unroll
        for (int n = 0; n < dq_tiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
        }
#pragma unroll
        for (int kk = 0; kk < flash_keys; kk += 16) {
          unsigned sa[4];
          flash::ldmatrix_x4<true>(
              sa, dst + (kk + b_row) * ldp + warp * 16 + b_col);
#pragma unroll
          for (int n = 0; n < dq_tiles; n += 2) {
            unsigned kf[4];
            flash::ldmatrix_x4<true>(
                kf, ks + (kk + a_row) * ldt + (f0 + n) * 8 + a_col);
            mma16816<T>(acc[n], sa, kf[0], kf[1]);
            mma16816<T>(acc[n + 1], sa, kf[2], kf[3]);
          }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (dq_row[r] < p.Lq) {
            float* at = dq_head + dq_row[r] * D + f0 * 8 + t2;
#pragma unroll
            for (int n = 0; n < dq_tiles; ++n) {
              flash::atomic_add_pair(at + 8 * n, acc[n][2 * r] * scale,
                                     acc[n][2 * r + 1] * scale);
            }
          }
        }
      }
      t = t_next;
    }
    wait_copies<0>(); // K and V, where no query tile was visited

    // dK * scale and dV as T, row-major, straight from the C fragments.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (key[r] < p.Lk) {
        const int64_t at = (bkh * p.Lk + key[r]) * D + t2;
#pragma unroll
        for (int n = 0; n < d_tiles; ++n) {
          *reinterpret_cast<Vec<T, 2>*>(dk + at + 8 * n) =
              Vec<T, 2>{{cast_to<T>(dk_acc[n][2 * r] * scale),
                         cast_to<T>(dk_acc[n][2 * r + 1] * scale)}};
          *reinterpret_cast<Vec<T, 2>*>(dv + at + 8 * n) =
              Vec<T, 2>{{cast_to<T>(dv_acc[n][2 * r]),
                         cast_to<T>(dv_acc[n][2 * r + 1])}};
        }
      }
    }
  }
}

} // namespace kiln::cuda
