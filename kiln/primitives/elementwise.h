// Elementwise primitives: unary, binary, ternary and casts. Ops have already
// promoted dtypes and broadcast shapes, so a kernel sees equal shapes and, for
// arithmetic, equal input dtypes.
#pragma once

#include "kiln/core/primitive.h"

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
// backend/cpu/{unary,binary}.cpp and its functor has the same name.
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
#define KILN_ELEMENTWISE(Name, Kind) KILN_ELEMENTWISE_CLASS(Name, Kind, )
// Predicates return bool whatever their inputs.
#define KILN_PREDICATE(Name, Kind)                                        \
  KILN_ELEMENTWISE_CLASS(Name, Kind,                                      \
                         Dtype out_dtype(const std::vector<array>&)       \
                             const override { return bool_; })

// |z| of a complex number is real.
KILN_ELEMENTWISE_CLASS(Abs, unary,
                       Dtype out_dtype(const std::vector<array>& in)
                           const override {
                             return in[0].dtype() == complex64
                                        ? float32
                                        : in[0].dtype();
                           })
KILN_ELEMENTWISE(Negative, unary)
KILN_ELEMENTWISE(Sign, unary)
KILN_ELEMENTWISE(Square, unary)
KILN_ELEMENTWISE(Exp, unary)
KILN_ELEMENTWISE(Expm1, unary)
KILN_ELEMENTWISE(Log, unary)
KILN_ELEMENTWISE(Log1p, unary)
KILN_ELEMENTWISE(Log2, unary)
KILN_ELEMENTWISE(Log10, unary)
KILN_ELEMENTWISE(Sin, unary)
KILN_ELEMENTWISE(Cos, unary)
KILN_ELEMENTWISE(Tan, unary)
KILN_ELEMENTWISE(ArcSin, unary)
KILN_ELEMENTWISE(ArcCos, unary)
KILN_ELEMENTWISE(ArcTan, unary)
KILN_ELEMENTWISE(Sinh, unary)
KILN_ELEMENTWISE(Cosh, unary)
KILN_ELEMENTWISE(Tanh, unary)
KILN_ELEMENTWISE(ArcSinh, unary)
KILN_ELEMENTWISE(ArcCosh, unary)
KILN_ELEMENTWISE(ArcTanh, unary)
KILN_ELEMENTWISE(Sqrt, unary)
KILN_ELEMENTWISE(Rsqrt, unary)
KILN_ELEMENTWISE(Sigmoid, unary)
KILN_ELEMENTWISE(Erf, unary)
KILN_ELEMENTWISE(ErfInv, unary)
KILN_ELEMENTWISE(Floor, unary)
KILN_ELEMENTWISE(Ceil, unary)
KILN_ELEMENTWISE(Round, unary)
KILN_PREDICATE(LogicalNot, unary)
KILN_ELEMENTWISE(BitwiseInvert, unary)
KILN_ELEMENTWISE(StopGradient, unary)

KILN_ELEMENTWISE(Add, binary)
KILN_ELEMENTWISE(Subtract, binary)
KILN_ELEMENTWISE(Multiply, binary)
KILN_ELEMENTWISE(Divide, binary)
KILN_ELEMENTWISE(FloorDivide, binary)
KILN_ELEMENTWISE(Remainder, binary)
KILN_ELEMENTWISE(Power, binary)
KILN_ELEMENTWISE(Maximum, binary)
KILN_ELEMENTWISE(Minimum, binary)
KILN_ELEMENTWISE(ArcTan2, binary)
KILN_ELEMENTWISE(LogAddExp, binary)
KILN_PREDICATE(Equal, binary)
KILN_PREDICATE(NaNEqual, binary)
KILN_PREDICATE(NotEqual, binary)
KILN_PREDICATE(Less, binary)
KILN_PREDICATE(LessEqual, binary)
KILN_PREDICATE(Greater, binary)
KILN_PREDICATE(GreaterEqual, binary)
KILN_PREDICATE(LogicalAnd, binary)
KILN_PREDICATE(LogicalOr, binary)
KILN_ELEMENTWISE(BitwiseAnd, binary)
KILN_ELEMENTWISE(BitwiseOr, binary)
KILN_ELEMENTWISE(BitwiseXor, binary)
KILN_ELEMENTWISE(LeftShift, binary)
KILN_ELEMENTWISE(RightShift, binary)

KILN_ELEMENTWISE(Select, ternary)
#undef KILN_ELEMENTWISE
#undef KILN_PREDICATE
#undef KILN_ELEMENTWISE_CLASS

/** Conversion to the output's dtype (the output array carries it). */
class AsType : public Elementwise {
 public:
  AsType(Stream s, Dtype dtype) : Elementwise(s, FusionKind::cast), dtype_(dtype) {}
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
