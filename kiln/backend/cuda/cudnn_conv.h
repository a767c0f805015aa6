// Convolution through cuDNN's engines (the graph API via cudnn-frontend's
// headers, cuDNN loaded at run time as for attention): implicit GEMMs on
// tensor cores that read the NHWC input and write the output in place,
// where kiln's own path builds a patch matrix first (im2col) and runs a
// GEMM on it. Every entry point returns false when cuDNN is missing, off
// (KILN_CUDNN_CONV=0, or set_cudnn_conv_enabled(false)), or declines the
// problem, and the caller runs the im2col path instead.
#pragma once

#include <cstdint>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln {
class Convolution;
class ConvolutionWeightGrad;
} // namespace kiln

namespace kiln::cuda {

/** Whether cuDNN convolutions can run at all here: built with
 *  cudnn-frontend, the library loaded, a GPU of compute capability 8.0 or
 *  newer, and enabled. The first call loads the library. */
bool cudnn_conv_available();

/** Turns the cuDNN path off (im2col runs) or back on, returning the
 *  previous setting; for tests and benchmarks. The default comes from
 *  KILN_CUDNN_CONV (on unless "0"). */
bool set_cudnn_conv_enabled(bool enabled);

/** The cuDNN operation that computes a Convolution node, or none (im2col
 *  then runs it). All take float16, bfloat16 or float32 throughout and 1
 *  to 3 spatial axes:
 *  - forward: no input dilation, no negative padding, and not a
 *    weight_grad (nor, past cudnn_conv_max_kernel taps, a kernel longer
 *    than its output: a weight gradient that im2col runs);
 *  - data_grad: input dilation (a transposed convolution, a strided
 *    convolution's input gradient) with unit stride, paddings up to the
 *    dilated kernel's span, kernels of at most cudnn_conv_max_kernel taps
 *    per axis, any groups;
 *  - weight_grad: no input dilation, no flip, a kernel longer than that
 *    and an output no longer (the weight gradient's convolution, whose
 *    kernel is the output's cotangent), computed as cuDNN's wgrad on the
 *    operands with their batch and channel roles swapped back (read in
 *    place where the vjp's transposes are views of row-major arrays,
 *    else copied).
 *  The graph may still decline the problem. */
enum class CudnnConvRoute { none, forward, data_grad, weight_grad };
CudnnConvRoute cudnn_conv_route(const Convolution& p, const array& in,
                                const array& w, const array& out);
inline constexpr int cudnn_conv_max_kernel = 16;

/** out = p(in, w) on stream s, out row-major (N, O..., C_out); inputs of
 *  any layout (copied row-major first when they are not). False when cuDNN
 *  cannot run it (nothing was launched). */
bool cudnn_conv(const Convolution& p, const array& in, const array& w,
                array& out, const Stream& s);

/** out = p's weight gradient of x (the forward's input) and dy (its
 *  output's cotangent) as cuDNN's wgrad of that forward convolution,
 *  reading both as they are (copied only when not row-major), on stream
 *  s: float16, bfloat16 or float32 throughout, 1 to 3 spatial axes, any
 *  groups, flips and kernel lengths, no input dilation or negative
 *  padding before. False when cuDNN cannot run it (nothing launched). */
bool cudnn_conv_weight_grad(const ConvolutionWeightGrad& p, const array& x,
                            const array& dy, array& out, const Stream& s);

/** Convolutions that ran on cuDNN, by route, and graphs built since the
 *  process started (tests check the path was taken). */
struct CudnnConvCounts {
  int64_t calls = 0;
  int64_t forward = 0;
  int64_t data_grad = 0;
  int64_t weight_grad = 0;
  int64_t graphs_built = 0;
};
CudnnConvCounts cudnn_conv_counts();

} // namespace kiln::cuda
