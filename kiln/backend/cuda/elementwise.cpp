#include "kiln/backend/cuda/elementwise.h"

#include <array>
#include <climits>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "kiln/backend/common/elementwise_layout.h"
#include "kiln/backend/common/strided.h"
#include "kiln/backend/cuda/device/transpose_blocks.cuh"
#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/elementwise_kernels.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/indexing.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/backend/cuda/strided.h"
#include "kiln/primitives/elementwise.h"
#include "kiln/primitives/shape.h"

namespace kiln::cuda {

namespace {

// A same-dtype copy through the general kernel whose innermost collapsed
// dimension is contiguous on both sides can move 8-byte chunks instead of
// elements: a transposed (B, L, H, D) -> (B, H, L, D) copy of bfloat16 then
// runs a quarter of the threads, each with one 8-byte access and one index
// computation for four elements. Rewrites the copy (layout l: input 0,
// output 1; n elements of in_dt to out_dt) as one of uint64 chunks when
// the dtypes match and the layout splits evenly (no stride, inner extent
// or pointer off a chunk boundary); otherwise leaves it as it is.
void as_chunks(Strided<2>& l, int64_t& n, Dtype& in_dt, Dtype& out_dt,
               const void* in, const void* out) {
  constexpr size_t chunk = 8;
  int d = l.ndim - 1;
  if (in_dt != out_dt || in_dt.size >= chunk || d < 0) return;
  int64_t k = static_cast<int64_t>(chunk / in_dt.size);
  if (l.strides[0][d] != 1 || l.strides[1][d] != 1 || l.shape[d] % k != 0 ||
      reinterpret_cast<uintptr_t>(in) % chunk != 0 ||
      reinterpret_cast<uintptr_t>(out) % chunk != 0) {
    return;
  }
  for (int j = 0; j < d; ++j) {
    if (l.strides[0][j] % k != 0 || l.strides[1][j] % k != 0) return;
  }
  l.shape[d] = static_cast<int32_t>(l.shape[d] / k);
  for (int j = 0; j < d; ++j) {
    l.strides[0][j] /= k;
    l.strides[1][j] /= k;
  }
  n /= k;
  in_dt = out_dt = uint64;
}

// A copy between equal dtypes whose collapsed layout l (input 0, output
// 1) transposes: the output's contiguous axis strided in the input and the
// input's contiguous axis strided in the output, both at least 16 long
// (a transpose made row-major, or a row-major array written through
// permuted strides). It runs in tiles staged in shared memory
// (device/transpose.cuh), reading and writing along memory; the general
// kernel, walking one side's order, touches a sector per element on the
// other. Returns false, doing nothing, for other copies.
bool transposed_copy(const Strided<2>& l, Dtype in_dt, Dtype out_dt,
                     const void* in, void* out, int stream) {
  constexpr int64_t min_len = 16;
  if (in_dt != out_dt) return false;
  int a = -1, b = -1;
  for (int k = 0; k < l.ndim; ++k) {
    if (l.strides[1][k] == 1) a = k;
    if (l.strides[0][k] == 1) b = k;
  }
  if (a < 0 || b < 0 || a == b || l.shape[a] < min_len ||
      l.shape[b] < min_len) {
    return false;
  }
  int64_t len_a = l.shape[a], len_b = l.shape[b];
  int64_t in_a = l.strides[0][a], out_b = l.strides[1][b];
  Strided<2> planes{};
  int64_t count = 1;
  for (int k = 0; k < l.ndim; ++k) {
    if (k == a || k == b) continue;
    planes.shape[planes.ndim] = l.shape[k];
    planes.strides[0][planes.ndim] = l.strides[0][k];
    planes.strides[1][planes.ndim] = l.strides[1][k];
    ++planes.ndim;
    count *= l.shape[k];
  }
  constexpr int64_t tile = transpose_tile;
  const int64_t per_block = transpose_tiles_per_block(in_dt.size);
  int64_t tiles = count * ((len_a + tile - 1) / tile) *
                  ((len_b + tile - 1) / tile);
  int64_t blocks = (tiles + per_block - 1) / per_block;
  if (blocks > INT32_MAX) return false;
  KernelKey key('t', "TransposeTiles");
  key.add(uint32_t(in_dt.size));
  CUfunction f =
      find_kernel(key, [&] { return transpose_kernel(raw_dtype(in_dt)); });
  void* args[] = {&in, &out, &len_a, &len_b, &in_a, &out_b, &tiles, &planes};
  launch_blocks(f, blocks, transpose_tile, transpose_rows, args, stream);
  return true;
}

// The kernel for op on in_dt -> out_dt with input pattern `pattern` ("v",
// "vs", ..., or "g"), found by a short key first.
template <size_t N>
CUfunction kernel_for(const char* op, Dtype in_dt, Dtype out_dt,
                      const std::string& pattern, bool large) {
  uint32_t pat = 0;
  for (size_t i = 0; i < pattern.size() && i < 4; ++i) {
    pat |= uint32_t(static_cast<unsigned char>(pattern[i])) << (8 * i);
  }
  KernelKey key(char('0' + N), op);
  key.add(uint32_t(in_dt.val) | uint32_t(out_dt.val) << 8 |
          uint32_t(large) << 16)
      .add(pat);
  return find_kernel(key, [&] {
    return N == 1   ? unary_kernel(op, in_dt, out_dt, pattern, large)
           : N == 2 ? binary_kernel(op, in_dt, out_dt, pattern, large)
                    : ternary_kernel(out_dt, pattern, large);
  });
}

// The ops with complex64 kernels: the table rows whose functor has a
// complex meaning (the device compiles the same functors), the copy and the
// parts of a complex value. The others run complex arrays on the CPU.
bool has_complex_kernel(const char* op) {
  static const std::unordered_set<std::string_view> ops = [] {
    std::unordered_set<std::string_view> s = {"AsType", "Select", "Real",
                                              "Imag", "Conjugate"};
#define KILN_COMPLEX_ROW(Name, ...) \
  if (::kiln::detail::Name::complex) s.insert(#Name);
    KILN_UNARY_OPS(KILN_COMPLEX_ROW)
    KILN_BINARY_OPS(KILN_COMPLEX_ROW)
#undef KILN_COMPLEX_ROW
    return s;
  }();
  return ops.count(op) != 0;
}

bool kernel_supports(const char* op, Dtype dt) {
  return gpu_supports(dt) || (dt == complex64 && has_complex_kernel(op));
}

// The dtypes a kernel taking `in` to `out` works in: their own, or for a
// copy of complex64 the 8-byte values as uint64. Empty when the GPU kernels
// cannot run it.
std::optional<std::pair<Dtype, Dtype>> kernel_dtypes(const char* op, Dtype in,
                                                     Dtype out) {
  if (in == complex64 && out == complex64 && std::strcmp(op, "AsType") == 0) {
    return std::pair{uint64, uint64};
  }
  if (!kernel_supports(op, in) || !kernel_supports(op, out)) {
    return std::nullopt;
  }
  return std::pair{in, out};
}

template <size_t N>
bool run(const char* op, const std::array<const array*, N>& in,
         array& out, const Stream& s, bool row_major) {
  for (auto* a : in) {
    if (!kernel_dtypes(op, a->dtype(), out.dtype())) return false;
  }
  auto [in_dt, out_dt] = *kernel_dtypes(op, in[N - 1]->dtype(), out.dtype());
  constexpr size_t K = N + 1;
  detail::ElementwiseLayout lay{false, nullptr};
  if (!row_major) {
    if constexpr (N == 1) lay = detail::elementwise_layout({*in[0]});
    if constexpr (N == 2) lay = detail::elementwise_layout({*in[0], *in[1]});
    if constexpr (N == 3) {
      lay = detail::elementwise_layout({*in[0], *in[1], *in[2]});
    }
  }
  Strided<K> layout{};
  std::string pattern;
  if (lay.flat) {
    // An input laid out as the output, that nothing else holds, becomes the
    // output (the kernel reads each element before writing it), as on the
    // CPU. Scalars broadcast from one element are no candidates.
    bool donated = false;
    for (auto* a : in) {
      if (a != lay.layout && a->data_size() == 1) continue;
      if (a->strides() == lay.layout->strides() &&
          a->data_size() == lay.layout->data_size() &&
          donate_device_buffer(*a, out, s)) {
        donated = true;
        break;
      }
    }
    if (!donated) {
      set_device_output(out, lay.layout->data_size(), lay.layout->strides(),
                        lay.layout->flags(), s);
    }
    for (auto* a : in) pattern += a->data_size() == 1 ? 's' : 'v';
    if (N == 1) pattern = "v";
  } else {
    std::array<Strides, K> st;
    for (size_t k = 0; k < N; ++k) st[k] = in[k]->strides();
    st[N] = row_major_strides(out.shape());
    if (!collapsed(out.shape(), st, layout)) return false;
    set_device_output(out, s);
    pattern = "g";
  }
  int64_t n = lay.flat ? static_cast<int64_t>(out.data_size())
                       : static_cast<int64_t>(out.size());
  if (n == 0) return true;
  bool large = !lay.flat && out.size() > UINT32_MAX;
  void* ptrs[K];
  for (size_t i = 0; i < N; ++i) ptrs[i] = device_ptr(*in[i], s);
  ptrs[N] = out.raw_data_ptr();
  if constexpr (N == 1) {
    if (!lay.flat && std::strcmp(op, "AsType") == 0) {
      if (transposed_copy(layout, in_dt, out_dt, ptrs[0], ptrs[1], s.index)) {
        return true;
      }
      as_chunks(layout, n, in_dt, out_dt, ptrs[0], ptrs[1]);
    }
  }
  CUfunction f = kernel_for<N>(op, in_dt, out_dt, pattern, large);
  void* args[K + 2];
  for (size_t i = 0; i < K; ++i) args[i] = &ptrs[i];
  args[K] = &n;
  args[K + 1] = &layout; // a parameter of the general kernels only
  int per_thread = lay.flat ? vec_width(in_dt, out_dt) : 1;
  // The elementwise kernels declare a GridDependency.
  launch(f, n, per_thread, KernelArgs(args, lay.flat ? K + 1 : K + 2),
         s.index, true);
  return true;
}

} // namespace

bool elementwise(const char* op, const std::vector<array>& inputs,
                 array& out, const Stream& s, bool row_major) {
  switch (inputs.size()) {
    case 1:
      return run<1>(op, {&inputs[0]}, out, s, row_major);
    case 2:
      return run<2>(op, {&inputs[0], &inputs[1]}, out, s, row_major);
    case 3:
      return run<3>(op, {&inputs[0], &inputs[1], &inputs[2]}, out, s,
                    row_major);
    default:
      return false;
  }
}

bool copy_row_major(const array& src, array& out, const Stream& s) {
  return elementwise("AsType", {src}, out, s, true);
}

bool copy_or_donate(const array& src, array& out, const Stream& s) {
  bool dense = src.flags().row_contiguous && src.data_size() == src.size();
  if (dense && src.dtype() == out.dtype() && src.size() > 0 &&
      donate_device_buffer(src, out, s)) {
    return true;
  }
  return copy_row_major(src, out, s);
}

bool can_copy_into(const array& src, Dtype to, const Strides& dst_strides) {
  Strided<2> l;
  return kernel_dtypes("AsType", src.dtype(), to) &&
         collapsed(src.shape(), std::array<Strides, 2>{src.strides(),
                                                       dst_strides},
                   l);
}

void copy_into(const array& src, array& dst, const Strides& dst_strides,
               int64_t dst_offset, const Stream& s) {
  int64_t n = static_cast<int64_t>(src.size());
  if (n == 0) return;
  Strided<2> l;
  collapsed(src.shape(), std::array<Strides, 2>{src.strides(), dst_strides},
            l);
  void* in = device_ptr(src, s);
  void* out =
      static_cast<char*>(device_ptr(dst, s)) + dst_offset * dst.itemsize();
  auto [in_dt, out_dt] = *kernel_dtypes("AsType", src.dtype(), dst.dtype());
  if (transposed_copy(l, in_dt, out_dt, in, out, s.index)) return;
  as_chunks(l, n, in_dt, out_dt, in, out);
  CUfunction f =
      kernel_for<1>("AsType", in_dt, out_dt, "g", src.size() > UINT32_MAX);
  void* args[] = {&in, &out, &n, &l};
  launch(f, n, 1, args, s.index, true);
}

bool row_contiguous(const array& x, array& out, const Stream& s) {
  if (x.flags().row_contiguous) {
    out = x;
    return true;
  }
  out = array::uninitialized(x.shape(), x.dtype());
  return copy_row_major(x, out, s);
}

} // namespace kiln::cuda

namespace kiln {

// Every elementwise primitive runs the kernel of its functor's name.
void Elementwise::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!cuda::elementwise(name(), inputs, out, stream())) {
    cuda::eval_on_cpu(*this, inputs, out);
  }
}

// So do the parts of a complex64 array.
#define KILN_COMPLEX_PART_GPU(Name)                                  \
  void Name::eval_gpu(const std::vector<array>& inputs, array& out) { \
    if (!cuda::elementwise(name(), inputs, out, stream())) {         \
      cuda::eval_on_cpu(*this, inputs, out);                         \
    }                                                                \
  }
KILN_COMPLEX_PART_GPU(Real)
KILN_COMPLEX_PART_GPU(Imag)
KILN_COMPLEX_PART_GPU(Conjugate)
#undef KILN_COMPLEX_PART_GPU

} // namespace kiln
