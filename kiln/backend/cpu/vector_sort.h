// Sorting 32- and 64-bit unsigned keys with AVX-512: a quicksort whose
// partitions compare a register of keys at a time (16 or 8) and store
// each side compressed, down to pieces of at most 16 registers, which a
// bitonic network sorts in registers (the method of NumPy's
// x86-simd-sort, written here from the algorithm). Every dtype maps to
// such keys (radix_key; 16-bit ones widened), so its values sort through
// it on CPUs that have AVX-512; elsewhere vector_sort_available() is false
// and the radix and comparison sorts run. Partitions keep
// std::nth_element, whose order within each side is the one MLX's CPU
// gives (Sort.TopkMatchesMlx).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::detail {

/** True when this CPU runs the AVX-512 sort (checked once). */
bool vector_sort_available();

/** Sorts keys[0, n) ascending; tmp has room for n keys (scratch). */
void vector_sort_keys(uint32_t* keys, uint32_t* tmp, size_t n);
void vector_sort_keys(uint64_t* keys, uint64_t* tmp, size_t n);

} // namespace kiln::detail
