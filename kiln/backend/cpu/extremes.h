// Maxima, minima and their positions over contiguous float32 runs, with
// SIMD versions chosen when the library loads: the library is built for the
// x86-64 baseline, where these lane loops stay scalar (NumPy's argmax over
// 2048-float rows was 8x faster than kiln's scalar loop).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::detail {

/** The maximum (minimum) of p[0..n), n >= 1; NaN if any value is NaN. */
float max_run_f32(const float* p, size_t n);
float min_run_f32(const float* p, size_t n);

/** The index of the first maximum (minimum) of p[0..n), n >= 1; the first
 *  NaN wins where there is one (as NumPy). */
uint32_t argmax_run_f32(const float* p, size_t n);
uint32_t argmin_run_f32(const float* p, size_t n);

} // namespace kiln::detail
