// The small kernels around cuSOLVER's factorizations (linalg.cpp), over
// `total` elements of row-major rows x cols matrices stored one after
// another: zero the entries outside the triangle a routine wrote (its
// other triangle still holds the input), write identity matrices (the
// right sides whose solution is an inverse), and turn getrf's pivots into
// kiln's (0-based swaps and the row order they make), geev's real
// eigenvectors into complex ones, batches of small linear systems solved
// whole (cuSOLVER takes one matrix per call), and find the zero diagonal
// entries cuBLAS's trsm does not report.
#pragma once

#include "kiln/backend/cuda/device/utils.cuh"

namespace kiln::cuda {

template <typename T>
__global__ void keep_triangle(T* __restrict__ a, int64_t rows, int64_t cols,
                              int64_t total, bool upper) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    int64_t r = (i / cols) % rows, c = i % cols;
    if (upper ? c < r : c > r) a[i] = T(0);
  }
}

/** keep_triangle's parameters, so one launch serves both. */
template <typename T>
__global__ void identity(T* __restrict__ a, int64_t rows, int64_t cols,
                         int64_t total, bool) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    a[i] = (i / cols) % rows == i % cols ? T(1) : T(0);
  }
}

/** One thread per matrix: ipiv's k 1-based swaps as 0-based pivots, and
 *  perm with a[r] = (L U)[perm[r]] over m rows: the swaps applied in order
 *  to the identity give `order`, the rows of a that make up L U; perm
 *  inverts it. */
template <typename I>
__global__ void lu_pivots(const I* __restrict__ ipiv,
                          uint32_t* __restrict__ pivots,
                          uint32_t* __restrict__ perm,
                          uint32_t* __restrict__ order, int64_t m, int64_t k,
                          int64_t batch) {
  for (int64_t b = first_index<1>(); b < batch; b += grid_step<1>()) {
    uint32_t* o = order + b * m;
    for (int64_t r = 0; r < m; ++r) o[r] = static_cast<uint32_t>(r);
    for (int64_t r = 0; r < k; ++r) {
      uint32_t p = static_cast<uint32_t>(ipiv[b * k + r] - 1);
      pivots[b * k + r] = p;
      uint32_t t = o[r];
      o[r] = o[p];
      o[p] = t;
    }
    for (int64_t r = 0; r < m; ++r) {
      perm[b * m + o[r]] = static_cast<uint32_t>(r);
    }
  }
}

/** Over `total` elements of row-major complex n x n outputs: element (r, j)
 *  of eigenvector j from geev's column-major real layout, where a complex
 *  pair of eigenvalues (the one with positive imaginary part first) keeps
 *  its vector's real part in column j and imaginary part in column j + 1,
 *  the second vector being the first's conjugate. */
template <typename T>
__global__ void eig_vectors(const T* __restrict__ vr,
                            const complex64_t* __restrict__ w,
                            complex64_t* __restrict__ out, int64_t n,
                            int64_t total) {
  for (int64_t i = first_index<1>(); i < total; i += grid_step<1>()) {
    int64_t b = i / (n * n), r = (i / n) % n, j = i % n;
    const T* v = vr + b * n * n;
    float im = w[b * n + j].im;
    if (im == 0.0f || (im > 0.0f && j + 1 == n)) {
      out[i] = complex64_t(static_cast<float>(v[j * n + r]), 0.0f);
    } else if (im > 0.0f) {
      out[i] = complex64_t(static_cast<float>(v[j * n + r]),
                           static_cast<float>(v[(j + 1) * n + r]));
    } else {
      out[i] = complex64_t(static_cast<float>(v[(j - 1) * n + r]),
                           -static_cast<float>(v[j * n + r]));
    }
  }
}

/** The largest order and number of right sides small_solve takes: [A | B]
 *  of float64 at 64 x 128 is 66 KiB of shared memory. */
inline constexpr int small_order = 64;

/** The shared memory small_solve needs for n x n systems with r right
 *  sides: [A | B] with rows padded by one (no bank conflicts down a
 *  column), and a factor per row. */
__host__ __device__ inline int small_solve_shared_elements(int n, int r) {
  return n * (n + r + 1) + n;
}

/** A X = B for batches of small systems, a block per system (a loop over
 *  them): Gauss-Jordan elimination with partial pivoting (the rows LU's
 *  partial pivoting picks: the first of the largest magnitudes below the
 *  diagonal, when larger than the diagonal's) on [A | B] in shared memory
 *  (small_solve_shared_elements of T, dynamic). a holds row-major n x n
 *  matrices, b row-major n x r right sides, or identities when b is null
 *  (x is then the inverse); x gets row-major n x r solutions. info gets,
 *  per system, 0 or the 1-based step whose pivot is exactly zero
 *  (LAPACK's getrf info). Blocks of at least 32 threads. */
template <typename T>
__global__ void small_solve(const T* __restrict__ a, const T* __restrict__ b,
                            T* __restrict__ x, int n, int r, int64_t batch,
                            int* __restrict__ info) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* m = reinterpret_cast<T*>(shared_bytes);
  __shared__ int pivot;
  int w = n + r, stride = w + 1;
  T* factor = m + n * stride;
  for (int64_t s = blockIdx.x; s < batch; s += gridDim.x) {
    const T* as = a + s * n * n;
    for (int e = threadIdx.x; e < n * w; e += blockDim.x) {
      int i = e / w, j = e % w;
      m[i * stride + j] = j < n  ? as[i * n + j]
                          : b    ? b[s * n * r + i * r + (j - n)]
                                 : T(i == j - n ? 1 : 0);
    }
    __syncthreads();
    int status = 0;
    for (int k = 0; k < n; ++k) {
      if (threadIdx.x < 32) {
        // The first row below k of the largest magnitude (NaN never
        // wins), then against the diagonal: what a scan down the column
        // from k that takes only larger values picks.
        T best = T(-1);
        int at = n;
        for (int i = k + 1 + threadIdx.x; i < n; i += 32) {
          T v = m[i * stride + k];
          v = v < T(0) ? -v : v;
          if (v > best) best = v, at = i; // rows ascend in each lane
        }
        for (int o = 16; o > 0; o /= 2) {
          T ob = __shfl_down_sync(0xffffffffu, best, o);
          int oa = __shfl_down_sync(0xffffffffu, at, o);
          if (ob > best || (ob == best && oa < at)) best = ob, at = oa;
        }
        if (threadIdx.x == 0) {
          T d = m[k * stride + k];
          d = d < T(0) ? -d : d;
          pivot = at < n && best > d ? at : k;
        }
      }
      __syncthreads();
      int p = pivot;
      if (p != k) {
        for (int j = threadIdx.x; j < w; j += blockDim.x) {
          T t = m[k * stride + j];
          m[k * stride + j] = m[p * stride + j];
          m[p * stride + j] = t;
        }
        __syncthreads();
      }
      T d = m[k * stride + k]; // the same for every thread: a uniform branch
      if (d == T(0)) {
        if (status == 0) status = k + 1;
        __syncthreads(); // every thread has read pivot before it changes
        continue;
      }
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        factor[i] = i == k ? T(0) : m[i * stride + k] / d;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < n * w; e += blockDim.x) {
        int i = e / w, j = e % w;
        if (i != k && j > k) m[i * stride + j] -= factor[i] * m[k * stride + j];
      }
      __syncthreads();
    }
    for (int e = threadIdx.x; e < n * r; e += blockDim.x) {
      int i = e / r;
      x[s * n * r + e] = m[i * stride + n + e % r] / m[i * stride + i];
    }
    if (threadIdx.x == 0) info[s] = status;
    __syncthreads();
  }
}

/** A warp per matrix of the batch: info[b] = 1 + the first zero on the
 *  diagonal of n x n matrix b, 0 when there is none (trtri's status). */
template <typename T>
__global__ void zero_diagonal(const T* __restrict__ a, int64_t n,
                              int64_t batch, int* __restrict__ info) {
  int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) +
                  threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (warp >= batch) return;
  const T* m = a + warp * n * n;
  int64_t first = n;
  for (int64_t i = lane; i < n && first == n; i += 32) {
    bool zero = m[i * n + i] == T(0);
    unsigned hits = __ballot_sync(__activemask(), zero);
    if (hits) first = i - lane + __ffs(hits) - 1;
  }
  if (lane == 0) info[warp] = first < n ? static_cast<int>(first + 1) : 0;
}

} // namespace kiln::cuda
