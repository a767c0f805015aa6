// Scaled dot-product attention, one query row at a time: scores against
// every key, masked, softmax in float (double for float64), weighted sum of
// the values. Inputs are read through their strides.
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/fast.h"

namespace kiln::fast {

namespace {

template <typename T>
void attention(const std::vector<array>& in, array& out, float scale,
               bool causal, bool has_mask, bool has_sinks) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const array &q = in[0], &k = in[1], &v = in[2];
  const array* mask = has_mask ? &in[3] : nullptr;
  const array* sinks = has_sinks ? &in.back() : nullptr;
  int64_t B = q.shape(0), Nq = q.shape(1), Lq = q.shape(2), D = q.shape(3);
  int64_t Nkv = k.shape(1), Lk = k.shape(2), Dv = v.shape(3);
  int64_t rep = Nq / Nkv, shift = Lk - Lq;
  const auto &qs = q.strides(), &ks = k.strides(), &vs = v.strides();
  const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
  T* po = out.data<T>();
  const A lowest = std::numeric_limits<A>::lowest();
  size_t rows = B * Nq * Lq;
  size_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(Lk * D, 1));
  kiln::detail::parallel_for(rows, grain, [&](size_t lo, size_t hi) {
    std::vector<A> score(Lk), acc(Dv);
    for (size_t r = lo; r < hi; ++r) {
      int64_t i = r % Lq, h = (r / Lq) % Nq, b = r / (Lq * Nq), kh = h / rep;
      const T* qr = pq + b * qs[0] + h * qs[1] + i * qs[2];
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < Lk; ++j) {
        const T* kr = pk + b * ks[0] + kh * ks[1] + j * ks[2];
        A dot = 0;
        for (int64_t d = 0; d < D; ++d) {
          dot += static_cast<A>(qr[d * qs[3]]) * static_cast<A>(kr[d * ks[3]]);
        }
        A sc = dot * static_cast<A>(scale);
        bool hidden = causal && j > i + shift;
        if (mask) {
          const auto& ms = mask->strides();
          int64_t off = b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3];
          if (mask->dtype() == bool_) {
            hidden = hidden || !mask->data<bool>()[off];
          } else {
            sc += static_cast<A>(mask->data<T>()[off]);
          }
        }
        score[j] = hidden ? lowest : sc;
        m = score[j] > m || std::isnan(score[j]) ? score[j] : m;
      }
      A sink = 0;
      if (sinks) {
        sink = static_cast<A>(sinks->data<T>()[h * sinks->strides()[0]]);
        m = sink > m ? sink : m;
      }
      A den = sinks ? std::exp(sink - m) : A(0);
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t j = 0; j < Lk; ++j) {
        A e = std::exp(score[j] - m);
        den += e;
        const T* vr = pv + b * vs[0] + kh * vs[1] + j * vs[2];
        for (int64_t d = 0; d < Dv; ++d)
          acc[d] += e * static_cast<A>(vr[d * vs[3]]);
      }
      T* orow = po + r * Dv;
      for (int64_t d = 0; d < Dv; ++d) orow[d] = T(acc[d] / den);
    }
  });
}

} // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  bool has_mask = inputs.size() > 3u + (has_sinks_ ? 1u : 0u);
  dispatch_type(out.dtype(), [&](auto tag) {
    using T = KILN_TYPE(tag);
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      attention<T>(inputs, out, scale_, do_causal_, has_mask, has_sinks_);
    } else {
      throw std::invalid_argument(std::string("[") + name() +
                                  "] unsupported dtype " +
                                  dtype_name(out.dtype()) + ".");
    }
  });
}

} // namespace kiln::fast

namespace kiln::fast {

// The gradients from the fallback graph's vjp: the GPU's fused backward has
// no CPU twin (the CPU differentiates the graph directly; this primitive is
// made on GPU streams).
void ScaledDotProductAttentionVjp::eval_cpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  eval_fallback(inputs, outputs);
}

} // namespace kiln::fast
