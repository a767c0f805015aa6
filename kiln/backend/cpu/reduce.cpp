// Reductions on the CPU. The input's dimensions split into kept and reduced
// groups, each collapsed. Three loops cover every layout:
//  - the reduced run is contiguous: each output reduces it with several
//    independent accumulators (vectorizable);
//  - the kept run is contiguous: a row of outputs is updated per reduced
//    element (vectorizable across outputs);
//  - otherwise a strided walk.
// A single long contiguous reduction is split across cores.
#include <cmath>
#include <limits>
#include <memory>

#include "kiln/backend/common/reduce_layout.h"
#include "kiln/backend/cpu/elementwise.h"
#include "kiln/backend/cpu/extremes.h"
#include "kiln/primitives/reduction.h"

namespace kiln {

namespace {

using detail::ct;

template <typename A>
struct SumOp {
  using acc = A;
  // Float sums add block totals in double, so long reductions stay accurate.
  using wide = std::conditional_t<std::is_same_v<A, float>, double, A>;
  static A init() { return A(0); }
  A operator()(A a, A b) const {
    if constexpr (std::is_same_v<A, bool>) {
      return a || b;
    } else {
      return a + b;
    }
  }
};

template <typename A>
struct ProdOp {
  using acc = A;
  using wide = A;
  static A init() { return A(1); }
  A operator()(A a, A b) const {
    if constexpr (std::is_same_v<A, bool>) {
      return a && b;
    } else {
      return a * b;
    }
  }
};

template <typename A>
struct MaxOp {
  using acc = A;
  using wide = A;
  static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return -std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::lowest();
    }
  }
  A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(b)) return b;
    }
    return b > a ? b : a;
  }
};

template <typename A>
struct MinOp {
  using acc = A;
  using wide = A;
  static A init() {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::max();
    }
  }
  A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
  }
};

struct AndOp {
  using acc = bool;
  using wide = bool;
  static bool init() { return true; }
  bool operator()(bool a, bool b) const { return a && b; }
};

struct OrOp {
  using acc = bool;
  using wide = bool;
  static bool init() { return false; }
  bool operator()(bool a, bool b) const { return a || b; }
};

constexpr int64_t block = 4096;

// Reduce n elements at stride s; contiguous runs use 8 independent lanes.
template <typename In, typename Op>
typename Op::wide reduce_run(const In* p, int64_t n, int64_t s, Op op) {
  using A = typename Op::acc;
  using W = typename Op::wide;
  W total = W(Op::init());
  for (int64_t b = 0; b < n; b += block) {
    int64_t e = std::min(n, b + block);
    if constexpr (std::is_same_v<In, float> &&
                  (std::is_same_v<Op, MaxOp<float>> ||
                   std::is_same_v<Op, MinOp<float>>)) {
      if (s == 1) { // the SIMD clones of extremes.h
        size_t m = static_cast<size_t>(e - b);
        float r = std::is_same_v<Op, MaxOp<float>>
                      ? detail::max_run_f32(p + b, m)
                      : detail::min_run_f32(p + b, m);
        total = op(total, r);
        continue;
      }
    }
    A lanes[8];
    for (auto& l : lanes) l = Op::init();
    int64_t i = b;
    if (s == 1) {
      for (; i + 8 <= e; i += 8) {
        for (int l = 0; l < 8; ++l) {
          lanes[l] = op(lanes[l], cast_to<A>(static_cast<ct<In>>(p[i + l])));
        }
      }
    }
    for (; i < e; ++i) {
      lanes[0] = op(lanes[0], cast_to<A>(static_cast<ct<In>>(p[i * s])));
    }
    A r = lanes[0];
    for (int l = 1; l < 8; ++l) r = op(r, lanes[l]);
    if constexpr (std::is_same_v<W, A>) {
      total = op(total, r);
    } else {
      total += static_cast<W>(r);
    }
  }
  return total;
}

template <typename In, typename Out, typename Op>
void reduce(const array& in, array& out, const std::vector<int>& axes, Op op) {
  using A = typename Op::acc;
  using W = typename Op::wide;
  out.set_data(allocator::malloc(out.nbytes()));
  Out* dst = out.data<Out>();
  const In* src = in.data<In>();
  size_t n_out = out.size();
  if (n_out == 0) return;

  detail::ReduceLayout lay = detail::reduce_layout(in, axes);
  const Shape& kshape = lay.kept_shape;
  const Shape& rshape = lay.reduced_shape;
  const auto& kst = lay.kept_strides;
  const auto& rst = lay.reduced_strides;
  size_t n_red = in.size() / n_out;
  auto finish = [](W w) { return cast_to<Out>(static_cast<A>(w)); };

  if (n_red == 0) {
    for (size_t i = 0; i < n_out; ++i) dst[i] = cast_to<Out>(Op::init());
    return;
  }

  int64_t r_inner = rst[0].back(), k_inner = kst[0].back();
  bool runs_contiguous = r_inner == 1 || rshape.back() == 1;

  // One long contiguous reduction: split it across cores. (A run longer
  // than int32 stays split over dimensions after collapsing.)
  bool one_run = n_out == 1 && ((rshape.size() == 1 && runs_contiguous) ||
                                in.flags().row_contiguous);
  if (one_run) {
    int64_t n = static_cast<int64_t>(in.size());
    size_t chunks = std::max<size_t>(1, std::min<size_t>(
        detail::num_threads(), n / (4 * detail::elementwise_grain)));
    std::vector<W> partial(chunks, W(Op::init()));
    int64_t step = (n + chunks - 1) / chunks;
    detail::parallel_for(chunks, 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) {
        int64_t lo = c * step, hi = std::min<int64_t>(n, lo + step);
        if (lo < hi) partial[c] = reduce_run(src + lo, hi - lo, 1, op);
      }
    });
    W total = partial[0];
    for (size_t c = 1; c < chunks; ++c) {
      if constexpr (std::is_same_v<W, A>) {
        total = op(total, partial[c]);
      } else {
        total += partial[c];
      }
    }
    dst[0] = finish(total);
    return;
  }

  size_t k_inner_n = kshape.back();
  size_t k_rows = detail::num_rows(kshape);
  size_t r_rows = detail::num_rows(rshape);
  int64_t r_len = rshape.back();

  if (!runs_contiguous && k_inner == 1 && k_inner_n > 1) {
    // Column-style: update a row of outputs per reduced element. Outputs are
    // row-major in kept-dims order, so kept row i owns outputs
    // [i * k_inner_n, (i + 1) * k_inner_n).
    detail::parallel_for(k_rows, 1, [&](size_t b, size_t e) {
      // Not std::vector: vector<bool> has no addressable elements.
      std::unique_ptr<A[]> acc(new A[k_inner_n]);
      size_t row = b;
      detail::for_each_row(kshape, kst, b, e, [&](const auto& koff,
                                                   int64_t kn) {
        std::fill(acc.get(), acc.get() + k_inner_n, Op::init());
        detail::for_each_row(rshape, rst, 0, r_rows, [&](const auto& roff,
                                                         int64_t rn) {
          for (int64_t r = 0; r < rn; ++r) {
            const In* p = src + koff[0] + roff[0] + r * r_inner;
            for (int64_t j = 0; j < kn; ++j) {
              acc[j] = op(acc[j], cast_to<A>(static_cast<ct<In>>(p[j])));
            }
          }
        });
        Out* d = dst + row * k_inner_n;
        for (int64_t j = 0; j < kn; ++j) d[j] = cast_to<Out>(acc[j]);
        ++row;
      });
    });
    return;
  }

  // Per output element: walk the reduced dims (contiguous runs vectorize).
  size_t grain = std::max<size_t>(1, detail::elementwise_grain / n_red);
  detail::parallel_for(n_out, grain, [&](size_t b, size_t e) {
    // Unravel b over the kept shape to get the starting input offset.
    std::vector<int64_t> idx(kshape.size(), 0);
    int64_t koff = 0;
    size_t r = b;
    for (int d = static_cast<int>(kshape.size()) - 1; d >= 0; --d) {
      idx[d] = r % kshape[d];
      r /= kshape[d];
      koff += idx[d] * kst[0][d];
    }
    for (size_t o = b; o < e; ++o) {
      W total = W(Op::init());
      if (rshape.size() == 1) {
        total = reduce_run(src + koff, r_len, r_inner, op);
      } else {
        detail::for_each_row(rshape, rst, 0, r_rows, [&](const auto& roff,
                                                         int64_t rn) {
          W part = reduce_run(src + koff + roff[0], rn, r_inner, op);
          if constexpr (std::is_same_v<W, A>) {
            total = op(total, part);
          } else {
            total += part;
          }
        });
      }
      dst[o] = finish(total);
      for (int d = static_cast<int>(kshape.size()) - 1; d >= 0; --d) {
        koff += kst[0][d];
        if (++idx[d] < kshape[d]) break;
        koff -= kst[0][d] * kshape[d];
        idx[d] = 0;
      }
    }
  });
}

} // namespace

void Reduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  dispatch_type(in.dtype(), [&](auto tag) {
    using In = KILN_TYPE(tag);
    using C = ct<In>;
    switch (type_) {
      case And:
        return reduce<In, bool>(in, out, axes_, AndOp{});
      case Or:
        return reduce<In, bool>(in, out, axes_, OrOp{});
      case Max:
      case Min:
        if constexpr (is_complex_v<In>) {
          detail::unsupported_dtype(name(), in.dtype());
        } else if (type_ == Max) {
          return reduce<In, In>(in, out, axes_, MaxOp<C>{});
        } else {
          return reduce<In, In>(in, out, axes_, MinOp<C>{});
        }
      case Sum:
      case Prod: {
        // Sums of small integers widen (sum_dtype); others keep the dtype.
        dispatch_type(out.dtype(), [&](auto out_tag) {
          using Out = KILN_TYPE(out_tag);
          if constexpr (std::is_same_v<In, Out> ||
                        (std::is_integral_v<In> && std::is_integral_v<Out> &&
                         sizeof(Out) >= 4)) {
            using A = ct<Out>;
            if (type_ == Sum) {
              reduce<In, Out>(in, out, axes_, SumOp<A>{});
            } else {
              reduce<In, Out>(in, out, axes_, ProdOp<A>{});
            }
          } else {
            detail::unsupported_dtype(name(), in.dtype());
          }
        });
        return;
      }
    }
  });
}

void NumberOfElements::eval_cpu(const std::vector<array>& inputs, array& out) {
  double n = count(inputs[0].shape());
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_real_type(out.dtype(), "NumberOfElements", [&](auto tag) {
    using T = KILN_TYPE(tag);
    *out.data<T>() = static_cast<T>(n);
  });
}

} // namespace kiln
