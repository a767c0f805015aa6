// KILN_SIMD_CLONES: build a function for AVX-512, AVX2 and baseline x86-64
// and pick one at load time (an ifunc). ThreadSanitizer instruments the
// picking code, which the loader runs before TSan is set up, so a TSan build
// keeps the baseline version only.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#endif

#ifdef KILN_TSAN
#define KILN_SIMD_CLONES
#else
#define KILN_SIMD_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
