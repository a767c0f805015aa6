// Scaled dot-product attention forward on tensor cores, flash-attention-2
// style, for float16/bfloat16 with head dimension D == Dv in {64, 128}.
//
// A block of 4 warps takes a tile of 64 query rows of one (batch, head)
// and walks the key/value rows in tiles of 64, staged in shared memory by
// cp.async (16-byte copies, zero-filled past the end of the sequence) into
// two buffers: the next key and value tiles load while this one is used.
// Warp w owns query rows [16w, 16w + 16) of the tile throughout, and
// everything per row stays in its registers, in the fragment layouts of
// the `mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}` instruction
// (device/mma.cuh describes them; g = lane / 4 and t = lane % 4 below).
// Operands come from shared memory by `ldmatrix.sync.aligned.m8n8.x4`
// (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): lanes 8m ..
// 8m + 7 give the row addresses of 8x8 matrix m and lane l receives, in
// register m, the elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1)
// of matrix m, or of its transpose with .trans. That is the A layout for
// four 8x8 quarters of Q, the B layout of two key n8 tiles from K's rows
// (K^T column n is K row n), and with .trans the B layout of two feature
// n8 tiles from V's rows. Rows are D + 8 elements apart (a 16-byte pad), so
// the 8 rows of one matrix fall in 8 distinct 4-bank groups: no conflicts.
//   S     = Q K^T, 8 C fragments (16 rows x 64 keys) per warp, Q's A
//         fragment of each k16 step loaded from the Q tile as it is used
//         (holding all of Q's fragments through the key loop takes 32 more
//         registers and spilled at D = 128);
//   softmax: each lane scales and masks its own elements (it knows their
//         rows and keys from the C layout) exactly as device/sdpa.cuh and
//         the CPU score them; a row's max reduces over the 4 lanes of its
//         quad (shuffles) each tile, its sum once at the end (each lane
//         keeps its own part); the running max and sums live in float;
//         exp(x - max) is 2^((x - max) log2 e) on the special function
//         unit (flash::exp2_approx);
//   P     = exp(S - max) rounded to T is packed straight into A fragments:
//         C tiles 2j and 2j + 1 (keys 16j .. 16j + 15) hold, register for
//         register, A's rows g / g + 8 at columns 2t (+1) and 2t + 8 (+9);
//   O     += P V into D / 8 C fragments that stay in registers; each row's
//         elements are rescaled by its own exp(old max - new max).
// The end writes O / sum as T through the warp's own rows of the Q tile
// (no longer needed) as 16-byte row-major stores.
//
// Per 64 x 64 tile (D = 128): 4 * 64 * 64 * 128 = 2.1 MFLOP on tensor
// cores; each warp reads K and V once from shared memory by ldmatrix (2 x
// 16 KiB) and its Q strip (4 KiB), 36 KiB, where the wmma version also
// stored and reread its 16 x 64 float scores and wrote and reread P (about
// 48 KiB per warp and tile); the block's 144 KiB of shared reads per tile
// are about 14 FLOP per byte (10 before), with no shared round trip and no
// barrier between S and P V (one barrier per tile, was three).
//
// Key tiles wholly hidden by the causal rule are skipped, except for query
// tiles holding a row that the rule hides entirely (Lq > Lk): the CPU gives
// such a row the mean of every value (all scores equally lowest), so every
// key tile is visited there. A warp whose 16 rows see every key of a full
// tile with no mask skips the per-element masking.
//
// Numerics against the CPU (backend/cpu/sdpa.cpp): products of T are exact
// in float and summed in float (in another order); a hidden key scores the
// lowest finite float, a padded one (past Lk) -inf and adds nothing; a NaN
// score wins the max and propagates; a row whose scores are all -inf ends as
// 0 / 0 = NaN. P is rounded to T before P V (as the matmul graph does), the
// sum is kept in float, O is divided in float and rounded once.
#pragma once

#include "kiln/backend/cuda/device/async_copy.cuh"
#include "kiln/backend/cuda/device/flash_tiles.cuh"
#include "kiln/backend/cuda/device/mma.cuh"
#include "kiln/backend/cuda/device/sdpa.cuh"

namespace kiln::cuda {

namespace flash {

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
    copy16_async(tile + r * (D + flash_pad_t) + col, src, valid);
  }
}

/** Four 8x8 matrices of 16-bit elements from shared memory: lanes 8m ..
 *  8m + 7 point at rows 0 .. 7 of matrix m (16 bytes each, 16-byte
 *  aligned); lane l gets in r[m] elements (l / 4, 2 (l % 4)) and (l / 4,
 *  2 (l % 4) + 1) of matrix m (of its transpose with Trans), the lower
 *  column in the lower half. Every lane of the warp must take part. The
 *  memory clobber keeps the load after the barrier that publishes the
 *  tile. */
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4],
                                            const void* row) {
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
        "[%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(a)
        : "memory");
  } else {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(a)
        : "memory");
  }
}

/** log2(e): the softmax's exponentials are taken in base 2. */
constexpr float log2e = 1.4426950408889634f;

/** 2^x on the special function unit (`ex2.approx.ftz.f32`: about 2 ulp,
 *  results below 2^-126 flush to 0). exp(x - m) is taken as 2^((x - m)
 *  log2 e): two float ops and this, where expf costs about eight
 *  instructions per score, which was most of the softmax's issue slots.
 *  (Not 2^(x log2 e - m log2 e): a row whose every key is hidden scores
 *  the lowest float everywhere, and lowest * log2 e overflows.) */
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/** lo and hi rounded to T and packed into one register, lo in the lower
 *  half (the lower column of an A fragment's pair). */
template <typename T>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
  Vec<T, 2> pair{{cast_to<T>(lo), cast_to<T>(hi)}};
  return *reinterpret_cast<const unsigned*>(&pair);
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
 *  stats[3r .. 3r + 2] get the row's max score m (0 where m is -inf),
 *  the inverse of its sum of exp(score - m), and rowsum(dout * O) in
 *  float, O rounded to T as out would hold it; dout (B, Nq, Lq, D) is
 *  read through p.dout_strides, with unit feature strides and 16-byte
 *  aligned rows as q.
 *  Without stats, lse (when not null) gets each row r's log-sum-exp of its
 *  scaled scores, max + log(sum of exp(score - max)), as cuDNN's forward
 *  writes its statistics for its backward. */
template <typename T, int D, int MaskKind>
__global__ void __launch_bounds__(flash_threads, flash_min_blocks(D))
    sdpa_flash(const T* __restrict__ q, const T* __restrict__ k,
               const T* __restrict__ v, const void* __restrict__ mask,
               T* __restrict__ out, const T* __restrict__ dout,
               float* __restrict__ stats, float* __restrict__ lse,
               const __grid_constant__ SdpaParams p) {
  static_assert(D % 16 == 0 && D * sizeof(T) % 16 == 0);
  static_assert(flash_threads == 4 * warp_size && flash_rows == 4 * 16 &&
                flash_keys % 16 == 0);
  constexpr int ldt = D + flash_pad_t;    // shared rows (elements)
  constexpr int tile = flash_rows * ldt;  // one staged tile (elements)
  constexpr int d_steps = D / 16;         // k16 steps of Q K^T
  constexpr int s_tiles = flash_keys / 8; // n8 tiles of S (and P)
  constexpr int o_tiles = D / 8;          // n8 tiles of O

  // Q, then K and V of buffer 0, then K and V of buffer 1.
  extern __shared__ __align__(128) unsigned char flash_smem[];
  T* qs = reinterpret_cast<T*>(flash_smem);
  T* kv = qs + tile;

  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int g = lane / 4, t2 = 2 * (lane % 4); // C layout: row g, column t2
  // ldmatrix row addresses. Q (A) and V (.trans, B): matrices 0-3 are
  // (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), so lane l
  // points at row l % 16, column 8 (l / 16). K (B of K^T): matrices (keys
  // 0-7, d 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) give registers b0,
  // b1 of key tile 0, then of key tile 1: key l % 8 + 8 (l / 16), column 8
  // ((l / 8) % 2).
  const int a_row = lane % 16, a_col = 8 * (lane / 16);
  const int k_row = lane % 8 + 8 * (lane / 16), k_col = 8 * ((lane / 8) % 2);

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
    flash::load_tile<T, D>(kv, kb, p.k_strides[2], 0, p.Lk);
    flash::load_tile<T, D>(kv + tile, vb, p.v_strides[2], 0, p.Lk);
    commit_copies();
    wait_copies<0>();
    __syncthreads(); // Q and the first key and value tiles are visible

    const T* qw = qs + (warp * 16) * ldt;

    float o[o_tiles][4];
#pragma unroll
    for (int n = 0; n < o_tiles; ++n) {
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    }
    // Rows g and g + 8 of the warp's strip: [0] and [1] below. The 4 lanes
    // of a quad hold the same running max and sum.
    float row_max[2] = {-inf, -inf}, row_sum[2] = {0.0f, 0.0f};
    const int64_t first_row = q0 + warp * 16; // the warp's first query row
    const int64_t row[2] = {first_row + g, first_row + g + 8};
    // The mask's (b, h) slice (its row offsets are recomputed per tile:
    // cheaper than holding them in registers through the key loop).
    const int64_t mask_bh = b * p.mask_strides[0] + h * p.mask_strides[1];

    for (int64_t kt = 0; kt < kt_end; ++kt) {
      // Tile kt is visible in buffer kt % 2 and every warp is done with the
      // other buffer: start copying the next tile there.
      const T* ks_tile = kv + (kt % 2) * 2 * tile;
      const T* vs_tile = ks_tile + tile;
      if (kt + 1 < kt_end) {
        T* next = kv + ((kt + 1) % 2) * 2 * tile;
        int64_t k1 = (kt + 1) * flash_keys;
        flash::load_tile<T, D>(next, kb, p.k_strides[2], k1, p.Lk);
        flash::load_tile<T, D>(next + tile, vb, p.v_strides[2], k1, p.Lk);
        commit_copies();
      }
      const int64_t k0 = kt * flash_keys;

      // S = Q K^T for this warp's 16 rows: s[n] is keys 8n .. 8n + 7.
      float s[s_tiles][4];
#pragma unroll
      for (int n = 0; n < s_tiles; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      }
#pragma unroll
      for (int ks = 0; ks < d_steps; ++ks) {
        unsigned qa[4];
        flash::ldmatrix_x4<false>(qa, qw + a_row * ldt + ks * 16 + a_col);
#pragma unroll
        for (int n = 0; n < s_tiles; n += 2) {
          unsigned kf[4];
          flash::ldmatrix_x4<false>(
              kf, ks_tile + (n * 8 + k_row) * ldt + ks * 16 + k_col);
          mma16816<T>(s[n], qa, kf[0], kf[1]);
          mma16816<T>(s[n + 1], qa, kf[2], kf[3]);
        }
      }

      // Scores, as device/sdpa.cuh gives each key. Element (n, e) of this
      // lane is row row[e / 2], tile column 8n + t2 + e % 2 (key k0 + that).
      const int64_t keys_left = p.Lk - k0;
      const int n_keys = keys_left < flash_keys ? int(keys_left) : flash_keys;
      // Whether every key of the tile is visible to every row of the warp
      // (uniform across the warp): then only the scale applies.
      const bool all_visible =
          MaskKind == 0 && n_keys == flash_keys &&
          (!p.causal || k0 + flash_keys - 1 <= first_row + shift);
      if (all_visible) {
#pragma unroll
        for (int n = 0; n < s_tiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[n][e] *= scale;
        }
      } else {
        // Keys past causal_last[r] (tile-local, clamped into int) are
        // hidden from row r by the causal rule.
        int causal_last[2] = {flash_keys, flash_keys};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (p.causal) {
            int64_t last = row[r] + shift - k0;
            causal_last[r] = last < -1           ? -1
                             : last > flash_keys ? flash_keys
                                                 : static_cast<int>(last);
          }
        }
#pragma unroll
        for (int n = 0; n < s_tiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e / 2, col = 8 * n + t2 + e % 2;
            float x = s[n][e] * scale;
            if (col >= n_keys) {
              x = -inf; // padding: adds nothing
            } else {
              bool hidden = col > causal_last[r];
              if (MaskKind != 0 && row[r] < p.Lq) {
                int64_t off = mask_bh + row[r] * p.mask_strides[2] +
                              (k0 + col) * p.mask_strides[3];
                if constexpr (MaskKind == 1) {
                  hidden = hidden || !static_cast<const bool*>(mask)[off];
                } else {
                  x += cast_to<float>(static_cast<const T*>(mask)[off]);
                }
              }
              if (hidden) x = lowest;
            }
            s[n][e] = x;
          }
        }
      }

      // Online softmax: each row's max over its quad's 4 lanes; each lane
      // sums its own elements (the quad's sums add up at the end).
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -inf;
#pragma unroll
        for (int n = 0; n < s_tiles; ++n) {
          tile_max = MaxNaN{}(tile_max, s[n][2 * r]);
          tile_max = MaxNaN{}(tile_max, s[n][2 * r + 1]);
        }
        tile_max =
            MaxNaN{}(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max =
            MaxNaN{}(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        float new_max = MaxNaN{}(row_max[r], tile_max);
        // 1 while the max stays (also -inf to -inf); NaN once a NaN arrives.
        alpha[r] =
            new_max == row_max[r] ? 1.0f : math::exp(row_max[r] - new_max);
        // A row with no finite score yet subtracts 0, so that its -inf
        // scores give 0, not NaN.
        const float sub = new_max == -inf ? 0.0f : new_max;
        float tile_sum = 0.0f;
#pragma unroll
        for (int n = 0; n < s_tiles; ++n) {
#pragma unroll
          for (int e = 2 * r; e < 2 * r + 2; ++e) {
            s[n][e] = flash::exp2_approx((s[n][e] - sub) * flash::log2e);
            tile_sum += s[n][e];
          }
        }
        row_max[r] = new_max;
        row_sum[r] = row_sum[r] * alpha[r] + tile_sum;
      }
#pragma unroll
      for (int n = 0; n < o_tiles; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }

      // O += P V, P from the score registers: C tiles 2j and 2j + 1 are the
      // A fragment of keys 16j .. 16j + 15.
#pragma unroll
      for (int j = 0; j < flash_keys / 16; ++j) {
        unsigned pf[4] = {
            flash::pack_pair<T>(s[2 * j][0], s[2 * j][1]),
            flash::pack_pair<T>(s[2 * j][2], s[2 * j][3]),
            flash::pack_pair<T>(s[2 * j + 1][0], s[2 * j + 1][1]),
            flash::pack_pair<T>(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
        for (int n = 0; n < o_tiles; n += 2) {
          unsigned vf[4];
          flash::ldmatrix_x4<true>(
              vf, vs_tile + (j * 16 + a_row) * ldt + n * 8 + a_col);
          mma16816<T>(o[n], pf, vf[0], vf[1]);
          mma16816<T>(o[n + 1], pf, vf[2], vf[3]);
        }
      }

      wait_copies<0>(); // the next tile (if any) ...
      __syncthreads();  // ... is visible, and every warp is done with this
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
      row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    }
#pragma unroll
    for (int n = 0; n < o_tiles; ++n) {
      o[n][0] /= row_sum[0];
      o[n][1] /= row_sum[0];
      o[n][2] /= row_sum[1];
      o[n][3] /= row_sum[1];
    }
    if (stats) {
      // rowsum(dout * O), O rounded to T; each lane has its quarter of the
      // columns of rows g and g + 8.
      float delta[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (row[r] < p.Lq) {
          const T* dr = dout + b * p.dout_strides[0] + h * p.dout_strides[1] +
                        row[r] * p.dout_strides[2] + t2;
#pragma unroll
          for (int n = 0; n < o_tiles; ++n) {
            Vec<T, 2> gr = *reinterpret_cast<const Vec<T, 2>*>(dr + 8 * n);
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              delta[r] += cast_to<float>(cast_to<T>(o[n][2 * r + u])) *
                          cast_to<float>(gr.v[u]);
            }
          }
        }
        // Uniform: every lane takes part in the shuffles.
        delta[r] += __shfl_xor_sync(0xffffffffu, delta[r], 1);
        delta[r] += __shfl_xor_sync(0xffffffffu, delta[r], 2);
        if (row[r] < p.Lq && t2 == 0) {
          // As the backward uses them: P = 2^((S - st[0]) log2 e) st[1].
          float* st = stats + 3 * (bh * p.Lq + row[r]);
          st[0] = row_max[r] == -inf ? 0.0f : row_max[r];
          st[1] = 1.0f / row_sum[r];
          st[2] = delta[r];
        }
      }
    } else {
      if (lse) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (row[r] < p.Lq && t2 == 0) {
            lse[bh * p.Lq + row[r]] = row_max[r] + logf(row_sum[r]);
          }
        }
      }
      // O as T through the warp's own 16 rows of the Q tile, which only
      // this warp reads, then 16-byte row-major stores.
      T* staged = qs + (warp * 16) * ldt;
#pragma unroll
      for (int n = 0; n < o_tiles; ++n) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          Vec<T, 2> pair{
              {cast_to<T>(o[n][2 * r]), cast_to<T>(o[n][2 * r + 1])}};
          *reinterpret_cast<Vec<T, 2>*>(staged + (g + 8 * r) * ldt + 8 * n +
                                        t2) = pair;
        }
      }
      __syncwarp();
      constexpr int row_chunks = D / 8; // 16-byte chunks per row
      static_assert(16 * row_chunks % warp_size == 0);
#pragma unroll
      for (int u = 0; u < 16 * row_chunks / warp_size; ++u) {
        int c = lane + u * warp_size;
        int r = c / row_chunks, col = (c % row_chunks) * 8;
        int64_t i = first_row + r;
        if (i < p.Lq) {
          *reinterpret_cast<Vec<T, 8>*>(out + (bh * p.Lq + i) * D + col) =
              *reinterpret_cast<const Vec<T, 8>*>(staged + r * ldt + col);
        }
      }
    }
  }
}

} // namespace kiln::cuda
