// GatherMM on the CPU: the picks are grouped by the matrix of b they read,
// and each group is one BLAS GEMM with that matrix (read in place when its
// layout suits BLAS) over the rows of all its picks' a matrices, so a
// mixture-of-experts layer costs one GEMM per expert, not one per token.
// A group of one pick reads its a matrix in place and writes the output
// directly; larger groups gather their rows into a scratch block and
// scatter the product's rows back.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/indices.h"
#include "kiln/primitives/linalg.h"

namespace kiln {

namespace {

// The picks in groups by b's matrix: order[start[e]..start[e + 1]) are the
// picks of matrix e, in their original order.
struct Groups {
  std::vector<int64_t> order, start;
};

Groups group_by(const std::vector<int64_t>& rhs, int64_t nb) {
  Groups g;
  g.start.assign(static_cast<size_t>(nb) + 1, 0);
  for (int64_t r : rhs) ++g.start[r + 1];
  for (int64_t e = 0; e < nb; ++e) g.start[e + 1] += g.start[e];
  g.order.resize(rhs.size());
  std::vector<int64_t> next(g.start.begin(), g.start.end() - 1);
  for (size_t p = 0; p < rhs.size(); ++p) g.order[next[rhs[p]]++] = p;
  return g;
}

// The picks of idx among n matrices (GatherMM::pick).
std::vector<int64_t> read_indices(const array& idx, int64_t n) {
  auto v = detail::index_values(idx);
  for (int64_t& i : v) i = GatherMM::pick(static_cast<uint32_t>(i), n);
  return v;
}

template <typename T, typename G>
void run_gather_mm(const array& a, const array& b,
                   const std::vector<int64_t>& li,
                   const std::vector<int64_t>& ri, array& out) {
  int64_t m = a.shape(1), k = a.shape(2), n = b.shape(2);
  T* o = out.data<T>();
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  const Strides& as = a.strides();
  const Strides& bs = b.strides();
  if (k == 0) {
    std::fill(o, o + out.size(), T(0));
    return;
  }
  Groups groups = group_by(ri, b.shape(0));
  std::vector<G> a_rows, b_conv, c_rows;
  for (int64_t e = 0; e < b.shape(0); ++e) {
    int64_t first = groups.start[e], count = groups.start[e + 1] - first;
    if (count == 0) continue;
    auto B = detail::gemm_operand<G>(bp + e * bs[0], k, n, bs[1], bs[2],
                                     b_conv);
    const int64_t* picks = groups.order.data() + first;
    detail::GemmOperand<G> A;
    if (count == 1) {
      A = detail::gemm_operand<G>(ap + li[picks[0]] * as[0], m, k, as[1],
                                  as[2], a_rows);
    } else {
      a_rows.resize(static_cast<size_t>(count * m * k));
      for (int64_t p = 0; p < count; ++p) {
        const T* src = ap + li[picks[p]] * as[0];
        G* dst = a_rows.data() + p * m * k;
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t c = 0; c < k; ++c) {
            dst[r * k + c] = cast_to<G>(src[r * as[1] + c * as[2]]);
          }
        }
      }
      A = {a_rows.data(), false, static_cast<int>(k)};
    }
    int64_t rows = count * m;
    if (rows > INT_MAX) {
      throw std::invalid_argument(
          "[gather_mm] more than INT_MAX rows read one matrix of b.");
    }
    G* dst;
    bool direct = std::is_same_v<T, G> && count == 1;
    if (direct) {
      dst = reinterpret_cast<G*>(o + picks[0] * m * n);
    } else {
      c_rows.resize(static_cast<size_t>(rows * n));
      dst = c_rows.data();
    }
    detail::gemm(A.trans, B.trans, static_cast<int>(rows), static_cast<int>(n),
                 static_cast<int>(k), G(1), A.ptr, A.ld, B.ptr, B.ld, G(0), dst,
                 static_cast<int>(n));
    if (!direct) {
      for (int64_t p = 0; p < count; ++p) {
        const G* src = c_rows.data() + p * m * n;
        T* to = o + picks[p] * m * n;
        for (int64_t i = 0; i < m * n; ++i) to[i] = cast_to<T>(src[i]);
      }
    }
  }
}

} // namespace

void GatherMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  if (a.shape(1) > INT_MAX || a.shape(2) > INT_MAX || b.shape(2) > INT_MAX) {
    throw std::invalid_argument(
        "[gather_mm] matrix dimensions exceed INT_MAX.");
  }
  auto li = read_indices(inputs[2], a.shape(0));
  auto ri = read_indices(inputs[3], b.shape(0));
  detail::dispatch_real_gemm("gather_mm", out.dtype(), [&](auto t, auto g) {
    run_gather_mm<decltype(t), decltype(g)>(a, b, li, ri, out);
  });
}

} // namespace kiln
