// Preprocessor helpers for the op tables' generated code.
#pragma once

// KILN_UNLESS_NONE(x, ...) expands to ... unless x is the token none (a
// table cell that names nothing): pasting x onto a probe makes two extra
// arguments appear only for none, which shifts which one is picked.
#define KILN_PP_SECOND(a, b, ...) b
#define KILN_PP_IS_NONE_(...) KILN_PP_SECOND(__VA_ARGS__, 0, )
#define KILN_PP_NONE_PROBE_none ~, 1,
#define KILN_PP_IS_NONE(x) KILN_PP_IS_NONE_(KILN_PP_NONE_PROBE_##x)
#define KILN_PP_CAT_(a, b) a##b
#define KILN_PP_CAT(a, b) KILN_PP_CAT_(a, b)
#define KILN_PP_WHEN_NONE_1(...)
#define KILN_PP_WHEN_NONE_0(...) __VA_ARGS__
#define KILN_UNLESS_NONE(x, ...) \
  KILN_PP_CAT(KILN_PP_WHEN_NONE_, KILN_PP_IS_NONE(x))(__VA_ARGS__)
