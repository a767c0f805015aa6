// The table of exportable primitives: MLX's name and parameter layout for
// each, how kiln builds it on import, and what kiln writes for its own.
#include "kiln/io/mlxfn_ops.h"
#include "kiln/io/mlxfn_rows.h"

#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "kiln/core/preprocessor.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fast.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/quantized.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/softmax.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/conv.h"
#include "kiln/primitives/creation.h"
#include "kiln/primitives/elementwise.h"
#include "kiln/primitives/fast.h"
#include "kiln/primitives/indexing.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/quantized.h"
#include "kiln/primitives/random.h"
#include "kiln/primitives/reduction.h"
#include "kiln/primitives/shape.h"
#include "kiln/primitives/slicing.h"
#include "kiln/primitives/softmax.h"
#include "kiln/primitives/sort.h"
#include "kiln/transforms/autograd.h"
#include "kiln/transforms/eval.h"

namespace kiln::detail::mlxfn {

void bad(const std::string& name, const std::string& what) {
  throw std::invalid_argument("[import_function] " + name + ": " + what);
}

// Checks the arity the row expects.
void arity(const std::string& name, const std::vector<array>& in, size_t lo,
           size_t hi) {
  if (in.size() < lo || in.size() > hi) {
    bad(name, "takes " + std::to_string(lo) +
                  (hi != lo ? " to " + std::to_string(hi) : std::string()) +
                  " inputs, the file gives " + std::to_string(in.size()));
  }
}

namespace {

std::vector<int> ints(const Value& v) { return {v.v.begin(), v.v.end()}; }
Shape shape_of(const Value& v) { return {v.v.begin(), v.v.end()}; }

using Unary = array (*)(const array&, StreamOrDevice);
using Binary = array (*)(const array&, const array&, StreamOrDevice);

Row unary(const char* name, Unary f) {
  return {"", [name, f](const State&, const std::vector<array>& in,
                        const NodeInfo&, Stream s) {
            arity(name, in, 1, 1);
            return std::vector<array>{f(in[0], s)};
          }};
}
Row binary(const char* name, Binary f) {
  return {"", [name, f](const State&, const std::vector<array>& in,
                        const NodeInfo&, Stream s) {
            arity(name, in, 2, 2);
            return std::vector<array>{f(in[0], in[1], s)};
          }};
}

// A one-output node's result.
std::vector<array> one(array a) { return {std::move(a)}; }

// A norm's weight or bias as MLX's VJP nodes pass it: a scalar for none.
std::optional<array> optional_weight(const array& w) {
  if (w.ndim() == 0) return std::nullopt;
  return w;
}

// The gradients of norm(x, weight[, bias]) for the cotangent, the last of
// in; a scalar weight or bias gets a zero gradient.
std::vector<array> norm_vjp(
    const std::vector<array>& in, Stream s,
    const std::function<array(const std::vector<array>&)>& norm) {
  std::vector<array> primals(in.begin(), in.end() - 1);
  if (primals[0].ndim() < 1 || in.back().shape() != primals[0].shape()) {
    bad(in.size() == 3 ? "RMSNormVJP" : "LayerNormVJP",
        "wants x and a cotangent of x's shape");
  }
  auto grads = vjp([&](const std::vector<array>& p) {
                     return std::vector<array>{norm(p)};
                   },
                   primals, {in.back()}).second;
  for (size_t i = 1; i < grads.size(); ++i) {
    if (primals[i].ndim() == 0) grads[i] = zeros_like(primals[i], s);
  }
  return grads;
}

const Rows& rows() {
  static const Rows table = [] {
    Rows t;
    auto put = [&](const char* n, Row r) {
      t.insert_or_assign(n, std::move(r));
    };
    // Elementwise without parameters: the op tables' ops, under their
    // primitives' names (MLX's; the rows MLX names otherwise are read by
    // the rows below, which replace these).
#define KILN_PUT_UNARY(Name, op, ...) put(#Name, unary(#Name, kiln::op));
#define KILN_PUT_BINARY(Name, op, ...) \
  KILN_UNLESS_NONE(op, put(#Name, binary(#Name, kiln::op));)
    KILN_UNARY_OPS(KILN_PUT_UNARY)
    KILN_BINARY_OPS(KILN_PUT_BINARY)
#undef KILN_PUT_UNARY
#undef KILN_PUT_BINARY
    put("Conjugate", unary("Conjugate", conjugate));
    put("Imag", unary("Imag", imag));
    put("Real", unary("Real", kiln::real));
    put("Copy", unary("Copy", [](const array& a, StreamOrDevice s) {
          return contiguous(a, false, s);
        }));
    put("kiln.FloorDivide", binary("kiln.FloorDivide", floor_divide));
    // MLX's `a[mask] = v` node: a, a full-shape mask and the values, each
    // with a leading batch axis; each batch is kiln's masked_scatter (the
    // k-th true position takes the k-th value).
    put("MaskedScatter",
        {"", [](const State&, const std::vector<array>& in, const NodeInfo&,
                Stream s) {
           arity("MaskedScatter", in, 3, 3);
           const array &a = in[0], &mask = in[1], &values = in[2];
           if (a.ndim() < 1 || mask.shape() != a.shape() ||
               values.ndim() < 1 || values.shape(0) != a.shape(0) ||
               mask.dtype() != bool_) {
             bad("MaskedScatter",
                 "wants a, a boolean mask of a's shape and values with a's "
                 "leading axis");
           }
           std::vector<array> batches;
           for (int b = 0; b < a.shape(0); ++b) {
             batches.push_back(masked_scatter(
                 take(a, b, 0, s), take(mask, b, 0, s),
                 reshape(take(values, b, 0, s), {-1}, s), s));
           }
           return one(stack(batches, 0, s));
         }});
    // Outputs equal to the first inputs, evaluated after the rest.
    put("Depends", {"", [](const State&, const std::vector<array>& in,
                           const NodeInfo& info, Stream) {
                      size_t n = info.dtypes.size();
                      if (n == 0 || n > in.size()) {
                        bad("Depends", "has " + std::to_string(n) +
                                           " outputs and " +
                                           std::to_string(in.size()) +
                                           " inputs");
                      }
                      return depends({in.begin(), in.begin() + n},
                                     {in.begin() + n, in.end()});
                    }});

    put("Matmul", binary("Matmul", matmul));
    put("Select", {"", [](const State&, const std::vector<array>& in,
                          const NodeInfo&, Stream s) {
                     arity("Select", in, 3, 3);
                     return one(where(in[0], in[1], in[2], s));
                   }});
    // Elementwise with parameters.
    put("Equal", {"b", [](const State& st, const std::vector<array>& in,
                          const NodeInfo&, Stream s) {
                    arity("Equal", in, 2, 2);
                    if (!st[0].i) return one(equal(in[0], in[1], s));
                    // NaNs equal: the primitive, on operands the file has
                    // already given one shape and dtype.
                    if (in[0].shape() != in[1].shape() ||
                        in[0].dtype() != in[1].dtype()) {
                      bad("Equal", "operands of different shapes or dtypes");
                    }
                    return one(array(in[0].shape(), bool_,
                                     std::make_shared<kiln::NaNEqual>(s), in));
                  }});
    put("Log", {"i", [](const State& st, const std::vector<array>& in,
                        const NodeInfo&, Stream s) {
                  arity("Log", in, 1, 1);
                  switch (st[0].i) {
                    case 0: return one(log2(in[0], s));
                    case 1: return one(log10(in[0], s));
                    case 2: return one(log(in[0], s));
                  }
                  bad("Log", "unknown base " + std::to_string(st[0].i));
                }});
    put("Sqrt", {"b", [](const State& st, const std::vector<array>& in,
                         const NodeInfo&, Stream s) {
                   arity("Sqrt", in, 1, 1);
                   return one(st[0].i ? rsqrt(in[0], s) : sqrt(in[0], s));
                 }});
    put("BitwiseBinary",
        {"i", [](const State& st, const std::vector<array>& in, const NodeInfo&,
                 Stream s) {
           arity("BitwiseBinary", in, 2, 2);
           static const Binary ops[] = {bitwise_and, bitwise_or, bitwise_xor,
                                        left_shift, right_shift};
           if (st[0].i < 0 || st[0].i > 4) bad("BitwiseBinary", "unknown op");
           return one(ops[st[0].i](in[0], in[1], s));
         }});
    put("AsType", {"D", [](const State& st, const std::vector<array>& in,
                           const NodeInfo&, Stream s) {
                     arity("AsType", in, 1, 1);
                     return one(astype(in[0], st[0].dt, s));
                   }});
    put("View", {"D", [](const State& st, const std::vector<array>& in,
                         const NodeInfo&, Stream s) {
                   arity("View", in, 1, 1);
                   return one(view(in[0], st[0].dt, s));
                 }});
    // Shapes.
    put("Broadcast",
        {"S", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("Broadcast", in, 1, 64);
           if (in.size() == 1)
             return one(broadcast_to(in[0], shape_of(st[0]), s));
           // Further inputs give the shape (as a shapeless trace records it).
           Shape target;
           for (auto& x : in)
             target = broadcast_shapes(target, x.shape(), "Broadcast");
           return one(broadcast_to(in[0], target, s));
         }});
    put("BroadcastAxes",
        {"S", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("BroadcastAxes", in, 1, 64);
           auto ignore = ints(st[0]);
           Shape target;
           for (auto& x : in) {
             Shape xs = x.shape();
             int nd = static_cast<int>(xs.size());
             for (auto it = ignore.rbegin(); it != ignore.rend(); ++it) {
               int ax = nd + *it;
               if (ax < 0 || ax >= static_cast<int>(xs.size())) {
                 bad("BroadcastAxes", "an ignored axis is out of range");
               }
               xs.erase(xs.begin() + ax);
             }
             target = broadcast_shapes(target, xs, "BroadcastAxes");
           }
           int dims = static_cast<int>(ignore.size() + target.size());
           for (int ax : ignore) {
             target.insert(target.begin() + dims + ax, in[0].shape(ax));
           }
           return one(broadcast_to(in[0], target, s));
         }});
    put("Reshape", {"S", [](const State& st, const std::vector<array>& in,
                            const NodeInfo&, Stream s) {
                      arity("Reshape", in, 1, 1);
                      return one(reshape(in[0], shape_of(st[0]), s));
                    }});
    put("Flatten", {"ii", [](const State& st, const std::vector<array>& in,
                             const NodeInfo&, Stream s) {
                      arity("Flatten", in, 1, 1);
                      return one(flatten(in[0], int(st[0].i), int(st[1].i), s));
                    }});
    put("Unflatten", {"iS", [](const State& st, const std::vector<array>& in,
                               const NodeInfo&, Stream s) {
                        arity("Unflatten", in, 1, 1);
                        return one(
                            unflatten(in[0], int(st[0].i), shape_of(st[1]), s));
                      }});
    put("Squeeze", {"S", [](const State& st, const std::vector<array>& in,
                            const NodeInfo&, Stream s) {
                      arity("Squeeze", in, 1, 1);
                      return one(squeeze(in[0], ints(st[0]), s));
                    }});
    put("ExpandDims", {"S", [](const State& st, const std::vector<array>& in,
                               const NodeInfo&, Stream s) {
                         arity("ExpandDims", in, 1, 1);
                         return one(expand_dims(in[0], ints(st[0]), s));
                       }});
    put("Transpose", {"S", [](const State& st, const std::vector<array>& in,
                              const NodeInfo&, Stream s) {
                        arity("Transpose", in, 1, 1);
                        return one(transpose(in[0], ints(st[0]), s));
                      }});
    put("Slice", {"SSS", [](const State& st, const std::vector<array>& in,
                            const NodeInfo&, Stream s) {
                    arity("Slice", in, 1, 1);
                    return one(slice(in[0], shape_of(st[0]), shape_of(st[1]),
                                     shape_of(st[2]), s));
                  }});
    put("SliceUpdate",
        {"SSS", [](const State& st, const std::vector<array>& in,
                   const NodeInfo&, Stream s) {
           arity("SliceUpdate", in, 2, 2);
           return one(slice_update(in[0], in[1], shape_of(st[0]),
                                   shape_of(st[1]), shape_of(st[2]), s));
         }});
    put("DynamicSlice",
        {"SS", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("DynamicSlice", in, 2, 2);
           return one(slice(in[0], in[1], ints(st[0]), shape_of(st[1]), s));
         }});
    put("DynamicSliceUpdate",
        {"S", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("DynamicSliceUpdate", in, 3, 3);
           return one(slice_update(in[0], in[1], in[2], ints(st[0]), s));
         }});
    put("Concatenate",
        {"i", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("Concatenate", in, 1, 1 << 20);
           return one(concatenate(in, int(st[0].i), s));
         }});
    put("Split", {"Si", [](const State& st, const std::vector<array>& in,
                           const NodeInfo&, Stream s) {
                    arity("Split", in, 1, 1);
                    return split(in[0], shape_of(st[0]), int(st[1].i), s);
                  }});
    put("AsStrided",
        {"SLu", [](const State& st, const std::vector<array>& in,
                   const NodeInfo&, Stream s) {
           arity("AsStrided", in, 1, 1);
           Strides strides(st[1].v.begin(), st[1].v.end());
           return one(as_strided(in[0], shape_of(st[0]), strides,
                                 static_cast<size_t>(st[2].i), s));
         }});
    put("Pad", {"SSS", [](const State& st, const std::vector<array>& in,
                          const NodeInfo&, Stream s) {
                  arity("Pad", in, 2, 2);
                  return one(pad(in[0], ints(st[0]), shape_of(st[1]),
                                 shape_of(st[2]), in[1], "constant", s));
                }});
    // Creation and random bits.
    put("Arange", {"ddd", [](const State& st, const std::vector<array>& in,
                             const NodeInfo& info, Stream s) {
                     arity("Arange", in, 0, 0);
                     return one(arange(st[0].f, st[1].f, st[2].f,
                                       info.dtypes.at(0), s));
                   }});
    put("Full", {"", [](const State&, const std::vector<array>& in,
                        const NodeInfo& info, Stream s) {
                   arity("Full", in, 1, 1);
                   return one(
                       full(info.shapes.at(0), in[0], info.dtypes.at(0), s));
                 }});
    put("RandomBits",
        {"Si", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("RandomBits", in, 1, 1);
           return one(random::bits(shape_of(st[0]), int(st[1].i), in[0], s));
         }});
    // Reductions, scans and sorts.
    put("Reduce",
        {"iS", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("Reduce", in, 1, 1);
           auto axes = ints(st[1]);
           switch (st[0].i) {
             case 0: return one(all(in[0], axes, true, s));
             case 1: return one(any(in[0], axes, true, s));
             case 2: return one(sum(in[0], axes, true, s));
             case 3: return one(prod(in[0], axes, true, s));
             case 4: return one(min(in[0], axes, true, s));
             case 5: return one(max(in[0], axes, true, s));
           }
           bad("Reduce", "unknown reduction " + std::to_string(st[0].i));
         }});
    put("ArgReduce",
        {"ii", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("ArgReduce", in, 1, 1);
           int ax = int(st[1].i);
           return one(st[0].i == 0 ? argmin(in[0], ax, true, s)
                                   : argmax(in[0], ax, true, s));
         }});
    put("Scan",
        {"iibb", [](const State& st, const std::vector<array>& in,
                    const NodeInfo&, Stream s) {
           arity("Scan", in, 1, 1);
           int ax = int(st[1].i);
           bool rev = st[2].i, inc = st[3].i;
           switch (st[0].i) {
             case 0: return one(cummax(in[0], ax, rev, inc, s));
             case 1: return one(cummin(in[0], ax, rev, inc, s));
             case 2: return one(cumsum(in[0], ax, rev, inc, s));
             case 3: return one(cumprod(in[0], ax, rev, inc, s));
             case 4: return one(logcumsumexp(in[0], ax, rev, inc, s));
           }
           bad("Scan", "unknown scan " + std::to_string(st[0].i));
         }});
    put("Sort", {"i", [](const State& st, const std::vector<array>& in,
                         const NodeInfo&, Stream s) {
                   arity("Sort", in, 1, 1);
                   return one(sort(in[0], int(st[0].i), s));
                 }});
    put("ArgSort", {"i", [](const State& st, const std::vector<array>& in,
                            const NodeInfo&, Stream s) {
                      arity("ArgSort", in, 1, 1);
                      return one(argsort(in[0], int(st[0].i), s));
                    }});
    put("Partition", {"ii", [](const State& st, const std::vector<array>& in,
                               const NodeInfo&, Stream s) {
                        arity("Partition", in, 1, 1);
                        return one(
                            partition(in[0], int(st[0].i), int(st[1].i), s));
                      }});
    put("ArgPartition",
        {"ii", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("ArgPartition", in, 1, 1);
           return one(argpartition(in[0], int(st[0].i), int(st[1].i), s));
         }});
    put("SearchSorted",
        {"b", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("SearchSorted", in, 2, 2);
           return one(
               searchsorted(in[0], in[1], st[0].i ? "right" : "left", s));
         }});
    put("Softmax", {"b", [](const State& st, const std::vector<array>& in,
                            const NodeInfo&, Stream s) {
                      arity("Softmax", in, 1, 1);
                      return one(softmax(in[0], std::vector<int>{-1},
                                         bool(st[0].i), s));
                    }});
    put("LogSumExp", {"", [](const State&, const std::vector<array>& in,
                             const NodeInfo&, Stream s) {
                        arity("LogSumExp", in, 1, 1);
                        return one(
                            logsumexp(in[0], std::vector<int>{-1}, true, s));
                      }});
    put("kiln.LogSumExp", {"", [](const State&, const std::vector<array>& in,
                                  const NodeInfo&, Stream s) {
                             arity("kiln.LogSumExp", in, 1, 1);
                             return one(logsumexp(in[0], std::vector<int>{-1},
                                                  false, s));
                           }});
    // Indexing.
    put("Gather",
        {"SS", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("Gather", in, 1, 1 << 10);
           std::vector<array> idx(in.begin() + 1, in.end());
           return one(gather(in[0], idx, ints(st[0]), shape_of(st[1]), s));
         }});
    put("GatherAxis",
        {"i", [](const State& st, const std::vector<array>& in,
                 const NodeInfo&, Stream s) {
           arity("GatherAxis", in, 2, 2);
           return one(take_along_axis(in[0], in[1], int(st[0].i), s));
         }});
    put("Scatter",
        {"iS", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("Scatter", in, 2, 1 << 10);
           std::vector<array> idx(in.begin() + 1, in.end() - 1);
           auto axes = ints(st[1]);
           const array& u = in.back();
           switch (st[0].i) {
             case 0: return one(scatter_max(in[0], idx, u, axes, s));
             case 1: return one(scatter_min(in[0], idx, u, axes, s));
             case 2: return one(scatter_add(in[0], idx, u, axes, s));
             case 3: return one(scatter_prod(in[0], idx, u, axes, s));
             case 4: return one(scatter(in[0], idx, u, axes, s));
           }
           bad("Scatter", "unknown reduction " + std::to_string(st[0].i));
         }});
    put("ScatterAxis",
        {"ii", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("ScatterAxis", in, 3, 3);
           int ax = int(st[1].i);
           return one(st[0].i == 0
                          ? scatter_add_axis(in[0], in[1], in[2], ax, s)
                          : put_along_axis(in[0], in[1], in[2], ax, s));
         }});
    // Products and convolution.
    put("AddMM", {"ff", [](const State& st, const std::vector<array>& in,
                           const NodeInfo&, Stream s) {
                    arity("AddMM", in, 3, 3);
                    return one(addmm(in[0], in[1], in[2], float(st[0].f),
                                     float(st[1].f), s));
                  }});
    put("Convolution",
        {"SSSSSib", [](const State& st, const std::vector<array>& in,
                       const NodeInfo&, Stream s) {
           arity("Convolution", in, 2, 2);
           return one(conv_general(in[0], in[1], ints(st[0]), ints(st[1]),
                                   ints(st[2]), ints(st[3]), ints(st[4]),
                                   int(st[5].i), bool(st[6].i), s));
         }});
    // Fused operations.
    // The first parameter of these is MLX's empty placeholder.
    put("RMSNorm", {"nf", [](const State& st, const std::vector<array>& in,
                             const NodeInfo&, Stream s) {
                      arity("RMSNorm", in, 1, 2);
                      std::optional<array> w;
                      if (in.size() == 2 && in[1].ndim() == 1) w = in[1];
                      return one(fast::rms_norm(in[0], w, float(st[1].f), s));
                    }});
    put("LayerNorm",
        {"nf", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("LayerNorm", in, 1, 3);
           std::optional<array> w, b;
           if (in.size() >= 2 && in[1].ndim() == 1) w = in[1];
           if (in.size() == 3 && in[2].ndim() == 1) b = in[2];
           return one(fast::layer_norm(in[0], w, b, float(st[1].f), s));
         }});
    // The norms' VJP nodes, which MLX's GPU backends write (x, the weight
    // and bias, the cotangent in; their gradients out): kiln's gradients of
    // its own norms. A scalar weight or bias stands for none.
    put("RMSNormVJP",
        {"nf", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("RMSNormVJP", in, 3, 3);
           float eps = float(st[1].f);
           return norm_vjp(in, s, [eps, s](const std::vector<array>& p) {
             return fast::rms_norm(p[0], optional_weight(p[1]), eps, s);
           });
         }});
    put("LayerNormVJP",
        {"nf", [](const State& st, const std::vector<array>& in,
                  const NodeInfo&, Stream s) {
           arity("LayerNormVJP", in, 4, 4);
           float eps = float(st[1].f);
           return norm_vjp(in, s, [eps, s](const std::vector<array>& p) {
             return fast::layer_norm(p[0], optional_weight(p[1]),
                                     optional_weight(p[2]), eps, s);
           });
         }});
    put("RoPE",
        {"nibffb", [](const State& st, const std::vector<array>& in,
                      const NodeInfo&, Stream s) {
           arity("RoPE", in, 2, 3);
           if (!st[5].i) bad("RoPE", "the inverse rotation is not read");
           std::optional<array> freqs;
           std::optional<float> base = float(st[3].f);
           if (in.size() == 3) freqs = in[2], base = std::nullopt;
           return one(fast::rope(in[0], int(st[1].i), bool(st[2].i), base,
                                 float(st[4].f), in[1], freqs, s));
         }});
    put("ScaledDotProductAttention",
        {"nfbbbb", [](const State& st, const std::vector<array>& in,
                      const NodeInfo&, Stream s) {
           arity("ScaledDotProductAttention", in, 3, 5);
           bool sinks = st[3].i;
           if (st[4].i)
             bad("ScaledDotProductAttention",
                 "the log-sum-exp output is not read");
           size_t n_mask = in.size() - 3 - (sinks ? 1 : 0);
           std::optional<array> mask, sink;
           if (n_mask == 1) mask = in[3];
           if (sinks) sink = in.back();
           return one(fast::scaled_dot_product_attention(
               in[0], in[1], in[2], float(st[1].f), st[2].i ? "causal" : "",
               mask, sink, false, s));
         }});
    put_linalg_rows(t);
    put_quantized_rows(t);
    return t;
  }();
  return table;
}

} // namespace

const char* schema(const std::string& mlx_name) {
  auto it = rows().find(mlx_name);
  if (it == rows().end()) {
    throw std::invalid_argument(
        "[import_function] Unable to deserialize primitive " + mlx_name +
        " (kiln does not read it).");
  }
  return it->second.schema;
}

std::vector<array> build(const std::string& mlx_name, const State& state,
                         const std::vector<array>& inputs,
                         const NodeInfo& info, Stream s) {
  auto it = rows().find(mlx_name);
  if (it == rows().end()) schema(mlx_name); // raises
  return it->second.build(state, inputs, info, s);
}

} // namespace kiln::detail::mlxfn
