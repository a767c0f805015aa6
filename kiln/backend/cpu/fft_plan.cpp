// Mixed-radix Stockham FFT (radix 4 and 2 for powers of two, unrolled odd
// butterflies for 3, 5, 7, 11, 13 and a generic one for other primes up to
// kMaxRadix), with Bluestein's chirp-z algorithm for lengths that have a
// larger prime factor.
//
// The passes run over GCC's vector types, four complex values (eight
// floats) at a time, and target_clones builds them for AVX-512, AVX2 and
// the baseline (where a vector is two SSE registers): scalar loops of the
// same shape stayed scalar at -O2 and ran about 3x slower.
#include "kiln/backend/cpu/fft_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <utility>

// The 32-byte vectors only ever live inside the clones (everything taking
// or returning one is forced inline), so the psABI note does not apply.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
// Clang rejects the cloned callers of the vector helpers (it checks the
// psABI before inlining), so it builds the baseline only.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KILN_FFT_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_FFT_CLONES
#endif
// Everything a clone calls must be inlined into it to get its instruction set.
#define KILN_FFT_INLINE inline __attribute__((always_inline))
// The loops over a butterfly's radix must unroll so that its vectors stay in
// registers; -O2 alone left them as arrays on the stack (about 2x slower).
#define KILN_FFT_UNROLL _Pragma("GCC unroll 16")

namespace kiln::cpu {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

/** Largest prime handled by a butterfly pass; a length with a larger prime
 *  factor goes through Bluestein, whose three padded power-of-two transforms
 *  cost more than a generic butterfly's O(radix) work per element below it. */
constexpr int kMaxRadix = 61;

// Complex arithmetic written out on floats: std::complex<float>'s operator*
// calls a NaN-recovering library routine, which blocks vectorization.
struct C {
  float re, im;
};
KILN_FFT_INLINE C operator+(C a, C b) { return {a.re + b.re, a.im + b.im}; }
KILN_FFT_INLINE C operator-(C a, C b) { return {a.re - b.re, a.im - b.im}; }
KILN_FFT_INLINE C operator*(C a, C b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
KILN_FFT_INLINE C operator*(C a, float f) { return {a.re * f, a.im * f}; }
/** a * (i * f). */
KILN_FFT_INLINE C mul_i(C a, float f) { return {-a.im * f, a.re * f}; }
KILN_FFT_INLINE C conj(C a) { return {a.re, -a.im}; }

// Lines are read and written as float pairs, so no C object ever aliases the
// caller's std::complex<float> storage.
KILN_FFT_INLINE C ld(const float* p, int64_t i) {
  return {p[2 * i], p[2 * i + 1]};
}
KILN_FFT_INLINE void st(float* p, int64_t i, C v) {
  p[2 * i] = v.re;
  p[2 * i + 1] = v.im;
}

// Four complex values, interleaved (re, im, re, im, ...).
constexpr int kW = 4;
typedef float V __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(8 * sizeof(float))));
#if defined(__clang__)
#define KILN_FFT_SHUFFLE(a, ...) __builtin_shufflevector(a, a, __VA_ARGS__)
#else
#define KILN_FFT_SHUFFLE(a, ...) __builtin_shuffle(a, VI{__VA_ARGS__})
#endif

KILN_FFT_INLINE V vld(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
KILN_FFT_INLINE void vst(float* p, const V& v) { std::memcpy(p, &v, sizeof v); }
KILN_FFT_INLINE V swap_ri(const V& a) {
  return KILN_FFT_SHUFFLE(a, 1, 0, 3, 2, 5, 4, 7, 6);
}
KILN_FFT_INLINE V mul_i(const V& a, float f) {
  return swap_ri(a) * V{-f, f, -f, f, -f, f, -f, f};
}
/** a * w, for a twiddle w broadcast as wr = (re, re, ...) and
 *  wi = (-im, im, -im, im, ...). */
KILN_FFT_INLINE V mul_tw(const V& a, const V& wr, const V& wi) {
  return a * wr + swap_ri(a) * wi;
}
/** Lane-wise complex product. */
KILN_FFT_INLINE V cmul(const V& a, const V& b) {
  return a * KILN_FFT_SHUFFLE(b, 0, 0, 2, 2, 4, 4, 6, 6) +
         swap_ri(a) * KILN_FFT_SHUFFLE(b, 1, 1, 3, 3, 5, 5, 7, 7) *
             V{-1, 1, -1, 1, -1, 1, -1, 1};
}

/** exp(sign*2*pi*i * j/n) for 0 <= j < n, from two tables of about sqrt(n)
 *  roots whose angles are exact fractions of a turn evaluated in double: the
 *  product of a coarse and a fine root is off by ~1e-16, far below float
 *  rounding, and costs a multiply instead of a sin/cos call per twiddle. */
class Roots {
 public:
  Roots(int64_t n, int sign) : n_(n) {
    while (int64_t(1) << (2 * shift_) < n) ++shift_;  // 4^shift >= n
    const int64_t step = int64_t(1) << shift_;
    for (int64_t j = 0; j < step; ++j) fine_.push_back(exact(j, sign));
    for (int64_t j = 0; j < n; j += step) coarse_.push_back(exact(j, sign));
  }
  C operator()(int64_t j) const {
    const auto& a = coarse_[j >> shift_];
    const auto& b = fine_[j & ((int64_t(1) << shift_) - 1)];
    return {float(a.first * b.first - a.second * b.second),
            float(a.first * b.second + a.second * b.first)};
  }

 private:
  std::pair<double, double> exact(int64_t j, int sign) const {
    const double a = kTwoPi * double(j) / double(n_);
    return {std::cos(a), sign * std::sin(a)};
  }
  int64_t n_;
  int shift_ = 0;
  std::vector<std::pair<double, double>> fine_, coarse_;
};

/** One radix-r pass over n = s * r * m points: s interleaved sequences (the
 *  sub-transforms of earlier passes) of length r * m each. */
struct Stage {
  int r;
  int64_t s, m;
  // Pairs (re, im) at (k-1)*m + p: exp(sign*2*pi*i * p*k / (r*m)).
  std::vector<float> tw;
  // Odd r, at (k-1)*h + j-1: (cos, sign*sin)(2*pi*j*k/r), h = (r-1)/2.
  std::vector<C> cs;
};

/** Radices for n in pass order, or none when n has a prime factor above
 *  kMaxRadix. Passes whose s (the product of the radices before them) is
 *  not a multiple of four run partly on scalars, so fours go first (a
 *  radix-4 pass also does the work of two radix-2 passes in one sweep);
 *  without a four, the largest radix goes first to make s large soonest. */
std::vector<int> factorize(int64_t n) {
  std::vector<int> f;
  while (n % 4 == 0) f.push_back(4), n /= 4;
  const bool fours = !f.empty(), two = n % 2 == 0;
  if (two) n /= 2;
  if (two && fours) f.push_back(2);
  std::vector<int> odd;
  for (int64_t p = 3; p * p <= n; p += 2)
    while (n % p == 0) {
      if (p > kMaxRadix) return {};
      odd.push_back(int(p)), n /= p;
    }
  if (n > kMaxRadix) return {};
  if (n > 1) odd.push_back(int(n));
  if (!fours) std::reverse(odd.begin(), odd.end());
  f.insert(f.end(), odd.begin(), odd.end());
  if (two && !fours) f.push_back(2);
  return f;
}

// Butterflies transform v[0..r) in place, on C or on V alike.
struct Bfly2 {
  template <class T>
  KILN_FFT_INLINE void operator()(T* v) const {
    const T a = v[0], b = v[1];
    v[0] = a + b;
    v[1] = a - b;
  }
};

struct Bfly4 {
  float sign;
  template <class T>
  KILN_FFT_INLINE void operator()(T* v) const {
    const T t0 = v[0] + v[2], t1 = v[0] - v[2], t2 = v[1] + v[3];
    const T t3 = mul_i(v[1] - v[3], sign);  // times exp(sign*2*pi*i/4)
    v[0] = t0 + t2;
    v[1] = t1 + t3;
    v[2] = t0 - t2;
    v[3] = t1 - t3;
  }
};

/** Odd radix kR (or the runtime r when kR is 0): inputs j and r-j are
 *  paired so each output pair k, r-k shares one set of products, halving the
 *  multiplies of a plain r-point DFT. */
template <int kR>
struct BflyOdd {
  int r;
  const C* cs;
  template <class T>
  KILN_FFT_INLINE void operator()(T* v) const {
    constexpr int kH = (kR ? kR : kMaxRadix) / 2;
    const int n = kR ? kR : r, h = (n - 1) / 2;
    T sp[kH], sm[kH];
    T sum = v[0];
    KILN_FFT_UNROLL
    for (int j = 0; j < h; ++j) {
      sp[j] = v[j + 1] + v[n - 1 - j];
      sm[j] = v[j + 1] - v[n - 1 - j];
      sum = sum + sp[j];
    }
    KILN_FFT_UNROLL
    for (int k = 1; k <= h; ++k) {
      const C* w = cs + (k - 1) * h;
      T a = v[0] + sp[0] * w[0].re, b = sm[0] * w[0].im;
      KILN_FFT_UNROLL
      for (int j = 1; j < h; ++j) {
        a = a + sp[j] * w[j].re;
        b = b + sm[j] * w[j].im;
      }
      const T ib = mul_i(b, 1.f);
      v[k] = a + ib;
      v[n - k] = a - ib;
    }
    v[0] = sum;
  }
};

/** The radix of a pass: kR, or the stage's own (an odd prime) when 0. */
template <int kR>
KILN_FFT_INLINE int radix(const Stage& g) {
  if (kR) return kR;
  if (g.r < 3) __builtin_unreachable();  // spares false uninitialized warnings
  return g.r;
}

/** The butterflies of one p for q in [0, s): inputs x[q + s*(p + m*j)],
 *  output k twiddled by w^(p*k) (unless kTwiddle is false: p == 0) and
 *  stored at y[q + s*(r*p + k)], which keeps natural order without a
 *  bit-reversal. Four q at a time, contiguous. */
template <int kR, bool kTwiddle, class Bfly>
KILN_FFT_INLINE void column(const Stage& g, int64_t p,
                            const float* __restrict x, float* __restrict y,
                            Bfly bfly) {
  constexpr int kN = kR ? kR : kMaxRadix;
  const int r = radix<kR>(g);
  const int64_t s = g.s, m = g.m, xs = 2 * s * m;
  const float* xp = x + 2 * s * p;
  float* yp = y + 2 * s * r * p;
  C w[kN];
  V wr[kN], wi[kN];
  if constexpr (kTwiddle) {
    KILN_FFT_UNROLL
    for (int k = 1; k < r; ++k) {
      w[k] = ld(g.tw.data(), (k - 1) * m + p);
      wr[k] = V{} + w[k].re;
      wi[k] = V{-1, 1, -1, 1, -1, 1, -1, 1} * w[k].im;
    }
  }
  int64_t q = 0;
  for (; q + kW <= s; q += kW) {
    V v[kN];
    KILN_FFT_UNROLL
    for (int j = 0; j < r; ++j) v[j] = vld(xp + 2 * q + j * xs);
    bfly(v);
    vst(yp + 2 * q, v[0]);
    KILN_FFT_UNROLL
    for (int k = 1; k < r; ++k) {
      if constexpr (kTwiddle) v[k] = mul_tw(v[k], wr[k], wi[k]);
      vst(yp + 2 * (q + k * s), v[k]);
    }
  }
  for (; q < s; ++q) {
    C v[kN];
    KILN_FFT_UNROLL
    for (int j = 0; j < r; ++j) v[j] = ld(xp + j * xs, q);
    bfly(v);
    st(yp, q, v[0]);
    KILN_FFT_UNROLL
    for (int k = 1; k < r; ++k) {
      if constexpr (kTwiddle) v[k] = v[k] * w[k];
      st(yp, q + k * s, v[k]);
    }
  }
}

/** A whole pass x -> y. The first pass (s == 1) has no run of q to vectorize,
 *  so it takes four p at a time instead; each butterfly's outputs are
 *  contiguous there, so lanes go out through a small buffer. */
template <int kR, class Bfly>
KILN_FFT_INLINE void pass(const Stage& g, const float* __restrict x,
                          float* __restrict y, Bfly bfly) {
  constexpr int kN = kR ? kR : kMaxRadix;
  const int r = radix<kR>(g);
  const int64_t m = g.m;
  int64_t p = 0;
  if (g.s == 1) {
    for (; p + kW <= m; p += kW) {
      V v[kN];
      KILN_FFT_UNROLL
      for (int j = 0; j < r; ++j) v[j] = vld(x + 2 * (p + j * m));
      bfly(v);
      float out[kN][2 * kW];
      vst(out[0], v[0]);
      KILN_FFT_UNROLL
      for (int k = 1; k < r; ++k)
        vst(out[k], cmul(v[k], vld(g.tw.data() + 2 * ((k - 1) * m + p))));
      KILN_FFT_UNROLL
      for (int l = 0; l < kW; ++l) {
        KILN_FFT_UNROLL
        for (int k = 0; k < r; ++k) st(y, r * (p + l) + k, ld(out[k], l));
      }
    }
  }
  if (p == 0) column<kR, false>(g, p++, x, y, bfly);
  for (; p < m; ++p) column<kR, true>(g, p, x, y, bfly);
}

KILN_FFT_CLONES void run_pass(const Stage& g, const float* x, float* y,
                              float sign) {
  const C* cs = g.cs.data();
  switch (g.r) {
    case 2: return pass<2>(g, x, y, Bfly2{});
    case 4: return pass<4>(g, x, y, Bfly4{sign});
    case 3: return pass<3>(g, x, y, BflyOdd<3>{3, cs});
    case 5: return pass<5>(g, x, y, BflyOdd<5>{5, cs});
    case 7: return pass<7>(g, x, y, BflyOdd<7>{7, cs});
    case 11: return pass<11>(g, x, y, BflyOdd<11>{11, cs});
    case 13: return pass<13>(g, x, y, BflyOdd<13>{13, cs});
    default: return pass<0>(g, x, y, BflyOdd<0>{g.r, cs});
  }
}

/** Bluestein's pointwise steps: y[j*ys] = x[j*xs] * c[j], or its conjugate
 *  (vectorized when both strides are 1). */
KILN_FFT_CLONES void mul_line(const float* x, int64_t xs, const float* c,
                              float* y, int64_t ys, int64_t n, bool conjugate) {
  const V flip = conjugate ? V{1, -1, 1, -1, 1, -1, 1, -1} : V{} + 1.f;
  int64_t j = 0;
  if (xs == 1 && ys == 1)
    for (; j + kW <= n; j += kW)
      vst(y + 2 * j, cmul(vld(x + 2 * j), vld(c + 2 * j)) * flip);
  for (; j < n; ++j) {
    const C v = ld(x, j * xs) * ld(c, j);
    st(y, j * ys, conjugate ? conj(v) : v);
  }
}

} // namespace

struct FftPlan::Impl {
  int64_t n;
  bool inverse;
  int sign;
  std::vector<Stage> stages;
  // Bluestein: out[k] = chirp[k] * sum_j (in[j] chirp[j]) conj(chirp[k-j]),
  // the convolution done by transforms of a power of two big >= 2n-1.
  int64_t big = 0;
  std::shared_ptr<const FftPlan> sub;
  std::vector<float> chirp;   // exp(sign*pi*i * j^2/n), j < n
  std::vector<float> chirp_conj;
  std::vector<float> kernel;  // transform of conj(chirp) wrapped to big, / big

  void stockham(const float* in, int64_t is, float* out, int64_t os,
                float* scratch) const;
  void bluestein(const float* in, int64_t is, float* out, int64_t os,
                 float* scratch) const;
};

FftPlan::FftPlan(int64_t n, bool inverse) : impl_(std::make_unique<Impl>()) {
  if (n < 1) throw std::invalid_argument("FftPlan: length must be positive");
  Impl& P = *impl_;
  P.n = n;
  P.inverse = inverse;
  P.sign = inverse ? 1 : -1;
  if (n == 1) return;
  const std::vector<int> radices = factorize(n);
  if (!radices.empty()) {
    const Roots roots(n, P.sign);
    int64_t s = 1;
    for (int r : radices) {
      Stage g{r, s, n / (s * r), {}, {}};
      // w^(p*k) for the r*m-point sub-transform is the n-th root p*k*s.
      g.tw.resize(2 * size_t(g.m) * (r - 1));
      for (int k = 1; k < r; ++k)
        for (int64_t p = 0; p < g.m; ++p)
          st(g.tw.data(), (k - 1) * g.m + p, roots(p * k * s));
      if (r % 2 == 1) {
        const Roots rr(r, P.sign);
        for (int k = 1; k <= r / 2; ++k)
          for (int j = 1; j <= r / 2; ++j) g.cs.push_back(rr(j * k % r));
      }
      P.stages.push_back(std::move(g));
      s *= r;
    }
    return;
  }
  // The chirp's angle pi*j^2/n is taken as (j^2 mod 2n) / 2n of a turn, kept
  // exact in integers: j^2 itself is too large to be an accurate angle.
  int64_t big = 1;
  while (big < 2 * n - 1) big *= 2;
  P.big = big;
  P.sub = fft_plan(big, false);
  P.chirp.resize(2 * n);
  const Roots roots(2 * n, P.sign);
  for (int64_t j = 0, sq = 0; j < n; ++j) {
    st(P.chirp.data(), j, roots(sq));
    sq += 2 * j + 1;  // (j+1)^2 - j^2
    if (sq >= 2 * n) sq -= 2 * n;
  }
  P.chirp_conj = P.chirp;
  for (int64_t j = 0; j < n; ++j) P.chirp_conj[2 * j + 1] *= -1.f;
  std::vector<std::complex<float>> b(big), scratch(P.sub->scratch_size());
  b[0] = 1.f;
  for (int64_t j = 1; j < n; ++j)
    b[j] = b[big - j] = {P.chirp[2 * j], -P.chirp[2 * j + 1]};
  P.sub->execute(b.data(), 1, b.data(), 1, scratch.data());
  P.kernel.resize(2 * big);
  const float inv = 1.f / float(big);  // exact: big is a power of two
  for (int64_t k = 0; k < big; ++k)
    st(P.kernel.data(), k, C{b[k].real(), b[k].imag()} * inv);
}

FftPlan::~FftPlan() = default;
int64_t FftPlan::size() const { return impl_->n; }
bool FftPlan::inverse() const { return impl_->inverse; }

size_t FftPlan::scratch_size() const {
  const Impl& P = *impl_;
  // Stockham: two buffers of n (see stockham()); Bluestein: the padded input,
  // its transform, and the one buffer that a contiguous out-of-place
  // transform of the power-of-two sub-plan touches.
  if (P.sub) return size_t(3 * P.big);
  return P.n == 1 ? 0 : size_t(2 * P.n);
}

void FftPlan::execute(const std::complex<float>* in, int64_t in_stride,
                      std::complex<float>* out, int64_t out_stride,
                      std::complex<float>* scratch) const {
  // std::complex<float> is layout-compatible with float[2].
  const float* x = reinterpret_cast<const float*>(in);
  float* y = reinterpret_cast<float*>(out);
  float* w = reinterpret_cast<float*>(scratch);
  if (impl_->n == 1) {
    out[0] = in[0];
  } else if (impl_->sub) {
    impl_->bluestein(x, in_stride, y, out_stride, w);
  } else {
    impl_->stockham(x, in_stride, y, out_stride, w);
  }
}

/** The passes ping-pong between the final buffer (out when contiguous, else
 *  scratch that is scattered at the end) and a second one, arranged so that
 *  the last pass writes the final buffer. The first pass reads in directly
 *  when it is contiguous; a strided in is gathered into whichever scratch
 *  buffer the first pass does not write, and in-place calls whose first
 *  pass would write in itself use the spare buffer. A contiguous,
 *  out-of-place call touches only the first n elements of scratch. */
void FftPlan::Impl::stockham(const float* in, int64_t is, float* out,
                             int64_t os, float* scratch) const {
  const int nst = int(stages.size());
  float* s0 = scratch;
  float* s1 = scratch + 2 * n;
  float* fin = os == 1 ? out : s0;
  float* other = os == 1 ? s0 : s1;
  auto dest = [&](int i) { return (nst - i) % 2 == 0 ? fin : other; };
  float* first = dest(1);
  const float* src = in;
  if (is != 1) {
    float* g = first == s0 ? s1 : s0;
    for (int64_t j = 0; j < n; ++j) st(g, j, ld(in, j * is));
    src = g;
  } else if (first == in) {
    first = s1;
  }
  const float* x = src;
  for (int i = 1; i <= nst; ++i) {
    float* y = i == 1 ? first : dest(i);
    run_pass(stages[i - 1], x, y, float(sign));
    x = y;
  }
  if (x != fin)  // a single pass, in place
    std::memcpy(fin, x, sizeof(float) * 2 * n);
  if (os != 1)
    for (int64_t j = 0; j < n; ++j) st(out, j * os, ld(fin, j));
}

/** Convolution by one forward transform, a pointwise product with the
 *  kernel, and a second forward transform of the conjugate (an inverse
 *  transform up to conjugation, undone when the chirp is applied). */
void FftPlan::Impl::bluestein(const float* in, int64_t is, float* out,
                              int64_t os, float* scratch) const {
  float* a = scratch;
  float* f = scratch + 2 * big;
  float* work = scratch + 4 * big;
  mul_line(in, is, chirp.data(), a, 1, n, false);
  std::memset(a + 2 * n, 0, sizeof(float) * 2 * (big - n));
  auto* ac = reinterpret_cast<std::complex<float>*>(a);
  auto* fc = reinterpret_cast<std::complex<float>*>(f);
  auto* wc = reinterpret_cast<std::complex<float>*>(work);
  sub->execute(ac, 1, fc, 1, wc);
  mul_line(f, 1, kernel.data(), f, 1, big, true);
  sub->execute(fc, 1, ac, 1, wc);
  // conj(a) * chirp, as conj(a * conj(chirp)) with the conjugate chirp.
  mul_line(a, 1, chirp_conj.data(), out, os, n, true);
}

std::shared_ptr<const FftPlan> fft_plan(int64_t n, bool inverse) {
  // Most recently used last; a linear scan of a few dozen entries costs
  // nothing next to a transform.
  constexpr size_t kMaxPlans = 64;
  using Key = std::pair<int64_t, bool>;
  static std::mutex mu;
  static std::list<std::pair<Key, std::shared_ptr<const FftPlan>>> plans;
  const Key key{n, inverse};
  auto find = [&]() -> std::shared_ptr<const FftPlan> {
    for (auto it = plans.begin(); it != plans.end(); ++it)
      if (it->first == key) {
        plans.splice(plans.end(), plans, it);
        return it->second;
      }
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto p = find()) return p;
  }
  // Built unlocked: a large plan takes a while, and a Bluestein plan asks
  // this cache for its power-of-two sub-plan.
  auto plan = std::make_shared<const FftPlan>(n, inverse);
  std::lock_guard<std::mutex> lock(mu);
  if (auto p = find()) return p;  // another thread built it meanwhile
  plans.emplace_back(key, plan);
  if (plans.size() > kMaxPlans) plans.pop_front();
  return plan;
}

} // namespace kiln::cpu
