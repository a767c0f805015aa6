// Ahead-of-time sorts and argsorts of float32, float16, bfloat16, int32,
// int64 and uint32 in every tile and for long lines, and their searchsorted.
// Everything else is compiled by NVRTC at first use.
#include <utility>

#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/device/sort.cuh"

namespace kiln::cuda {

namespace {

template <typename T, bool Arg, size_t... Tiles>
void sorts(AotTable& t, std::index_sequence<Tiles...>) {
  (aot::put(t, sort_kernel(aot::dtype_v<T>, Arg, Tiles),
            reinterpret_cast<const void*>(
                &sort_lines<T, Arg, sort_tiles[Tiles].threads,
                            sort_tiles[Tiles].items>)),
   ...);
}

template <typename T, bool Arg>
void long_sorts(AotTable& t) {
  using namespace aot;
  constexpr Tile tile = sort_tiles.back();
  put(t, long_sort_kernel(dtype_v<T>, Arg, 'r'),
      reinterpret_cast<const void*>(
          &sort_runs<T, Arg, tile.threads, tile.items>));
  put(t, long_sort_kernel(dtype_v<T>, Arg, 'm'),
      reinterpret_cast<const void*>(&merge_runs<radix_key_t<T>>));
  put(t, long_sort_kernel(dtype_v<T>, Arg, 'w'),
      reinterpret_cast<const void*>(&write_sorted<T, Arg>));
}

template <typename T>
void sorts_and_argsorts(AotTable& t) {
  auto tiles = std::make_index_sequence<sort_tiles.size()>();
  sorts<T, false>(t, tiles);
  sorts<T, true>(t, tiles);
  long_sorts<T, false>(t);
  long_sorts<T, true>(t);
  aot::put(t, search_sorted_kernel(aot::dtype_v<T>),
           reinterpret_cast<const void*>(&search_sorted<T>));
}

} // namespace

void add_aot_sort(AotTable& t) {
  sorts_and_argsorts<float>(t);
  sorts_and_argsorts<__half>(t);
  sorts_and_argsorts<__nv_bfloat16>(t);
  sorts_and_argsorts<int32_t>(t);
  sorts_and_argsorts<int64_t>(t);
  sorts_and_argsorts<uint32_t>(t);
}

} // namespace kiln::cuda
