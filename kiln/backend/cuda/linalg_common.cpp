// The linear algebra kernels' names and instantiations, and the helpers
// the eval_gpus share (linalg.h).
#include "kiln/backend/cuda/linalg.h"

#include <utility>

#include "kiln/backend/cuda/elementwise.h"
#include "kiln/backend/cuda/fallback.h"
#include "kiln/backend/cuda/kernels.h"
#include "kiln/core/layout.h"

namespace kiln::cuda {

JitKernel linalg_fill_kernel(Dtype dt, bool identity) {
  std::string type = device_type(dt);
  std::pair<std::string, std::string> keep = {
      "gKeepTriangle" + dtype_name(dt),
      "kiln::cuda::keep_triangle<" + type + ">"};
  std::pair<std::string, std::string> eye = {
      "gIdentity" + dtype_name(dt), "kiln::cuda::identity<" + type + ">"};
  if (identity) std::swap(keep, eye);
  return {keep.first, "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          keep.second, {eye}};
}

namespace {

// A kernel of device/linalg.cuh: kiln::cuda::fn<type>, named name.
JitKernel linalg_kernel(std::string name, const std::string& fn,
                        const char* type) {
  return {std::move(name),
          "#include \"kiln/backend/cuda/device/linalg.cuh\"\n",
          "kiln::cuda::" + fn + "<" + type + ">",
          {}};
}

} // namespace

JitKernel eig_vectors_kernel() {
  return linalg_kernel("gEigVectorsfloat32", "eig_vectors", "float");
}

JitKernel small_solve_kernel(Dtype dt) {
  return linalg_kernel("gSmallSolve" + dtype_name(dt), "small_solve",
                       device_type(dt));
}

JitKernel zero_diagonal_kernel(Dtype dt) {
  return linalg_kernel("gZeroDiagonal" + dtype_name(dt), "zero_diagonal",
                       device_type(dt));
}

JitKernel lu_pivots_kernel(Dtype index) {
  return linalg_kernel("gLuPivots" + dtype_name(index), "lu_pivots",
                       device_type(index));
}

namespace dense {

void fill_matrices(array& a, int64_t rows, int64_t cols, bool upper,
                   bool identity, const Stream& s) {
  int64_t total = static_cast<int64_t>(a.size());
  void* ptr = identity ? a.raw_data_ptr() : device_ptr(a, s);
  void* args[] = {&ptr, &rows, &cols, &total, &upper};
  launch(get_kernel(linalg_fill_kernel(a.dtype(), identity)), total, 1, args,
         s.index);
}

int64_t batch_of(const array& a) {
  int64_t n = a.shape(-1) * a.shape(-2);
  return n > 0 ? static_cast<int64_t>(a.size()) / n : 0;
}

array strided_view(const array& a, Shape shape, const Strides& strides) {
  auto l = layout_of(shape, strides);
  array v = array::uninitialized(std::move(shape), a.dtype());
  v.copy_shared_buffer(a, strides, l.flags, l.data_size);
  return v;
}

array swapped_view(const array& a, int64_t rows) {
  Shape shape = a.shape();
  Strides strides = a.strides();
  size_t d = shape.size();
  std::swap(shape[d - 1], shape[d - 2]);
  std::swap(strides[d - 1], strides[d - 2]);
  if (rows >= 0) shape[d - 2] = static_cast<int>(rows);
  return strided_view(a, std::move(shape), strides);
}

array like(const array& x) {
  return array::uninitialized(x.shape(), x.dtype());
}

bool column_major_copy(const array& a, array& work, const Stream& s,
                       bool batched) {
  if (!runs_here(a, batched)) return false;
  array at = swapped_view(a);
  work = like(at);
  return copy_row_major(at, work, s);
}

bool runs_here(const array& a, bool batched) {
  constexpr int64_t small_order = 64, many = 16;
  int64_t n = std::max(a.shape(-1), a.shape(-2));
  bool many_small = !batched && n <= small_order && batch_of(a) > many;
  return cusolver::supports(a.dtype()) && a.size() > 0 && !many_small;
}

void triangle_routine(UnaryPrimitive& p, const std::vector<array>& inputs,
                      array& out, bool upper, bool batched,
                      TriangleRoutine routine, bool lower_faster,
                      const char* op, std::string (*why)(int)) {
  const array& a = inputs[0];
  const Stream& s = p.stream();
  int64_t n = a.shape(-1), batch = batch_of(a);
  // potrf of a large matrix is faster on the lower triangle (column-major)
  // than on the upper (1.57 against 4.32 ms at order 4096 in float32 on
  // the H200; trtri takes 8.4 ms either way): with lower_faster a
  // row-major lower triangle goes through a transposed copy each way
  // (about 0.1 ms there). The upper one is the lower one of the plain copy
  // read column-major (A^T's lower triangle is A's upper), no transposes.
  constexpr int64_t large_order = 128;
  bool transposed = lower_faster && !upper && n > large_order;
  array src = transposed ? swapped_view(a) : a;
  array work = transposed ? like(src) : out;
  if (!runs_here(a, batched) || !copy_row_major(src, work, s)) {
    eval_on_cpu(p, inputs, out);
    return;
  }
  Info info(batch, s);
  routine(!upper && !transposed, n, batch, a.dtype(), device_ptr(work, s),
          info.ptr(), s);
  info.raise_first(op, why);
  if (transposed && !copy_row_major(swapped_view(work), out, s)) {
    eval_on_cpu(p, inputs, out);
    return;
  }
  fill_matrices(out, n, n, upper, false, s);
}

} // namespace dense

} // namespace kiln::cuda
