// Convolutions, channels-last as MLX: inputs (N, spatial..., C_in), weights
// (C_out, K..., C_in / groups), cross-correlation (the kernel is not flipped).
// Padding must be non-negative (MLX lets negative padding crop; kiln raises).
#pragma once

#include <tuple>
#include <utility>
#include <vector>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {

array conv1d(const array& input, const array& weight, int stride = 1,
             int padding = 0, int dilation = 1, int groups = 1,
             StreamOrDevice s = {});

array conv2d(const array& input, const array& weight,
             const std::pair<int, int>& stride = {1, 1},
             const std::pair<int, int>& padding = {0, 0},
             const std::pair<int, int>& dilation = {1, 1}, int groups = 1,
             StreamOrDevice s = {});

array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride = {1, 1, 1},
             const std::tuple<int, int, int>& padding = {0, 0, 0},
             const std::tuple<int, int, int>& dilation = {1, 1, 1},
             int groups = 1, StreamOrDevice s = {});

/** Transposed convolutions (the gradient of conv with respect to its
 *  input). Output length (L - 1) * stride - 2 * padding + dilation * (K - 1)
 *  + output_padding + 1 per spatial axis. */
array conv_transpose1d(const array& input, const array& weight, int stride = 1,
                       int padding = 0, int dilation = 1,
                       int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});

array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride = {1, 1},
                       const std::pair<int, int>& padding = {0, 0},
                       const std::pair<int, int>& dilation = {1, 1},
                       const std::pair<int, int>& output_padding = {0, 0},
                       int groups = 1, StreamOrDevice s = {});

array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride = {1, 1, 1},
                       const std::tuple<int, int, int>& padding = {0, 0, 0},
                       const std::tuple<int, int, int>& dilation = {1, 1, 1},
                       const std::tuple<int, int, int>& output_padding = {0, 0,
                                                                          0},
                       int groups = 1, StreamOrDevice s = {});

/** The general convolution of 1 to 3 spatial dims. Each per-axis vector may
 *  be empty (all 1, or 0 for padding) or hold one value (used for every
 *  axis); padding_hi empty means the same as padding_lo. input_dilation
 *  inserts input_dilation - 1 zeros between input elements; flip turns the
 *  kernel around (a true convolution). */
array conv_general(array input, array weight, std::vector<int> stride = {},
                   std::vector<int> padding_lo = {},
                   std::vector<int> padding_hi = {},
                   std::vector<int> kernel_dilation = {},
                   std::vector<int> input_dilation = {}, int groups = 1,
                   bool flip = false, StreamOrDevice s = {});

} // namespace kiln
