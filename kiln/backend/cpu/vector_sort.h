// Sorting 32-bit unsigned keys with AVX-512: a quicksort
// whose partitions compress-store sixteen keys at a time, down to pieces
// of at most 256 keys, which a bitonic network sorts in registers (the
// method of NumPy's x86-simd-sort, written here from the algorithm).
// Every 32-bit dtype maps to such keys (radix_key), so float32, int32 and
// uint32 values sort through it on CPUs that have AVX-512; elsewhere
// vector_sort_available() is false and the radix and comparison sorts run.
// Partitions keep std::nth_element, whose order within each side is the
// one MLX's CPU gives (Sort.TopkMatchesMlx).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::detail {

/** True when this CPU runs the AVX-512 sort (checked once). */
bool vector_sort_available();

/** Sorts keys[0, n) ascending; tmp has room for n keys (scratch). */
void vector_sort_keys(uint32_t* keys, uint32_t* tmp, size_t n);

} // namespace kiln::detail
