// Quantize, Dequantize, DequantizeFp, QuantizedMatmul and
// QuantizedMatmulFp on the CPU.
//
// DequantizeFp: the microscaling modes' codes (e2m1 or e4m3) times their
// group's scale (e8m0, or e4m3 for nvfp4, times nvfp4's global factor),
// in float32 as the graph in ops/quantized_fp.cpp computes them, then
// cast: one pass over the packed words, where the graph made a dozen
// (shifts, masks, table lookups, products) over output-sized arrays.
// QuantizedMatmulFp: for up to 7 rows of x, each output row's groups are
// decoded once into values in L1 and dotted with every row of x.
//
// Quantize: one pass per group (groups fill whole words, so they run
// apart on every core), with the float32 operations of the graph in
// ops/quantized.cpp, so both give the same bits.
//
// QuantizedMatmul: per output row of the weight, group by
// group: scale * (x . codes) + bias * sum(x over the group), for every row
// of x; output rows (of every matrix of a batch together) are split over
// the cores, and the packed weight is read once per call (a decode step
// moves bits / 32 of what a float32 weight would). Codes of 1, 2, 4 or 8 bits
// are read byte by byte against x dealt into matching streams; 3, 5 and 6 bits
// are unpacked one code at a time. From gemm_min_rows rows of x on, the weight
// is dequantized once and multiplied by BLAS.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/simd_clones.h"
#include "kiln/backend/cpu/scratch.h"
#include "kiln/core/allocator.h"
#include "kiln/core/dispatch.h"
#include "kiln/core/thread_pool.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/quantized.h"

namespace kiln::fast {

namespace {

// The codes [start, start + n) of a little-endian bit stream of bits-bit
// codes, as floats.
void unpack(const uint32_t* words, int64_t start, int n, int bits,
            float* out) {
  const uint32_t mask = (1u << bits) - 1u;
  if (32 % bits == 0) {
    const int per = 32 / bits; // codes per word; groups start on a word
    const uint32_t* w = words + start / per;
    for (int j = 0; j < n / per; ++j) {
      uint32_t v = w[j];
      for (int t = 0; t < per; ++t) {
        out[j * per + t] = static_cast<float>((v >> (t * bits)) & mask);
      }
    }
    return;
  }
  for (int k = 0; k < n; ++k) {
    int64_t bit = (start + k) * bits;
    int64_t i = bit >> 5;
    int sh = static_cast<int>(bit & 31);
    uint32_t v = words[i] >> sh;
    if (sh + bits > 32) v |= words[i + 1] << (32 - sh);
    out[k] = static_cast<float>(v & mask);
  }
}

// Sum over the c codes of each of nb bytes of x_t[i] * code, x dealt into
// c streams of nb values (stream t meets bits [t * bits, (t + 1) * bits) of
// every byte). Built for AVX-512, AVX2 and the baseline: the loops widen
// 16 (or 8) bytes at a time.
KILN_SIMD_CLONES float
byte_codes_dot(const float* x, const uint8_t* bytes, int nb, int c, int bits,
               uint32_t mask) {
  // 16 running sums, lane by lane: a float sum over i in order would not
  // vectorize (its additions may not be reordered).
  constexpr int lanes = 16;
  float sums[lanes] = {};
  float dot = 0.0f;
  for (int t = 0; t < c; ++t) {
    const float* xs = x + t * nb;
    const int sh = t * bits;
    int i = 0;
    for (; i + lanes <= nb; i += lanes) {
      for (int l = 0; l < lanes; ++l) {
        sums[l] += xs[i + l] * static_cast<float>((bytes[i + l] >> sh) & mask);
      }
    }
    for (; i < nb; ++i) {
      dot += xs[i] * static_cast<float>((bytes[i] >> sh) & mask);
    }
  }
  for (int l = 0; l < lanes; ++l) dot += sums[l];
  return dot;
}

// From this many rows of x, dequantizing the weight once and calling BLAS
// beats unpacking it per group (4096 x 4096, 4 bits, 32 rows: 119 ms
// unpacking per group on the 2-core build machine).
constexpr int64_t gemm_min_rows = 8;

// op (M x N) = xp (M x K) @ dequantize(wp (N x W words), sp, bp).T for
// many rows of x: the weight dequantized once to float32 (scale * code +
// bias, unrounded), then one BLAS GEMM.
template <typename T>
void dequantized_gemm(const T* xp, int64_t M, int64_t K, const uint32_t* wp,
                      int64_t N, int64_t W, const T* sp, const T* bp, T* op,
                      int gs, int bits) {
  const int64_t G = K / gs;
  detail::scratch_vector<float> xf(M * K), wf(N * K);
  for (int64_t i = 0; i < M * K; ++i) xf[i] = static_cast<float>(xp[i]);
  detail::parallel_for(N, 16, [&](size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; ++o) {
      float* r = wf.data() + o * K;
      unpack(wp + o * W, 0, static_cast<int>(K), bits, r);
      for (int64_t g = 0; g < G; ++g) {
        float sg = static_cast<float>(sp[o * G + g]);
        float bg = static_cast<float>(bp[o * G + g]);
        float* rg = r + g * gs;
        for (int k = 0; k < gs; ++k) rg[k] = rg[k] * sg + bg;
      }
    }
  });
  detail::scratch_vector<float> yf;
  float* y = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    y = op;
  } else {
    yf.resize(M * N);
    y = yf.data();
  }
  detail::gemm(false, true, int(M), int(N), int(K), 1.0f, xf.data(), int(K),
               wf.data(), int(K), 0.0f, y, int(N));
  if constexpr (!std::is_same_v<T, float>) {
    for (int64_t i = 0; i < M * N; ++i) op[i] = static_cast<T>(yf[i]);
  }
}

// A few rows of x read against the packed codes: x in float, its sum over
// each group (what the biases multiply), and for codes of 1, 2, 4 or 8 bits
// x dealt, per group, into the c = 8 / bits streams that meet each
// position of a byte (so a group's dot is c plain loops over its bytes).
template <typename T>
void prepare_rows(const T* xp, int64_t M, int64_t K, int gs, int bits,
                  float* xf, float* xsum, float* xd) {
  const int64_t G = K / gs;
  for (int64_t i = 0; i < M * K; ++i) xf[i] = static_cast<float>(xp[i]);
  std::fill(xsum, xsum + M * G, 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) xsum[m * G + k / gs] += xf[m * K + k];
  }
  if (8 % bits != 0) return;
  const int c = 8 / bits, nb = gs / c; // codes per byte, bytes per group
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t g = 0; g < G; ++g) {
      const float* xs = xf + m * K + g * gs;
      float* xt = xd + m * K + g * gs;
      for (int t = 0; t < c; ++t) {
        for (int i = 0; i < nb; ++i) xt[t * nb + i] = xs[i * c + t];
      }
    }
  }
}

// Output rows [o0, o1) of one matrix's op (M x N), from its x as
// prepare_rows left it (xf, xsum, and xd for whole codes per byte); acc
// holds M floats and codes group_size.
template <typename T>
void matvec_rows(const float* xf, const float* xsum, const float* xd,
                 int64_t M, int64_t K, const uint32_t* wp, int64_t N,
                 int64_t W, const T* sp, const T* bp, T* op, int gs, int bits,
                 int64_t o0, int64_t o1, float* acc, float* codes) {
  const int64_t G = K / gs;
  const uint32_t mask = (1u << bits) - 1u;
  for (int64_t o = o0; o < o1; ++o) {
    std::fill(acc, acc + M, 0.0f);
    for (int64_t g = 0; g < G; ++g) {
      float s = static_cast<float>(sp[o * G + g]);
      float b = static_cast<float>(bp[o * G + g]);
      if (8 % bits == 0) {
        const int c = 8 / bits, nb = gs / c;
        const uint8_t* bytes =
            reinterpret_cast<const uint8_t*>(wp + o * W) + g * nb;
        for (int64_t m = 0; m < M; ++m) {
          const float* xt = xd + m * K + g * gs;
          acc[m] += s * byte_codes_dot(xt, bytes, nb, c, bits, mask) +
                    b * xsum[m * G + g];
        }
      } else {
        unpack(wp + o * W, g * gs, gs, bits, codes);
        for (int64_t m = 0; m < M; ++m) {
          const float* xr = xf + m * K + g * gs;
          float dot = 0.0f;
          for (int k = 0; k < gs; ++k) dot += xr[k] * codes[k];
          acc[m] += s * dot + b * xsum[m * G + g];
        }
      }
    }
    for (int64_t m = 0; m < M; ++m) op[m * N + o] = static_cast<T>(acc[m]);
  }
}

// One product per weight matrix: w (N, W), or a batch (B, N, W) with x
// (B, M, K), or x (P, M, K) with indices (P,) picking each one's matrix
// of w (gather_qmm's picked experts). Few rows of x: every matrix's x is
// prepared first, then one parallel loop runs over all matrices' output
// rows (a loop per matrix cost a pool hand-off each: 16 tiny matrices took
// 382 us); many rows: a GEMM per matrix.
template <typename T>
void quantized_matmul(const std::vector<array>& in, array& out, int gs,
                      int bits) {
  const array &x = in[0], &w = in[1], &sc = in[2], &bi = in[3];
  const bool picked = in.size() == 5;
  const int64_t B = picked ? x.shape(0) : (w.ndim() == 3 ? w.shape(0) : 1);
  const int64_t K = x.shape(-1), N = w.shape(-2), W = w.shape(-1);
  const int64_t M = K && B ? static_cast<int64_t>(x.size()) / K / B : 0;
  const int64_t G = K / gs;
  auto matrix = [&](int64_t b) {
    return picked ? GatherMM::pick(in[4].data<uint32_t>()[b], w.shape(0))
                  : b;
  };
  const T* xp = x.data<T>();
  const uint32_t* wp = w.data<uint32_t>();
  const T* sp = sc.data<T>();
  const T* bp = bi.data<T>();
  T* op = out.data<T>();
  if (M >= gemm_min_rows && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX) {
    for (int64_t b = 0; b < B; ++b) {
      int64_t m = matrix(b);
      dequantized_gemm<T>(xp + b * M * K, M, K, wp + m * N * W, N, W,
                          sp + m * N * G, bp + m * N * G, op + b * M * N, gs,
                          bits);
    }
    return;
  }
  const bool dealt = 8 % bits == 0;
  detail::scratch_vector<float> xf(B * M * K), xsum(B * M * G),
      xd(dealt ? B * M * K : 0);
  for (int64_t b = 0; b < B; ++b) {
    prepare_rows(xp + b * M * K, M, K, gs, bits, xf.data() + b * M * K,
                 xsum.data() + b * M * G,
                 dealt ? xd.data() + b * M * K : nullptr);
  }
  // At least 64K codes times rows of x per chunk: smaller products run
  // on the calling thread, without a pool hand-off.
  const int64_t grain = std::max<int64_t>(16, (int64_t(1) << 16) /
                                                  std::max<int64_t>(1, M * K));
  detail::parallel_for(B * N, grain, [&](size_t i0, size_t i1) {
    std::vector<float> acc(M), codes(gs);
    for (int64_t i = i0; i < static_cast<int64_t>(i1);) {
      // The run of rows of one matrix within [i0, i1).
      const int64_t b = i / N, o0 = i % N;
      const int64_t o1 = std::min<int64_t>(N, o0 + int64_t(i1) - i);
      const int64_t m = matrix(b);
      matvec_rows<T>(xf.data() + b * M * K, xsum.data() + b * M * G,
                     dealt ? xd.data() + b * M * K : nullptr, M, K,
                     wp + m * N * W, N, W, sp + m * N * G, bp + m * N * G,
                     op + b * M * N, gs, bits, o0, o1, acc.data(),
                     codes.data());
      i += o1 - o0;
    }
  });
}

} // namespace

namespace {

template <typename T>
void quantize_groups(const array& w, std::vector<array>& outs, int gs,
                     int bits) {
  const T* wp = w.data<T>();
  uint32_t* qp = outs[0].data<uint32_t>();
  T* sp = outs[1].data<T>();
  T* bp = outs[2].data<T>();
  const int64_t groups = static_cast<int64_t>(w.size()) / gs;
  const int words = gs * bits / 32;
  const float levels = static_cast<float>((1 << bits) - 1);
  detail::parallel_for(groups, 64, [&](size_t g0, size_t g1) {
    for (size_t g = g0; g < g1; ++g) {
      const T* x = wp + g * gs;
      float hi = static_cast<float>(x[0]), lo = hi;
      for (int j = 1; j < gs; ++j) {
        float v = static_cast<float>(x[j]);
        hi = std::max(hi, v);
        lo = std::min(lo, v);
      }
      float scale = std::max((hi - lo) / levels, 1e-7f), bias = lo;
      if (bits > 1) {
        bool low_end = std::fabs(lo) > std::fabs(hi);
        if (!low_end) scale = -scale;
        float edge = low_end ? lo : hi;
        float q0 = std::nearbyint(edge / scale);
        if (q0 != 0.0f) scale = edge / q0;
        bias = q0 == 0.0f ? 0.0f : edge;
      }
      sp[g] = static_cast<T>(scale);
      bp[g] = static_cast<T>(bias);
      uint32_t* out = qp + g * words;
      std::fill(out, out + words, 0u);
      for (int j = 0; j < gs; ++j) {
        float q = std::nearbyint((static_cast<float>(x[j]) - bias) / scale);
        uint32_t code =
            static_cast<uint32_t>(std::min(std::max(q, 0.0f), levels));
        int bit = j * bits, i = bit >> 5, sh = bit & 31;
        out[i] |= code << sh;
        if (sh + bits > 32) out[i + 1] |= code >> (32 - sh);
      }
    }
  });
}

} // namespace

namespace {

// f(TypeTag<T>) for the float types the kernels take (float32, float16,
// bfloat16); any other dtype raises naming the primitive.
template <typename F>
void with_float_type(const Primitive& p, Dtype dt, F&& f) {
  dispatch_type(dt, [&](auto tag) {
    if constexpr (std::is_same_v<compute_t<KILN_TYPE(tag)>, float>) {
      f(tag);
    } else {
      throw std::invalid_argument(std::string("[") + p.name() +
                                  "] unsupported dtype " + dtype_name(dt) +
                                  ".");
    }
  });
}

} // namespace

namespace {

// out = codes * scale + bias group by group, in S (the scales' type) with
// each step rounded to it as the graph's ops round, then cast to D.
template <typename S, typename D>
void dequantize_groups(const std::vector<array>& in, array& out, int gs,
                       int bits) {
  const uint32_t* wp = in[0].data<uint32_t>();
  const S* sp = in[1].data<S>();
  const S* bp = in[2].data<S>();
  D* op = out.data<D>();
  const int64_t groups = static_cast<int64_t>(out.size()) / gs;
  const int64_t words = gs * bits / 32;
  detail::parallel_for(groups, 64, [&](size_t g0, size_t g1) {
    std::vector<float> codes(gs);
    for (size_t g = g0; g < g1; ++g) {
      unpack(wp + g * words, 0, gs, bits, codes.data());
      const S scale = sp[g], bias = bp[g];
      D* o = op + g * gs;
      for (int j = 0; j < gs; ++j) {
        S c = static_cast<S>(codes[j]);
        S p = static_cast<S>(static_cast<float>(c) * static_cast<float>(scale));
        S r = static_cast<S>(static_cast<float>(p) + static_cast<float>(bias));
        o[j] = static_cast<D>(static_cast<float>(r));
      }
    }
  });
}

} // namespace

namespace {

// The value of each fp8 e4m3 code (1 sign, 4 exponent bits of bias 7, 3
// mantissa bits; 0x7f and 0xff are NaN), exact in float32.
struct E4m3Table {
  float v[256];
  E4m3Table() {
    for (int c = 0; c < 256; ++c) {
      int e = (c >> 3) & 15, m = c & 7;
      float mag = e == 0 ? std::ldexp(float(m), -9)
                         : std::ldexp(1.0f + float(m) / 8, e - 7);
      if ((c & 0x7f) == 0x7f) mag = std::numeric_limits<float>::quiet_NaN();
      v[c] = (c & 0x80) ? -mag : mag;
    }
  }
};

constexpr float e2m1_values[16] = {0,    0.5f,  1,  1.5f, 2,  3,  4,  6,
                                   -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// What both microscaling kernels read: a group's scale (e8m0, or e4m3 for
// nvfp4's groups of 16) and its codes' values, decoded with the code width
// a constant so each word's shifts unroll.
struct FpGroups {
  const E4m3Table& e4m3;
  bool nv;
  int gs, bits;

  float scale(uint8_t code) const {
    return nv ? e4m3.v[code] : std::ldexp(1.0f, int(code) - 127);
  }
  // f(decode) with decode(w, vals) writing group w's gs code values.
  template <typename F>
  void with_decoder(F&& f) const {
    auto run = [&](auto width, const float* values) {
      constexpr int b = decltype(width)::value, per = 32 / b;
      constexpr uint32_t mask = (1u << b) - 1;
      const int words = gs / per;
      f([=](const uint32_t* w, float* vals) {
        for (int k = 0; k < words; ++k) {
          const uint32_t word = w[k];
          for (int j = 0; j < per; ++j) {
            vals[k * per + j] = values[(word >> (j * b)) & mask];
          }
        }
      });
    };
    if (bits == 4) {
      run(std::integral_constant<int, 4>{}, e2m1_values);
    } else {
      run(std::integral_constant<int, 8>{}, e4m3.v);
    }
  }
};

const E4m3Table& e4m3_table() {
  static const E4m3Table t;
  return t;
}

template <typename D>
void dequantize_fp_groups(const std::vector<array>& in, array& out, int gs,
                          int bits) {
  const FpGroups fp{e4m3_table(), gs == 16, gs, bits};
  const uint32_t* wp = in[0].data<uint32_t>();
  const uint8_t* sp = in[1].data<uint8_t>();
  const bool has_factor = in.size() > 2;
  const float factor = has_factor ? in[2].data<float>()[0] : 1.0f;
  D* op = out.data<D>();
  const int64_t groups = static_cast<int64_t>(out.size()) / gs;
  const int64_t words = gs * bits / 32;
  fp.with_decoder([&](auto decode) {
    detail::parallel_for(groups, 64, [&](size_t g0, size_t g1) {
      float vals[32];
      for (size_t g = g0; g < g1; ++g) {
        float scale = fp.scale(sp[g]);
        if (has_factor) scale = scale * factor;
        decode(wp + g * words, vals);
        D* o = op + g * gs;
        for (int j = 0; j < gs; ++j) o[j] = static_cast<D>(vals[j] * scale);
      }
    });
  });
}

// x (M x K rows, M below gemm_min_rows) @ dequantize(w).T in the
// microscaling modes, reading the codes: each output row's groups are
// decoded once into a buffer of values (e2m1 or e4m3) and dotted with
// every row of x, times the group's scale; no weight-sized temporary.
// With indices (in[3]), x is (P, M, K) and pick p's rows go against
// matrix index[p] of w (E, N, W).
template <typename T>
void quantized_matvec_fp(const std::vector<array>& in, array& out, int gs,
                         int bits) {
  const FpGroups fp{e4m3_table(), gs == 16, gs, bits};
  const bool picked = in.size() == 4;
  const int64_t K = in[0].shape(-1), P = picked ? in[0].shape(0) : 1;
  const int64_t M = int64_t(in[0].size()) / K / P;
  // The ops make the node for fewer rows on the CPU; the GPU hands over
  // at most this many.
  if (M > fast::QuantizedMatmul::max_picked_rows) {
    throw std::logic_error(
        "[quantized_matmul] QuantizedMatmulFp takes at most " +
        std::to_string(fast::QuantizedMatmul::max_picked_rows) +
        " rows of x per matrix; got " + std::to_string(M) + ".");
  }
  const int64_t N = in[1].shape(-2), W = in[1].shape(-1), G = K / gs;
  const int64_t words = gs * bits / 32;
  const T* xp = in[0].data<T>();
  T* op = out.data<T>();
  detail::scratch_vector<float> xf(M * K);
  constexpr int lanes = 8;
  fp.with_decoder([&](auto decode) {
    for (int64_t p = 0; p < P; ++p) {
      const int64_t matrix =
          picked ? GatherMM::pick(in[3].data<uint32_t>()[p], in[1].shape(0))
                 : 0;
      const uint32_t* wp = in[1].data<uint32_t>() + matrix * N * W;
      const uint8_t* sp = in[2].data<uint8_t>() + matrix * N * G;
      const T* xr0 = xp + p * M * K;
      for (int64_t i = 0; i < M * K; ++i) xf[i] = static_cast<float>(xr0[i]);
      T* o_p = op + p * M * N;
      detail::parallel_for(N, 16, [&](size_t o0, size_t o1) {
        float vals[32], acc[fast::QuantizedMatmul::max_picked_rows];
        for (size_t o = o0; o < o1; ++o) {
          std::fill(acc, acc + M, 0.0f);
          for (int64_t g = 0; g < G; ++g) {
            decode(wp + o * W + g * words, vals);
            const float scale = fp.scale(sp[o * G + g]);
            for (int64_t m = 0; m < M; ++m) {
              // Lane-wise sums (in order they would not vectorize).
              const float* xr = xf.data() + m * K + g * gs;
              float sums[lanes] = {};
              for (int k = 0; k < gs; k += lanes) {
                for (int l = 0; l < lanes; ++l) {
                  sums[l] += xr[k + l] * vals[k + l];
                }
              }
              float dot = 0.0f;
              for (int l = 0; l < lanes; ++l) dot += sums[l];
              acc[m] += scale * dot;
            }
          }
          for (int64_t m = 0; m < M; ++m) {
            o_p[m * N + o] = static_cast<T>(acc[m]);
          }
        }
      });
    }
  });
}

} // namespace

void QuantizedMatmulFp::eval_cpu(const std::vector<array>& inputs,
                                 std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  with_float_type(*this, out.dtype(), [&](auto tag) {
    quantized_matvec_fp<KILN_TYPE(tag)>(inputs, out, group_size_, bits_);
  });
}

void Dequantize::eval_cpu(const std::vector<array>& inputs,
                          std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  with_float_type(*this, inputs[1].dtype(), [&](auto scales) {
    with_float_type(*this, out.dtype(), [&](auto result) {
      dequantize_groups<KILN_TYPE(scales), KILN_TYPE(result)>(
          inputs, out, group_size_, bits_);
    });
  });
}

void DequantizeFp::eval_cpu(const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  with_float_type(*this, out.dtype(), [&](auto tag) {
    dequantize_fp_groups<KILN_TYPE(tag)>(inputs, out, group_size_, bits_);
  });
}

void Quantize::eval_cpu(const std::vector<array>& inputs,
                        std::vector<array>& outputs) {
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  if (inputs[0].size() == 0) return;
  with_float_type(*this, inputs[0].dtype(), [&](auto tag) {
    quantize_groups<KILN_TYPE(tag)>(inputs[0], outputs, group_size_, bits_);
  });
}

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs,
                               std::vector<array>& outputs) {
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  if (inputs[0].shape(-1) == 0) {
    // An empty inner dimension: every sum is over nothing.
    std::memset(out.data<void>(), 0, out.nbytes());
    return;
  }
  with_float_type(*this, out.dtype(), [&](auto tag) {
    quantized_matmul<KILN_TYPE(tag)>(inputs, out, group_size_, bits_);
  });
}

} // namespace kiln::fast
