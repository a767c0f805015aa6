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

#include "kiln/backend/cuda/device/unary_ops.cuh"
#include "kiln/primitives/binary_table.h"

namespace kiln::cuda {

/** The value a scan with Op starts from (the CPU's init). */
template <typename Op, typename A>
__device__ __forceinline__ A scan_identity() {
  if constexpr (is_complex_v<A> && !is_same_v<Op, Add> &&
                !is_same_v<Op, Multiply>) {
    // Below (above) every value in the real-then-imaginary order; -inf +
    // 0i for logcumsumexp, as the CPU starts.
    const float inf = math::infinity<float>();
    if constexpr (is_same_v<Op, Maximum>) {
      return A(-inf, -inf);
    } else if constexpr (is_same_v<Op, Minimum>) {
      return A(inf, inf);
    } else {
      static_assert(is_same_v<Op, LogAddExp>, "no identity for this scan op");
      return A(-inf, 0.0f);
    }
  } else if constexpr (is_same_v<Op, Add>) {
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

/** Elements per vector access of a packed tile: 16 bytes at most, and a
 *  divisor of Items. */
template <typename T, int Items>
inline constexpr int packed_width =
    sizeof(T) * Items <= 16 ? Items : 16 / static_cast<int>(sizeof(T));

/** Whether a line's tiles are packed in memory (in_stride and inner 1) and
 *  their vectors aligned. Tiles start at multiples of the tile in scan
 *  order, and a tile's bytes are a multiple of 16, so the first one's
 *  alignment is every one's. */
template <typename In, typename Out, int Tile, int Items>
__device__ __forceinline__ bool tiles_packed(const In* x, Out* y,
                                             int64_t begin, int64_t n,
                                             int64_t inner, int64_t in_stride,
                                             bool reverse) {
  if (in_stride != 1 || inner != 1) return false;
  int64_t first = reverse ? n - begin - Tile : begin;
  return is_aligned<In, packed_width<In, Items>>(x + first) &&
         is_aligned<Out, packed_width<Out, Items>>(y + first);
}

/** Thread t's Items elements of the packed tile that starts at `start` in
 *  scan order: a blocked arrangement (thread t holds elements t * Items ..
 *  t * Items + Items - 1 in scan order), accessed as vectors. Reversed
 *  lines hold them mirrored: the tile spans memory [n - start - Tile,
 *  n - start) and element i of thread t sits at its end minus t * Items + i. */
template <typename T, int Tile, int Items>
__device__ __forceinline__ T* packed_items(T* p, int64_t start, int64_t n,
                                           bool reverse) {
  int t = threadIdx.x;
  return reverse ? p + (n - start - Tile) + (Tile - (t + 1) * Items)
                 : p + start + t * Items;
}

/** A thread's share of a packed tile as loaded, before conversion: kept in
 *  registers while the tile before it is scanned. */
template <typename In, int Items>
struct PackedLoad {
  static constexpr int W = packed_width<In, Items>;
  Vec<In, W> v[Items / W];

  __device__ __forceinline__ void load(const In* p) {
#pragma unroll
    for (int w = 0; w < Items / W; ++w)
      v[w] = *reinterpret_cast<const Vec<In, W>*>(p + w * W);
  }

  template <typename A>
  __device__ __forceinline__ void unpack(bool reverse,
                                         A (&items)[Items]) const {
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      A x = cast_to<A>(cast_to<compute_t<In>>(v[i / W].v[i % W]));
      items[reverse ? Items - 1 - i : i] = x;
    }
  }
};

template <typename Out, int Items>
__device__ __forceinline__ void store_packed(
    Out* p, bool reverse, const compute_t<Out> (&items)[Items]) {
  constexpr int W = packed_width<Out, Items>;
#pragma unroll
  for (int w = 0; w < Items / W; ++w) {
    Vec<Out, W> v;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      int i = w * W + j;
      v.v[j] = cast_to<Out>(items[reverse ? Items - 1 - i : i]);
    }
    *reinterpret_cast<Vec<Out, W>*>(p + w * W) = v;
  }
}

template <typename Op, typename A, int Threads, int Items>
__device__ __forceinline__ void scan_items(
    A (&items)[Items], bool inclusive, TileCarry<Op, A>& carry,
    typename cub::BlockScan<A, Threads>::TempStorage& storage) {
  using BlockScan = cub::BlockScan<A, Threads>;
  // `inclusive` is the same for the whole block: no divergent barrier.
  if (inclusive) {
    BlockScan(storage).InclusiveScan(items, items, Op{}, carry);
  } else {
    BlockScan(storage).ExclusiveScan(items, items, Op{}, carry);
  }
}

/** Scans elements [begin, end) of a line, in scan order, tile by tile of
 *  Threads x Items, continuing from carry. The full tiles of a packed,
 *  aligned line go from vector loads into registers and back, each tile's
 *  loads issued before the tile ahead of it is scanned (a block walks its
 *  tiles in order, so without that it waits for memory on every tile).
 *  The rest load and store through shared memory in scan order, so a
 *  strided or misaligned line is still read and written coalesced
 *  whatever the direction. */
template <typename Op, typename In, typename Out, int Threads, int Items>
__device__ void scan_range(
    const In* x, Out* y, int64_t begin, int64_t end, int64_t n,
    int64_t inner, int64_t in_stride, bool inclusive, bool reverse,
    TileCarry<Op, compute_t<Out>>& carry,
    typename cub::BlockScan<compute_t<Out>, Threads>::TempStorage& storage,
    compute_t<Out>* staged) {
  using A = compute_t<Out>;
  constexpr int tile = Threads * Items;
  int64_t start = begin;
  int64_t full_end = begin + (end - begin) / tile * tile;
  if (start < full_end && tiles_packed<In, Out, tile, Items>(
                              x, y, begin, n, inner, in_stride, reverse)) {
    PackedLoad<In, Items> next;
    next.load(packed_items<const In, tile, Items>(x, start, n, reverse));
    for (; start < full_end; start += tile) {
      A items[Items];
      next.unpack(reverse, items);
      if (start + tile < full_end)
        next.load(
            packed_items<const In, tile, Items>(x, start + tile, n, reverse));
      scan_items<Op, A, Threads, Items>(items, inclusive, carry, storage);
      store_packed<Out, Items>(
          packed_items<Out, tile, Items>(y, start, n, reverse), reverse,
          items);
      __syncthreads(); // `storage` is reused next tile
    }
  }
  for (; start < end; start += tile) {
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
    scan_items<Op, A, Threads, Items>(items, inclusive, carry, storage);
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
  // The op is associative and commutative, so a packed piece is reduced
  // in memory order, in vectors: elements [lo, hi) whichever the direction.
  constexpr int W = sizeof(In) >= 2 ? 16 / static_cast<int>(sizeof(In)) : 8;
  int64_t lo = reverse ? n - end : begin, hi = reverse ? n - begin : end;
  if (in_stride == 1 && is_aligned<In, W>(x + lo)) {
    int64_t vectors_end = lo + (hi - lo) / W * W;
#pragma unroll 4
    for (int64_t k = lo + threadIdx.x * W; k < vectors_end; k += Threads * W) {
      auto v = *reinterpret_cast<const Vec<In, W>*>(x + k);
#pragma unroll
      for (int j = 0; j < W; ++j) acc = Op{}(acc, scan_load<Out>(&v.v[j]));
    }
    for (int64_t k = vectors_end + threadIdx.x; k < hi; k += Threads)
      acc = Op{}(acc, scan_load<Out>(x + k));
  } else {
#pragma unroll 4
    for (int64_t k = begin + threadIdx.x; k < end; k += Threads)
      acc = Op{}(acc,
                 scan_load<Out>(x + scan_position(k, n, reverse) * in_stride));
  }
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
