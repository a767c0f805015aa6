// Scans along one axis (cumsum, cumprod, cummax, cummin, logcumsumexp) with
// the CPU's semantics (backend/cpu/scan.cpp): each value is cast to the
// output's compute type, the running value starts at the op's identity and
// grows as Op(running, value) with the binary primitives' functors, so NaN
// propagation, ties and signed zeros come out as on the CPU.
//
// Lines are numbered row-major over the other axes; line l starts at input
// offset strided_offsets(l) and at output offset (l / inner) * n * inner +
// l % inner of the row-major output, whose elements step by inner.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kiln/backend/cuda/device/binary_ops.cuh"

namespace kiln::cuda {

/** The value a scan with Op starts from (the CPU's init). */
template <typename Op, typename A>
__device__ __forceinline__ A scan_identity() {
  if constexpr (is_same_v<Op, Add>) {
    return A(0);
  } else if constexpr (is_same_v<Op, Multiply>) {
    return A(1);
  } else if constexpr (is_same_v<Op, Maximum> || is_same_v<Op, LogAddExp>) {
    return lowest_value<A>();
  } else {
    static_assert(is_same_v<Op, Minimum>, "no identity for this scan op");
    return highest_value<A>();
  }
}

/** Element k of a line in scan order. */
__device__ __forceinline__ int64_t scan_position(int64_t k, int64_t n,
                                                 bool reverse) {
  return reverse ? n - 1 - k : k;
}

template <typename Out, typename In>
__device__ __forceinline__ compute_t<Out> scan_load(const In* x) {
  return cast_to<compute_t<Out>>(cast_to<compute_t<In>>(*x));
}

/** Block-wide prefix for the next tile: the running value of the tiles
 *  before it. CUB calls it from the first warp and keeps lane 0's answer;
 *  only that warp's copy of `running` is ever read. */
template <typename Op, typename A>
struct TileCarry {
  A running;
  __device__ A operator()(A tile_aggregate) {
    A before = running;
    running = Op{}(running, tile_aggregate);
    return before;
  }
};

/** Scans elements [begin, end) of a line, in scan order, tile by tile of
 *  Threads x Items, continuing from carry. Loads and stores go through
 *  shared memory in scan order, so a contiguous line is read and written
 *  coalesced whatever the direction. */
template <typename Op, typename In, typename Out, int Threads, int Items>
__device__ void scan_range(
    const In* x, Out* y, int64_t begin, int64_t end, int64_t n,
    int64_t inner, int64_t in_stride, bool inclusive, bool reverse,
    TileCarry<Op, compute_t<Out>>& carry,
    typename cub::BlockScan<compute_t<Out>, Threads>::TempStorage& storage,
    compute_t<Out>* staged) {
  using A = compute_t<Out>;
  using BlockScan = cub::BlockScan<A, Threads>;
  constexpr int tile = Threads * Items;
  for (int64_t start = begin; start < end; start += tile) {
    for (int j = threadIdx.x; j < tile; j += Threads) {
      int64_t k = start + j;
      staged[j] =
          k < end ? scan_load<Out>(x + scan_position(k, n, reverse) * in_stride)
                  : scan_identity<Op, A>();
    }
    __syncthreads();
    A items[Items];
#pragma unroll
    for (int i = 0; i < Items; ++i) items[i] = staged[threadIdx.x * Items + i];
    // `inclusive` is the same for the whole block: no divergent barrier.
    if (inclusive) {
      BlockScan(storage).InclusiveScan(items, items, Op{}, carry);
    } else {
      BlockScan(storage).ExclusiveScan(items, items, Op{}, carry);
    }
    __syncthreads(); // everyone has read `staged`
#pragma unroll
    for (int i = 0; i < Items; ++i) staged[threadIdx.x * Items + i] = items[i];
    __syncthreads();
    for (int j = threadIdx.x; j < tile; j += Threads) {
      int64_t k = start + j;
      if (k < end)
        y[scan_position(k, n, reverse) * inner] = cast_to<Out>(staged[j]);
    }
    __syncthreads(); // `staged` and `storage` are reused next tile
  }
}

/** One block per line, Threads x Items elements per tile with a carry
 *  between tiles: for lines along the innermost output axis (inner == 1),
 *  or too few lines to fill the GPU with one thread each. */
template <typename Op, typename In, typename Out, int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    scan_lines(const In* __restrict__ in, Out* __restrict__ out, int64_t lines,
               int64_t n, int64_t inner, int64_t in_stride, bool inclusive,
               bool reverse, const __grid_constant__ Strided<1> l) {
  using A = compute_t<Out>;
  __shared__ typename cub::BlockScan<A, Threads>::TempStorage scan_storage;
  __shared__ A staged[Threads * Items];
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t off[1];
    strided_offsets(line, l, off);
    TileCarry<Op, A> carry{scan_identity<Op, A>()};
    scan_range<Op, In, Out, Threads, Items>(
        in + off[0], out + (line / inner) * n * inner + line % inner, 0, n, n,
        inner, in_stride, inclusive, reverse, carry, scan_storage, staged);
  }
}

/** Long lines, too few to fill the GPU with a block each, are cut into
 *  `chunks` pieces of `chunk` elements (in scan order) and scanned in two
 *  passes, block b = line * chunks + piece: scan_chunk_totals reduces each
 *  piece; scan_chunks then scans each piece from the total of the pieces
 *  before it. The ops are associative and commutative, so only rounding
 *  differs from one sequential pass. */
template <typename Op, typename In, typename Out, int Threads>
__global__ void __launch_bounds__(Threads)
    scan_chunk_totals(const In* __restrict__ in,
                      compute_t<Out>* __restrict__ totals, int64_t chunks,
                      int64_t chunk, int64_t n, int64_t in_stride,
                      bool reverse, const __grid_constant__ Strided<1> l) {
  using A = compute_t<Out>;
  using BlockReduce = cub::BlockReduce<A, Threads>;
  __shared__ typename BlockReduce::TempStorage storage;
  int64_t line = blockIdx.x / chunks, piece = blockIdx.x % chunks;
  int64_t off[1];
  strided_offsets(line, l, off);
  const In* x = in + off[0];
  int64_t begin = piece * chunk, end = min(n, begin + chunk);
  A acc = scan_identity<Op, A>();
#pragma unroll 4
  for (int64_t k = begin + threadIdx.x; k < end; k += Threads)
    acc = Op{}(acc, scan_load<Out>(x + scan_position(k, n, reverse) * in_stride));
  A total = BlockReduce(storage).Reduce(acc, Op{});
  if (threadIdx.x == 0) totals[blockIdx.x] = total;
}

template <typename Op, typename In, typename Out, int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    scan_chunks(const In* __restrict__ in, Out* __restrict__ out,
                const compute_t<Out>* __restrict__ totals, int64_t chunks,
                int64_t chunk, int64_t n, int64_t inner, int64_t in_stride,
                bool inclusive, bool reverse,
                const __grid_constant__ Strided<1> l) {
  using A = compute_t<Out>;
  using BlockReduce = cub::BlockReduce<A, Threads>;
  __shared__ union {
    typename BlockReduce::TempStorage reduce;
    typename cub::BlockScan<A, Threads>::TempStorage scan;
  } storage;
  __shared__ A staged[Threads * Items];
  __shared__ A before;
  int64_t line = blockIdx.x / chunks, piece = blockIdx.x % chunks;
  // The pieces before this one, reduced by the whole block.
  A acc = scan_identity<Op, A>();
  for (int64_t p = threadIdx.x; p < piece; p += Threads)
    acc = Op{}(acc, totals[line * chunks + p]);
  A sum = BlockReduce(storage.reduce).Reduce(acc, Op{});
  if (threadIdx.x == 0) before = sum;
  __syncthreads(); // `before` is set; storage.reduce is free for the scan
  int64_t off[1];
  strided_offsets(line, l, off);
  TileCarry<Op, A> carry{before};
  int64_t begin = piece * chunk;
  scan_range<Op, In, Out, Threads, Items>(
      in + off[0], out + (line / inner) * n * inner + line % inner, begin,
      min(n, begin + chunk), n, inner, in_stride, inclusive, reverse, carry,
      storage.scan, staged);
}

/** One thread per line, scanning sequentially as the CPU does: for lines
 *  along an outer axis, where neighbouring threads read and write
 *  neighbouring columns (coalesced). */
template <typename Op, typename In, typename Out>
__global__ void scan_columns(const In* __restrict__ in, Out* __restrict__ out,
                             int64_t lines, int64_t n, int64_t inner,
                             int64_t in_stride, bool inclusive, bool reverse,
                             const __grid_constant__ Strided<1> l) {
  using A = compute_t<Out>;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line =
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       line < lines; line += step) {
    int64_t off[1];
    strided_offsets(line, l, off);
    const In* x = in + off[0];
    Out* y = out + (line / inner) * n * inner + line % inner;
    A acc = scan_identity<Op, A>();
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = scan_position(k, n, reverse);
      A v = scan_load<Out>(x + i * in_stride);
      if (inclusive) {
        acc = Op{}(acc, v);
        y[i * inner] = cast_to<Out>(acc);
      } else {
        y[i * inner] = cast_to<Out>(acc);
        acc = Op{}(acc, v);
      }
    }
  }
}

} // namespace kiln::cuda
