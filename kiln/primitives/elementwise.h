// Elementwise primitives: unary, binary, ternary and casts. Ops have already
// promoted dtypes and broadcast shapes, so a kernel sees equal shapes and, for
// arithmetic, equal input dtypes.
#pragma once

#include "kiln/core/primitive.h"
#include "kiln/primitives/binary_table.h"

namespace kiln {

/** Shared behaviour of parameterless elementwise primitives: two of the same
 *  class are equivalent, the output has the inputs' shape, and the
 *  transformation rules follow from each class's partial derivatives. */
class Elementwise : public UnaryPrimitive {
 public:
  Elementwise(Stream s, FusionKind kind) : UnaryPrimitive(s), kind_(kind) {}
  // One GPU eval for the family: it runs the kernel of the functor named
  // like the primitive.
  KILN_GPU_EVAL_UNARY

  /** d out / d inputs[i] for each i in argnums, shaped like out. */
  virtual std::vector<array> partials(const std::vector<array>& inputs,
                                      const array& out,
                                      const std::vector<int>& argnums) = 0;
  /** The output dtype for these inputs (default: the last input's). */
  virtual Dtype out_dtype(const std::vector<array>& inputs) const {
    return inputs.back().dtype();
  }
  KILN_DECLARE_GRADS
  bool is_equivalent(const Primitive& other) const override {
    return typeid(*this) == typeid(other);
  }
  FusionKind fusion_kind() const override { return kind_; }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  const FusionKind kind_;
};

// Declares an elementwise primitive class; its eval_cpu lives in
// backend/cpu/{unary,binary}.cpp and its functor, of the same name, in
// unary_table.h or binary_table.h.
#define KILN_ELEMENTWISE_CLASS(Name, Kind, extra)                         \
  class Name : public Elementwise {                                       \
   public:                                                                \
    explicit Name(Stream s) : Elementwise(s, FusionKind::Kind) {}         \
    const char* name() const override { return #Name; }                   \
    void eval_cpu(const std::vector<array>& inputs, array& out) override; \
    std::vector<array> partials(const std::vector<array>& inputs,         \
                                const array& out,                         \
                                const std::vector<int>& argnums) override; \
    extra                                                                 \
  };
// The classes of the op tables' rows. Predicates return bool whatever their
// inputs; |z| of a complex number is real.
#define KILN_OUT_DTYPE_all
#define KILN_OUT_DTYPE_numeric
#define KILN_OUT_DTYPE_inexact
#define KILN_OUT_DTYPE_integral
#define KILN_OUT_DTYPE_predicate                                          \
  Dtype out_dtype(const std::vector<array>&) const override { return bool_; }
#define KILN_OUT_DTYPE_magnitude                                          \
  Dtype out_dtype(const std::vector<array>& in) const override {          \
    return in[0].dtype() == complex64 ? float32 : in[0].dtype();          \
  }
#define KILN_UNARY_CLASS(Name, op, kind, ...) \
  KILN_ELEMENTWISE_CLASS(Name, unary, KILN_OUT_DTYPE_##kind)
#define KILN_BINARY_CLASS(Name, op, kind, ...) \
  KILN_ELEMENTWISE_CLASS(Name, binary, KILN_OUT_DTYPE_##kind)
KILN_UNARY_OPS(KILN_UNARY_CLASS)
KILN_BINARY_OPS(KILN_BINARY_CLASS)
#undef KILN_UNARY_CLASS
#undef KILN_BINARY_CLASS
#undef KILN_OUT_DTYPE_all
#undef KILN_OUT_DTYPE_numeric
#undef KILN_OUT_DTYPE_inexact
#undef KILN_OUT_DTYPE_integral
#undef KILN_OUT_DTYPE_predicate
#undef KILN_OUT_DTYPE_magnitude

KILN_ELEMENTWISE_CLASS(Select, ternary, )
#undef KILN_ELEMENTWISE_CLASS

/** Conversion to the output's dtype (the output array carries it). */
class AsType : public Elementwise {
 public:
  AsType(Stream s, Dtype dtype)
      : Elementwise(s, FusionKind::cast), dtype_(dtype) {}
  const char* name() const override { return "AsType"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<array> partials(const std::vector<array>& inputs,
                              const array& out,
                              const std::vector<int>& argnums) override;
  Dtype out_dtype(const std::vector<array>&) const override { return dtype_; }
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const AsType*>(&other);
    return o && o->dtype_ == dtype_;
  }
  Dtype dtype() const { return dtype_; }

 private:
  const Dtype dtype_;
};

/** The parts of a complex64 array: Real and Imag give float32, Conjugate
 *  keeps complex64. Linear but not holomorphic, so each gives its own
 *  transformation rules instead of partials. */
class ComplexPart : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  bool is_equivalent(const Primitive& other) const override {
    return typeid(*this) == typeid(other);
  }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }
  KILN_DECLARE_VMAP
};

#define KILN_COMPLEX_PART(Name)                                           \
  class Name : public ComplexPart {                                       \
   public:                                                                \
    using ComplexPart::ComplexPart;                                       \
    const char* name() const override { return #Name; }                   \
    void eval_cpu(const std::vector<array>& inputs, array& out) override; \
    KILN_GPU_EVAL_UNARY                                                   \
    KILN_DECLARE_VJP                                                      \
    KILN_DECLARE_JVP                                                      \
  };
KILN_COMPLEX_PART(Real)
KILN_COMPLEX_PART(Imag)
KILN_COMPLEX_PART(Conjugate)
#undef KILN_COMPLEX_PART

} // namespace kiln
