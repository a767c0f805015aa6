// Custom kernel bodies (fast.cuda_kernel) shared by the NVRTC compile checks
// and the GPU tests: each exercises a part of the generated signature.
#pragma once

namespace kiln::test::custom {

// out = exp(inp) elementwise over a row-major input, in T.
inline const char* exp_body = R"(
  auto elem = cg::this_grid().thread_rank();
  if (elem < n[0]) out[elem] = static_cast<O>(exp(static_cast<T>(inp[elem])));
)";

// out = inp + 1 read through inp's strides (any layout), written row-major;
// the element count is the product of inp's shape.
inline const char* strided_body = R"(
  int64_t size = 1;
  for (int d = 0; d < inp_ndim; ++d) size *= inp_shape[d];
  int64_t elem = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (elem < size) {
    out[elem] = inp[elem_to_loc(elem, inp_shape, inp_strides, inp_ndim)] + 1;
  }
)";

// A histogram of the bin indices in idx (atomics into an output that starts
// from init_value), and a second output: every index doubled.
inline const char* histogram_body = R"(
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < idx_shape[0]) {
    atomicAdd(&counts[idx[i]], 1.0f);
    doubled[i] = 2 * idx[i];
  }
)";

// Per block of x (rows of `threads` values), the row's sum through dynamic
// shared memory of blockDim.x floats, times the template argument SCALE by
// a function of the header.
inline const char* row_sum_body = R"(
  extern __shared__ float partial[];
  const float* row = x + int64_t(blockIdx.x) * blockDim.x;
  partial[threadIdx.x] = row[threadIdx.x];
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = scaled(partial[0], SCALE);
)";
inline const char* row_sum_header = R"(
__device__ float scaled(float v, int by) { return v * by; }
)";

// A 2-d grid: out (cols, rows) = transpose of inp (rows, cols).
inline const char* transpose_body = R"(
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < inp_shape[0] && c < inp_shape[1]) {
    out[int64_t(c) * inp_shape[0] + r] = inp[int64_t(r) * inp_shape[1] + c];
  }
)";

} // namespace kiln::test::custom
