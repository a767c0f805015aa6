// How the views (broadcasts, transposes, slices, ...) are evaluated: shape,
// strides and offset over the input's buffer, wherever it lives. One
// eval_cpu, defined in backend/common/views.cpp, serves every device.
#pragma once

#include "kiln/core/primitive.h"

#if KILN_HAS_CUDA
#define KILN_VIEW_EVAL_UNARY                                              \
  void eval_cpu(const std::vector<array>& inputs, array& out) override;  \
  void eval_gpu(const std::vector<array>& inputs, array& out) override { \
    eval_cpu(inputs, out);                                                \
  }
#define KILN_VIEW_EVAL                                           \
  void eval_cpu(const std::vector<array>& inputs,                \
                std::vector<array>& outputs) override;           \
  void eval_gpu(const std::vector<array>& inputs,                \
                std::vector<array>& outputs) override {          \
    eval_cpu(inputs, outputs);                                   \
  }
#else
#define KILN_VIEW_EVAL_UNARY \
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
#define KILN_VIEW_EVAL                            \
  void eval_cpu(const std::vector<array>& inputs, \
                std::vector<array>& outputs) override;
#endif
