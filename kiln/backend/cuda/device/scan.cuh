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
 *  Threads x Items, continuing from carry (a CUB block prefix callback:
 *  TileCarry, or LookbackPrefix for one tile). Loads and stores go through
 *  shared memory in scan order, so a contiguous line is read and written
 *  coalesced whatever the direction. */
template <typename Op, typename In, typename Out, int Threads, int Items,
          typename Carry>
__device__ void scan_range(
    const In* x, Out* y, int64_t begin, int64_t end, int64_t n,
    int64_t inner, int64_t in_stride, bool inclusive, bool reverse,
    Carry& carry,
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

/** A running value (a float, a double, an integer or a bool: the compute
 *  types) as the bits of a look-back slot, and back. */
template <typename A>
__device__ __forceinline__ unsigned long long to_slot(A v) {
  if constexpr (is_same_v<A, double>) {
    return static_cast<unsigned long long>(__double_as_longlong(v));
  } else if constexpr (is_same_v<A, float>) {
    return __float_as_uint(v);
  } else if constexpr (sizeof(A) <= 4) {
    return static_cast<unsigned>(v); // from_slot truncates back
  } else {
    return static_cast<unsigned long long>(v);
  }
}

template <typename A>
__device__ __forceinline__ A from_slot(unsigned long long bits) {
  if constexpr (is_same_v<A, double>) {
    return __longlong_as_double(static_cast<long long>(bits));
  } else if constexpr (is_same_v<A, float>) {
    return __uint_as_float(static_cast<unsigned>(bits));
  } else {
    return static_cast<A>(bits);
  }
}

/** Tile states of the single-pass scan. */
enum LookbackFlag : unsigned { lookback_none = 0, lookback_aggregate = 1,
                               lookback_prefix = 2 };

/** The prefix of one tile of a long line in the single-pass scan (decoupled
 *  look-back, Merrill and Garland 2016), as a CUB block prefix callback,
 *  which the first warp calls with the tile's aggregate. Lane 0 publishes
 *  the aggregate, then the warp reads the states of the 32 tiles before it
 *  at once, waiting (with a growing sleep, so that waiting warps do not
 *  flood the memory system) until each has published something; it
 *  combines them up to the nearest one whose inclusive prefix is
 *  published, or all 32 and looks further back. Lane 0 then publishes this
 *  tile's inclusive prefix. The ops are commutative and associative, so
 *  only rounding differs from one sequential pass.
 *  A running value of up to 4 bytes is published with its flag in one
 *  64-bit word (value slot 2t: flag high, bits low), written and read
 *  whole, so no fence is needed. Wider ones are stored in slot 2t
 *  (aggregate) or 2t + 1 (inclusive prefix) before their flag, with a fence
 *  between, and read after it. Reads are volatile, past the L1 cache, which
 *  is not coherent across the GPU. */
template <typename Op, typename A>
struct LookbackPrefix {
  static constexpr bool packed = sizeof(A) <= 4;
  unsigned long long* values;
  unsigned* flags;
  int64_t tile;  // this tile
  int64_t first; // the first tile of its line

  __device__ void publish(unsigned flag, A v) const {
    auto* slots = reinterpret_cast<volatile unsigned long long*>(values);
    if constexpr (packed) {
      slots[2 * tile] = static_cast<unsigned long long>(flag) << 32 | to_slot(v);
    } else {
      slots[2 * tile + (flag == lookback_prefix)] = to_slot(v);
      __threadfence();
      reinterpret_cast<volatile unsigned*>(flags)[tile] = flag;
    }
  }

  /** Tile t's state, waiting until it has one (all lanes together). */
  __device__ unsigned wait_state(int64_t t, A& v) const {
    unsigned flag = lookback_prefix;
    unsigned long long word = 0;
    auto* slots = reinterpret_cast<volatile unsigned long long*>(values);
    for (unsigned sleep = 32;; sleep = min(sleep * 2, 512u)) {
      if (t >= first) {
        if constexpr (packed) {
          word = slots[2 * t];
          flag = static_cast<unsigned>(word >> 32);
        } else {
          flag = reinterpret_cast<volatile unsigned*>(flags)[t];
        }
      }
      if (!__any_sync(0xffffffffu, flag == lookback_none)) break;
#if __CUDA_ARCH__ >= 700
      __nanosleep(sleep);
#endif
    }
    v = scan_identity<Op, A>();
    if (t >= first) {
      if constexpr (packed) {
        v = from_slot<A>(word & 0xffffffffull);
      } else {
        __threadfence();
        v = from_slot<A>(slots[2 * t + (flag == lookback_prefix)]);
      }
    }
    return flag;
  }

  __device__ A operator()(A aggregate) {
    int lane = threadIdx.x % 32;
    if (tile == first) {
      if (lane == 0) publish(lookback_prefix, aggregate);
      return scan_identity<Op, A>();
    }
    if (lane == 0) publish(lookback_aggregate, aggregate);
    A prefix = scan_identity<Op, A>();
    for (int64_t end = tile;; end -= 32) {
      // Lane i reads tile end - 1 - i; tiles before the line's first read
      // as a published identity (the first tile always stops the walk).
      A v;
      unsigned flag = wait_state(end - 1 - lane, v);
      unsigned done = __ballot_sync(0xffffffffu, flag == lookback_prefix);
      int stop = done ? __ffs(done) - 1 : 31;
      if (lane > stop) v = scan_identity<Op, A>();
#pragma unroll
      for (int m = 16; m > 0; m /= 2) {
        v = Op{}(v, from_slot<A>(__shfl_xor_sync(0xffffffffu, to_slot(v), m)));
      }
      prefix = Op{}(prefix, v);
      if (done) break;
    }
    if (lane == 0) publish(lookback_prefix, Op{}(prefix, aggregate));
    return prefix;
  }
};

/** Long lines, too few to fill the GPU with a block each, in one pass:
 *  tiles of Threads x Items in scan order, `tiles_per_line` per line, taken
 *  in order from a counter, so every tile a block waits for belongs to a
 *  block already running; each scans its tile from the prefix its
 *  look-back finds. state (axis_kernels.h's lookback_state_bytes), zeroed
 *  before the launch: the tile counter (8 bytes), two 8-byte value slots
 *  per tile, then one 4-byte flag per tile. Any number of blocks. */
template <typename Op, typename In, typename Out, int Threads, int Items>
__global__ void __launch_bounds__(Threads)
    scan_lookback(const In* __restrict__ in, Out* __restrict__ out,
                  void* state, int64_t tiles, int64_t tiles_per_line,
                  int64_t n, int64_t inner, int64_t in_stride, bool inclusive,
                  bool reverse, const __grid_constant__ Strided<1> l) {
  using A = compute_t<Out>;
  __shared__ typename cub::BlockScan<A, Threads>::TempStorage scan_storage;
  __shared__ A staged[Threads * Items];
  __shared__ int64_t taken;
  constexpr int64_t size = Threads * Items;
  auto* counter = static_cast<unsigned long long*>(state);
  auto* values = counter + 1;
  auto* flags = reinterpret_cast<unsigned*>(values + 2 * tiles);
  for (;;) {
    if (threadIdx.x == 0) taken = static_cast<int64_t>(atomicAdd(counter, 1ull));
    __syncthreads();
    int64_t tile = taken;
    __syncthreads(); // everyone has read `taken`
    if (tile >= tiles) return;
    int64_t line = tile / tiles_per_line, piece = tile % tiles_per_line;
    int64_t off[1];
    strided_offsets(line, l, off);
    LookbackPrefix<Op, A> prefix{values, flags, tile, tile - piece};
    int64_t begin = piece * size;
    scan_range<Op, In, Out, Threads, Items>(
        in + off[0], out + (line / inner) * n * inner + line % inner, begin,
        min(n, begin + size), n, inner, in_stride, inclusive, reverse,
        prefix, scan_storage, staged);
  }
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
