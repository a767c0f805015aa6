// RandomBits: Threefry-2x32 (20 rounds), laid out exactly as the CPU
// backend (backend/cpu/random.cpp) and MLX do, so both devices draw the
// same bits. Each key fills per_key bytes: of its `words` 32-bit words,
// word j < half comes from the first output of counter (j, j + half + odd)
// and word j + half + odd from its second; an odd middle word is the first
// output of (half, 0). A trailing partial word keeps its low-order bytes.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

__device__ __forceinline__ uint32_t rotl(uint32_t x, int r) {
  return (x << r) | (x >> (32 - r));
}

__device__ __forceinline__ void threefry2x32(uint32_t k0, uint32_t k1,
                                             uint32_t c0, uint32_t c1,
                                             uint32_t& y0, uint32_t& y1) {
  const int rotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + ks[0];
  uint32_t x1 = c1 + ks[1];
#pragma unroll
  for (int i = 0; i < 5; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      x0 += x1;
      x1 = rotl(x1, rotations[i % 2][j]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + static_cast<uint32_t>(i + 1);
  }
  y0 = x0;
  y1 = x1;
}

/** Stores word `word` of a key's share (per_key bytes at dst), little-endian,
 *  truncated to the bytes that remain. */
__device__ __forceinline__ void put_word(unsigned char* dst, int64_t per_key,
                                         int64_t word, uint32_t v) {
  int64_t at = 4 * word;
  int64_t n = per_key - at < 4 ? per_key - at : 4;
  unsigned char* p = dst + at;
  if (n == 4 && reinterpret_cast<uintptr_t>(p) % 4 == 0) {
    *reinterpret_cast<uint32_t*>(p) = v;
  } else {
    for (int64_t b = 0; b < n; ++b) {
      p[b] = static_cast<unsigned char>(v >> (8 * b));
    }
  }
}

/** keys: num_keys row-major pairs. One work item per (key, counter): items
 *  = half + odd counters per key. */
template <int Unused = 0>
__global__ void random_bits(const uint32_t* __restrict__ keys,
                            unsigned char* __restrict__ out, int64_t num_keys,
                            int64_t per_key) {
  int64_t words = (per_key + 3) / 4;
  int64_t half = words / 2, odd = words % 2;
  int64_t items = half + odd;
  int64_t n = num_keys * items;
  for (int64_t t = first_index<1>(); t < n; t += grid_step<1>()) {
    int64_t k = t / items, j = t - k * items;
    uint32_t k0 = keys[2 * k], k1 = keys[2 * k + 1];
    unsigned char* dst = out + k * per_key;
    uint32_t y0, y1;
    if (j < half) {
      threefry2x32(k0, k1, static_cast<uint32_t>(j),
                   static_cast<uint32_t>(j + half + odd), y0, y1);
      put_word(dst, per_key, j, y0);
      put_word(dst, per_key, j + half + odd, y1);
    } else {
      threefry2x32(k0, k1, static_cast<uint32_t>(half), 0u, y0, y1);
      put_word(dst, per_key, half, y0);
    }
  }
}

} // namespace kiln::cuda
