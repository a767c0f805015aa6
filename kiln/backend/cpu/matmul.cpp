// Matmul and AddMM on the CPU: one BLAS GEMM per batch matrix, reading the
// operands in place whenever their last two strides are a BLAS layout.
// Parallelism comes from OpenBLAS's threads, so no kiln pool runs here.
#include <algorithm>
#include <climits>
#include <stdexcept>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/half_matvec.h"
#include "kiln/core/dispatch.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

// One operand: its data, batch strides, and row/column strides.
template <typename T>
struct Mat {
  const T* p;
  Strides batch;
  int64_t sr, sc;
};

template <typename T>
Mat<T> mat_of(const array& x, size_t nb) {
  const Strides& st = x.strides();
  size_t nd = x.ndim();
  Strides batch(st.begin(), st.begin() + (nd - 2));
  return {x.data<T>(), batch, st[nd - 2], st[nd - 1]};
}

// The bias: a length-N vector is seen as a matrix with zero batch and row
// strides, so both of AddMM's bias forms share one path.
template <typename T>
Mat<T> bias_of(const array& c, size_t nb) {
  if (c.ndim() == 1) return {c.data<T>(), Strides(nb, 0), 0, c.strides()[0]};
  return mat_of<T>(c, nb);
}

// Stride of (batch..., rows) merged into one row dimension, or -1.
int64_t fold_stride(const Shape& batch, const Strides& bs, int64_t rows,
                    int64_t sr) {
  int64_t stride = sr, extent = rows;
  for (int i = static_cast<int>(batch.size()) - 1; i >= 0; --i) {
    if (batch[i] == 1) continue;
    if (bs[i] != stride * extent) return -1;
    stride = bs[i];
    extent = batch[i];
  }
  return sr;
}

// Rows of a converted (16-bit) product per block: bounds the float32 scratch
// for A and C to about 4 MiB each; B is converted once per matrix.
constexpr int64_t convert_block_elems = int64_t(1) << 20;

template <typename T, typename G>
void gemm_one(const Mat<T>& a, const Mat<T>& b, const Mat<T>* c, int64_t offa,
              int64_t offb, int64_t offc, T* out, int64_t m, int64_t n,
              int64_t k, float alpha, float beta,
              std::vector<G> (&scratch)[3]) {
  constexpr bool native = std::is_same_v<T, G>;
  if constexpr (!native && is_half_v<T>) {
    if (m <= detail::half_matvec_max_rows && k > 0 &&
        (b.sr == 1 || b.sc == 1)) {
      // A few rows: W read in place (half_matvec.h).
      std::vector<G>& x = scratch[0];
      std::vector<G>& dst = scratch[2];
      x.resize(static_cast<size_t>(m * k));
      dst.resize(static_cast<size_t>(m * n));
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t i = 0; i < k; ++i) {
          x[r * k + i] = cast_to<G>(a.p[offa + r * a.sr + i * a.sc]);
        }
      }
      float beta_used = 0.0f;
      if (c && beta != 0.0f) {
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < n; ++j) {
            dst[r * n + j] = cast_to<G>(c->p[offc + r * c->sr + j * c->sc]);
          }
        }
        beta_used = beta;
      }
      detail::half_matvec<T>(x.data(), m, k, b.p + offb, b.sr, b.sc, n, alpha,
                             beta_used, dst.data());
      for (int64_t i = 0; i < m * n; ++i) out[i] = cast_to<T>(dst[i]);
      return;
    }
  }
  int64_t block =
      native ? m : std::max<int64_t>(1, convert_block_elems / std::max(k, n));
  detail::GemmOperand<G> B{};
  if (k > 0) {
    B = detail::gemm_operand<G>(b.p + offb, k, n, b.sr, b.sc, scratch[1]);
  }
  for (int64_t r0 = 0; r0 < m; r0 += block) {
    int64_t rows = std::min(block, m - r0);
    G* dst;
    if constexpr (native) {
      dst = out + r0 * n;
    } else {
      scratch[2].resize(static_cast<size_t>(rows * n));
      dst = scratch[2].data();
    }
    G beta_g = G(0);
    if (c && beta != 0.0f) {
      const T* cp = c->p + offc + r0 * c->sr;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          dst[r * n + j] = cast_to<G>(cp[r * c->sr + j * c->sc]);
        }
      }
      beta_g = G(beta);
    }
    if (k == 0) {
      // An empty sum: only the bias term remains.
      if (beta_g == G(0)) {
        std::fill(dst, dst + rows * n, G(0));
      } else {
        for (int64_t i = 0; i < rows * n; ++i) dst[i] = beta_g * dst[i];
      }
    } else {
      auto A = detail::gemm_operand<G>(a.p + offa + r0 * a.sr, rows, k, a.sr,
                                       a.sc, scratch[0]);
      detail::gemm(A.trans, B.trans, static_cast<int>(rows),
                   static_cast<int>(n), static_cast<int>(k), G(alpha), A.ptr,
                   A.ld, B.ptr, B.ld, beta_g, dst, static_cast<int>(n));
    }
    if constexpr (!native) {
      T* o = out + r0 * n;
      for (int64_t i = 0; i < rows * n; ++i) o[i] = cast_to<T>(dst[i]);
    }
  }
}

template <typename T, typename G>
void run_matmul(const array& a_in, const array& b_in, const array* c_in,
                float alpha, float beta, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  size_t nd = out.ndim(), nb = nd - 2;
  int64_t m = a_in.shape(-2), k = a_in.shape(-1), n = b_in.shape(-1);
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    throw std::invalid_argument("[matmul] matrix dimensions exceed INT_MAX.");
  }
  Shape batch(out.shape().begin(), out.shape().begin() + nb);
  auto a = mat_of<T>(a_in, nb), b = mat_of<T>(b_in, nb);
  Mat<T> cm;
  const Mat<T>* c = nullptr;
  if (c_in) {
    cm = bias_of<T>(*c_in, nb);
    c = &cm;
  }
  // When b is shared by the whole batch and a's rows (and the bias's) lie on
  // one stride, the batch is a single GEMM with batch * M rows.
  bool b_shared = true;
  int64_t nbatch = 1;
  for (size_t i = 0; i < nb; ++i) {
    b_shared &= batch[i] == 1 || b.batch[i] == 0;
    nbatch *= batch[i];
  }
  if (nb > 0 && b_shared && nbatch * m <= INT_MAX &&
      fold_stride(batch, a.batch, m, a.sr) >= 0 &&
      (!c || fold_stride(batch, c->batch, m, c->sr) >= 0)) {
    m *= nbatch;
    nbatch = 1;
    nb = 0;
    batch.clear();
  }
  std::vector<G> scratch[3];
  T* o = out.data<T>();
  std::vector<int64_t> idx(nb, 0);
  int64_t oa = 0, ob = 0, oc = 0;
  for (int64_t i = 0; i < nbatch; ++i) {
    gemm_one<T, G>(a, b, c, oa, ob, oc, o + i * m * n, m, n, k, alpha, beta,
                   scratch);
    for (int d = static_cast<int>(nb) - 1; d >= 0; --d) {
      oa += a.batch[d];
      ob += b.batch[d];
      if (c) oc += c->batch[d];
      if (++idx[d] < batch[d]) break;
      oa -= a.batch[d] * batch[d];
      ob -= b.batch[d] * batch[d];
      if (c) oc -= c->batch[d] * batch[d];
      idx[d] = 0;
    }
  }
}

void dispatch_matmul(const char* op, const array& a, const array& b,
                     const array* c, float alpha, float beta, array& out) {
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (is_half_v<T>) {
      run_matmul<T, float>(a, b, c, alpha, beta, out);
    } else if constexpr (std::is_floating_point_v<T> || is_complex_v<T>) {
      run_matmul<T, T>(a, b, c, alpha, beta, out);
    } else {
      throw std::invalid_argument(std::string("[") + op +
                                  "] unsupported dtype " +
                                  dtype_name(out.dtype()) + ".");
    }
  });
}

} // namespace

void Matmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_matmul("Matmul", inputs[0], inputs[1], nullptr, 1.0f, 0.0f, out);
}

void AddMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  dispatch_matmul("AddMM", inputs[1], inputs[2], &inputs[0], alpha_, beta_,
                  out);
}

} // namespace kiln
