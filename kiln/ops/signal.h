// Signal processing, as mlx.core: the classic tapering windows, 1-d
// convolution and the Walsh-Hadamard transform.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

/** Windows of M points (float32; empty for M < 1, [1] for M = 1) with
 *  NumPy's formulas: Bartlett (triangular), Blackman, Hamming and Hann. */
array bartlett(int M, StreamOrDevice s = {});
array blackman(int M, StreamOrDevice s = {});
array hamming(int M, StreamOrDevice s = {});
array hanning(int M, StreamOrDevice s = {});

/** Discrete convolution of 1-d a and v (swapped when v is longer), mode
 *  "full", "same" (the length of the longer, centred as NumPy) or "valid".
 *  Floating inputs only (as MLX). */
array convolve(const array& a, const array& v, const std::string& mode = "full",
               StreamOrDevice s = {});

/** H @ x along the last axis times scale (default 1/sqrt(n), which makes
 *  the transform orthonormal), for n = m * 2^k with m in (1, 12, 20, 28):
 *  H = H_m (x) H_2^k with Sylvester's H_2^k and MLX's H_m (Paley's
 *  construction for 12, Williamson arrays for 20 and 28). Integers are
 *  taken as float32; half types are summed in float32 and returned in
 *  their own type. */
array hadamard_transform(const array& a,
                         std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

} // namespace kiln
