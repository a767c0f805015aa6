// Random sampling with Threefry-2x32 keys, drawing the same numbers as MLX
// for the same key. Every sampler takes an optional key; without one it
// splits the global key (random::state()) and keeps one half as the new key.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "kiln/core/array.h"
#include "kiln/core/device.h"

namespace kiln::random {

/** The global random state: a container of exactly one key (a uint32 array
 *  of shape (2,)). It is not an array itself, so that compile can read the
 *  key as an implicit input and write the new key back as an output. */
class KeyState {
 public:
  explicit KeyState(uint64_t seed);
  KeyState(const KeyState&) = delete;
  KeyState& operator=(const KeyState&) = delete;

  /** Number of keys held: always 1 (the state is list-like). */
  size_t size() const { return 1; }
  /** The current key. */
  array get() const;
  /** Replace the current key (a uint32 array of shape (2,)). */
  void set(array key);
  /** Replace the current key with key(seed). */
  void seed(uint64_t seed);
  /** Split the current key: the first half becomes the new key, the second
   *  is returned for one draw (as MLX's KeySequence does). */
  array next();

 private:
  mutable std::mutex mutex_;
  array key_;
};

/** The global state, seeded from the clock on first use (as MLX). */
KeyState& state();

/** A key from a seed: the uint32 pair [seed >> 32, seed & 0xffffffff]. */
array key(uint64_t seed);

/** Seed the global state. */
void seed(uint64_t seed);

/** Random bits of the given shape: uint32, uint16 or uint8 for width 4, 2
 *  or 1 bytes. */
array bits(const Shape& shape, int width,
           const std::optional<array>& key = std::nullopt,
           StreamOrDevice s = {});
inline array bits(const Shape& shape,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {}) {
  return bits(shape, 4, key, s);
}

/** Split a key into two keys. */
std::pair<array, array> split(const array& key, StreamOrDevice s = {});
/** Split a key into num keys, an array of shape (num, 2). */
array split(const array& key, int num, StreamOrDevice s = {});

/** Uniform samples in [low, high) of a floating dtype; low and high
 *  broadcast to shape. (MLX rejects float64; kiln draws it with the float32
 *  grid that MLX's normal also uses for float64.) */
array uniform(const array& low, const array& high, const Shape& shape,
              Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
template <typename T, typename U,
          typename = std::enable_if_t<std::is_arithmetic_v<T> &&
                                      std::is_arithmetic_v<U>>>
array uniform(T low, U high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {}) {
  return uniform(array(low), array(high), shape, dtype, key, s);
}
/** Uniform samples in [0, 1). */
array uniform(const Shape& shape, Dtype dtype,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
inline array uniform(const Shape& shape,
                     const std::optional<array>& key = std::nullopt,
                     StreamOrDevice s = {}) {
  return uniform(shape, float32, key, s);
}

/** Normal samples with mean loc and standard deviation scale. */
array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s = {});
array normal(const Shape& shape, Dtype dtype, float loc, float scale,
             const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});
inline array normal(const Shape& shape, float loc, float scale,
                    const std::optional<array>& key = std::nullopt,
                    StreamOrDevice s = {}) {
  return normal(shape, float32, loc, scale, key, s);
}
inline array normal(const Shape& shape, Dtype dtype,
                    const std::optional<array>& key = std::nullopt,
                    StreamOrDevice s = {}) {
  return normal(shape, dtype, std::nullopt, std::nullopt, key, s);
}
inline array normal(const Shape& shape,
                    const std::optional<array>& key = std::nullopt,
                    StreamOrDevice s = {}) {
  return normal(shape, float32, std::nullopt, std::nullopt, key, s);
}

/** Integers in [low, high) of an integer (or bool) dtype. */
array randint(const array& low, const array& high, const Shape& shape,
              Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
template <typename T, typename U,
          typename = std::enable_if_t<std::is_arithmetic_v<T> &&
                                      std::is_arithmetic_v<U>>>
array randint(T low, U high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {}) {
  return randint(array(low), array(high), shape, dtype, key, s);
}

/** Booleans that are true with probability p (a floating array that
 *  broadcasts to shape; shape defaults to p's shape, p to 0.5). */
array bernoulli(const array& p, const Shape& shape,
                const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
array bernoulli(const array& p, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
array bernoulli(const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
array bernoulli(T p, const Shape& shape,
                const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {}) {
  return bernoulli(array(p), shape, key, s);
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
array bernoulli(T p, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {}) {
  return bernoulli(array(p), key, s);
}

/** Normal samples truncated to [lower, upper] (broadcast to shape, which
 *  defaults to their broadcast shape). */
array truncated_normal(const array& lower, const array& upper,
                       const Shape& shape, Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt,
                       StreamOrDevice s = {});
array truncated_normal(const array& lower, const array& upper,
                       Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt,
                       StreamOrDevice s = {});

/** Samples from the standard Gumbel distribution. */
array gumbel(const Shape& shape, Dtype dtype = float32,
             const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});

/** Samples from the Laplace distribution with location loc and scale b. */
array laplace(const Shape& shape, Dtype dtype = float32, float loc = 0.0f,
              float scale = 1.0f,
              const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});

/** Jointly normal samples with mean (..., n) and positive semi-definite
 *  covariance cov (..., n, n), of shape shape + (n,); shape defaults to the
 *  broadcast batch shape of mean and cov and must be compatible with it.
 *  Only float32 (as MLX). */
array multivariate_normal(const array& mean, const array& cov,
                          const Shape& shape = {}, Dtype dtype = float32,
                          const std::optional<array>& key = std::nullopt,
                          StreamOrDevice s = {});

/** Category indices (uint32) drawn from unnormalized log-probabilities
 *  along axis: one per position of the reduced shape, of a given shape that
 *  the reduced shape broadcasts to, or num_samples per position. */
array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
array categorical(const array& logits, int axis, int num_samples,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
array categorical(const array& logits, int axis = -1,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});

/** A random permutation of 0..n-1 (uint32), or x shuffled along axis. */
array permutation(int n, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
array permutation(const array& x, int axis = 0,
                  const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});

} // namespace kiln::random
