// Complex single-precision FFTs of any length on the CPU: a plan fixes the
// length and direction once (factorization, twiddle tables) so that running
// it over many lines costs only the transforms.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::cpu {

/** A discrete Fourier transform of one length, made once and run on many
 *  lines: out[k] = sum_j in[j] * exp(-+2*pi*i*j*k/n) (sign - forward, +
 * inverse), no normalization (the caller scales the inverse). Any n >= 1.
 * Twiddles are computed in double precision and stored as float. Thread-safe to
 * execute concurrently from several threads (each call gets its own scratch).
 */
class FftPlan {
 public:
  FftPlan(int64_t n, bool inverse);
  ~FftPlan();
  int64_t size() const;
  bool inverse() const;
  /** Transforms one line: in[j * in_stride] -> out[k * out_stride] (strides in
   *  elements, may be any positive value; in and out do not overlap, except
   *  that in == out with equal strides must also work). `scratch` must hold
   *  scratch_size() elements (callers reuse it across lines). */
  void execute(const std::complex<float>* in, int64_t in_stride,
               std::complex<float>* out, int64_t out_stride,
               std::complex<float>* scratch) const;
  size_t scratch_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/** A cached plan for (n, inverse), shared; thread-safe. */
std::shared_ptr<const FftPlan> fft_plan(int64_t n, bool inverse);

} // namespace kiln::cpu
