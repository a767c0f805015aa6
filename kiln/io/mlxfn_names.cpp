// What kiln writes for each of its primitives: the MLX name and parameters
// (how kiln reads them back is mlxfn_ops.cpp).
#include "kiln/io/mlxfn_ops.h"

#include <functional>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

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
#include "kiln/primitives/fft.h"
#include "kiln/primitives/indexing.h"
#include "kiln/primitives/linalg.h"
#include "kiln/primitives/quantized.h"
#include "kiln/primitives/random.h"
#include "kiln/primitives/reduction.h"
#include "kiln/primitives/shape.h"
#include "kiln/primitives/slicing.h"
#include "kiln/primitives/softmax.h"
#include "kiln/primitives/sort.h"

namespace kiln::detail::mlxfn {

namespace {

using Describer = std::function<std::pair<std::string, State>(const array&)>;

template <typename P>
const P& as(const array& node) {
  return static_cast<const P&>(node.primitive());
}

using Named = std::pair<std::string, State>;

// MLX's QuantizationMode of a microscaling primitive, named by its group
// size and bits: 32/4 mxfp4, 32/8 mxfp8, 16/4 nvfp4.
int64_t fp_mode(const fast::QuantizedCustom& p) {
  if (p.group_size() == 16) return 3;
  return p.bits() == 8 ? 2 : 1;
}

// A QuantizedMatmul: x @ w.T, or gather_qmm's picks read in place (one
// input more, the right indices), which MLX writes as a GatherQMM.
Named quantized_matmul(int64_t gs, int64_t bits, int64_t mode, bool picks) {
  if (picks) {
    return {"GatherQMM", State{integer(gs), integer(bits), integer(mode),
                               integer(1), integer(0), integer(0)}};
  }
  return {"QuantizedMatmul",
          State{integer(gs), integer(bits), integer(mode), integer(1)}};
}

// gather_qmm's picks read in place: a quantized product with the right
// indices as one input more (affine: x, w, scales, biases; fp: no biases).
bool reads_picks(const array& node) {
  std::string name = node.primitive().name();
  size_t n = node.inputs().size();
  return (name == "QuantizedMatmul" && n == 5) ||
         (name == "QuantizedMatmulFp" && n == 4);
}

} // namespace

std::vector<array> operands(const array& node) {
  std::vector<array> in = node.inputs();
  if (!reads_picks(node)) return in;
  // MLX's GatherQMM takes left indices too: pick p of x is x's matrix p.
  std::vector<uint32_t> order(in[0].shape(0));
  std::iota(order.begin(), order.end(), 0u);
  in.insert(in.end() - 1, array(order, Shape{in[0].shape(0)}, uint32));
  return in;
}

std::optional<array> folded(const array& node, bool shapeless) {
  if (shapeless || std::string(node.primitive().name()) != "NumberOfElements") {
    return std::nullopt;
  }
  auto& p = as<NumberOfElements>(node);
  // MLX's count has no ddof: var's count less ddof is written as its value.
  if (p.ddof() == 0) return std::nullopt;
  return array(p.count(node.inputs()[0].shape()), p.count_dtype());
}

std::pair<std::string, State> describe(const array& node, bool shapeless) {
  static const std::unordered_map<std::string, Describer> table = [] {
    std::unordered_map<std::string, Describer> t;
    auto same = [&](const char* n) {
      t.emplace(n, [n](const array&) {
        return std::make_pair(std::string(n), State{});
      });
    };
    // The op tables' primitives keep their names (MLX's); those MLX names
    // otherwise are fixed below, over these.
#define KILN_SAME_NAME(Name, ...) same(#Name);
    KILN_UNARY_OPS(KILN_SAME_NAME)
    KILN_BINARY_OPS(KILN_SAME_NAME)
#undef KILN_SAME_NAME
    for (auto n : {"Conjugate", "Imag", "Real", "Copy", "Matmul", "Select",
                   "Depends"}) {
      same(n);
    }
    auto fixed = [&](const char* kiln_name, const char* mlx, State st) {
      t.insert_or_assign(kiln_name, [mlx, st](const array&) {
        return std::make_pair(std::string(mlx), st);
      });
    };
    fixed("FloorDivide", "kiln.FloorDivide", {});
    // kiln's drops the reduced axis, MLX's keeps it.
    fixed("LogSumExp", "kiln.LogSumExp", {});
    fixed("Contiguous", "Copy", {});
    fixed("Equal", "Equal", {integer(0)});
    fixed("NaNEqual", "Equal", {integer(1)});
    fixed("Log2", "Log", {integer(0)});
    fixed("Log10", "Log", {integer(1)});
    fixed("Log", "Log", {integer(2)});
    fixed("Sqrt", "Sqrt", {integer(0)});
    fixed("Rsqrt", "Sqrt", {integer(1)});
    fixed("BitwiseAnd", "BitwiseBinary", {integer(0)});
    fixed("BitwiseOr", "BitwiseBinary", {integer(1)});
    fixed("BitwiseXor", "BitwiseBinary", {integer(2)});
    fixed("LeftShift", "BitwiseBinary", {integer(3)});
    fixed("RightShift", "BitwiseBinary", {integer(4)});
    t.emplace("Float32Erf", [](const array& n) {
      return std::make_pair(
          std::string(as<Float32Erf>(n).inverse() ? "ErfInv" : "Erf"), State{});
    });
    t.emplace("AsType", [](const array& n) {
      return std::make_pair(std::string("AsType"),
                            State{dtype_value(as<AsType>(n).dtype())});
    });
    t.emplace("View", [](const array& n) {
      return std::make_pair(std::string("View"),
                            State{dtype_value(as<View>(n).dtype())});
    });
    t.emplace("Broadcast", [](const array& n) {
      return std::make_pair(std::string("Broadcast"), State{list(n.shape())});
    });
    t.emplace("BroadcastLike", [](const array& n) {
      // keep > 0 (a product's batch axes) is MLX's BroadcastAxes, ignoring
      // the last `keep` axes.
      int keep = as<BroadcastLike>(n).keep();
      if (keep > 0) {
        std::vector<int> ignore;
        for (int k = -keep; k < 0; ++k) ignore.push_back(k);
        return std::make_pair(std::string("BroadcastAxes"),
                              State{list(ignore)});
      }
      return std::make_pair(std::string("Broadcast"), State{list(n.shape())});
    });
    t.emplace("Squeeze", [](const array& n) {
      return std::make_pair(std::string("Squeeze"),
                            State{list(as<Squeeze>(n).axes())});
    });
    t.emplace("ExpandDims", [](const array& n) {
      return std::make_pair(std::string("ExpandDims"),
                            State{list(as<ExpandDims>(n).axes())});
    });
    t.emplace("Transpose", [](const array& n) {
      return std::make_pair(std::string("Transpose"),
                            State{list(as<Transpose>(n).axes())});
    });
    t.emplace("Slice", [](const array& n) {
      auto& p = as<Slice>(n);
      return std::make_pair(
          std::string("Slice"),
          State{list(p.start()), list(p.stop()), list(p.strides())});
    });
    t.emplace("SliceUpdate", [](const array& n) {
      auto& p = as<SliceUpdate>(n);
      return std::make_pair(
          std::string("SliceUpdate"),
          State{list(p.start()), list(p.stop()), list(p.strides())});
    });
    t.emplace("DynamicSlice", [](const array& n) {
      auto& p = as<DynamicSlice>(n);
      return std::make_pair(std::string("DynamicSlice"),
                            State{list(p.axes()), list(p.slice_size())});
    });
    t.emplace("DynamicSliceUpdate", [](const array& n) {
      return std::make_pair(std::string("DynamicSliceUpdate"),
                            State{list(as<DynamicSliceUpdate>(n).axes())});
    });
    t.emplace("Concatenate", [](const array& n) {
      return std::make_pair(std::string("Concatenate"),
                            State{integer(as<Concatenate>(n).axis())});
    });
    t.emplace("Split", [](const array& n) {
      auto& p = as<Split>(n);
      if (p.like()) {
        throw std::invalid_argument(
            "[export_function] a split whose sizes follow another array "
            "cannot be exported.");
      }
      Shape points = p.indices();
      if (points.empty() && p.num_splits() > 1) {
        // An even split: MLX records the split points.
        int size = n.inputs()[0].shape(p.axis()) / p.num_splits();
        for (int k = 1; k < p.num_splits(); ++k) points.push_back(k * size);
      }
      return std::make_pair(std::string("Split"),
                            State{list(points), integer(p.axis())});
    });
    t.emplace("AsStrided", [](const array& n) {
      auto& p = as<AsStrided>(n);
      return std::make_pair(std::string("AsStrided"),
                            State{list(p.shape()), list(p.strides()),
                                  integer(static_cast<int64_t>(p.offset()))});
    });
    t.emplace("Arange", [](const array& n) {
      auto& p = as<Arange>(n);
      double stop = p.start() + p.step() * n.shape(0);
      return std::make_pair(std::string("Arange"),
                            State{real(p.start()), real(stop), real(p.step())});
    });
    t.emplace("RandomBits", [](const array& n) {
      auto& p = as<RandomBits>(n);
      return std::make_pair(std::string("RandomBits"),
                            State{list(p.shape()), integer(p.width())});
    });
    auto reduce = [](const array& n) {
      auto& p = as<Reduce>(n);
      // MLX's order: And, Or, Sum, Prod, Min, Max.
      static const int mlx_type[] = {0, 1, 2, 3, 5, 4};
      return std::make_pair(std::string("Reduce"),
                            State{integer(mlx_type[p.type()]), list(p.axes())});
    };
    for (auto n : {"ReduceAnd", "ReduceOr", "ReduceSum", "ReduceProd",
                   "ReduceMax", "ReduceMin"}) {
      t.emplace(n, reduce);
    }
    auto arg = [](const array& n) {
      auto& p = as<ArgReduce>(n);
      return std::make_pair(
          std::string("ArgReduce"),
          State{integer(p.type() == ArgReduce::ArgMin ? 0 : 1),
                integer(p.axis())});
    };
    t.emplace("ArgMin", arg);
    t.emplace("ArgMax", arg);
    auto scan = [](const array& n) {
      auto& p = as<Scan>(n);
      // MLX's order: Max, Min, Sum, Prod, LogAddExp.
      static const int mlx_type[] = {2, 3, 0, 1, 4};
      return std::make_pair(
          std::string("Scan"),
          State{integer(mlx_type[p.type()]), integer(p.axis()),
                integer(p.reverse()), integer(p.inclusive())});
    };
    for (auto n : {"CumSum", "CumProd", "CumMax", "CumMin", "CumLogSumExp"}) {
      t.emplace(n, scan);
    }
    for (auto n : {"Sort", "ArgSort"}) {
      t.emplace(n, [n](const array& node) {
        return std::make_pair(
            std::string(n), State{integer(as<AxisSortPrimitive>(node).axis())});
      });
    }
    for (auto n : {"Partition", "ArgPartition"}) {
      t.emplace(n, [n](const array& node) {
        auto& p = as<AxisSortPrimitive>(node);
        return std::make_pair(std::string(n),
                              State{integer(p.kth()), integer(p.axis())});
      });
    }
    t.emplace("SearchSorted", [](const array& n) {
      return std::make_pair(std::string("SearchSorted"),
                            State{integer(as<SearchSorted>(n).right())});
    });
    t.emplace("Softmax", [](const array& n) {
      return std::make_pair(std::string("Softmax"),
                            State{integer(as<Softmax>(n).precise())});
    });
    t.emplace("Gather", [](const array& n) {
      auto& p = as<Gather>(n);
      return std::make_pair(std::string("Gather"),
                            State{list(p.axes()), list(p.slice_sizes())});
    });
    t.emplace("GatherAxis", [](const array& n) {
      return std::make_pair(std::string("GatherAxis"),
                            State{integer(as<GatherAxis>(n).axis())});
    });
    auto scatter = [](const array& n) {
      auto& p = as<Scatter>(n);
      // MLX's order: Max, Min, Sum, Prod, None.
      int r = 4;
      switch (p.reduce()) {
        case ScatterReduce::None: r = 4; break;
        case ScatterReduce::Sum: r = 2; break;
        case ScatterReduce::Prod: r = 3; break;
        case ScatterReduce::Max: r = 0; break;
        case ScatterReduce::Min: r = 1; break;
      }
      return std::make_pair(std::string("Scatter"),
                            State{integer(r), list(p.axes())});
    };
    for (auto n :
         {"Scatter", "ScatterSum", "ScatterProd", "ScatterMax", "ScatterMin"}) {
      t.emplace(n, scatter);
    }
    auto scatter_axis = [](const array& n) {
      auto& p = as<ScatterAxis>(n);
      if (p.reduce() != ScatterReduce::None &&
          p.reduce() != ScatterReduce::Sum) {
        throw std::invalid_argument(
            std::string("[export_function] Unable to serialize primitive ") +
            n.primitive().name() +
            " (MLX has no such reduction along an axis).");
      }
      return std::make_pair(
          std::string("ScatterAxis"),
          State{integer(p.reduce() == ScatterReduce::Sum ? 0 : 1),
                integer(p.axis())});
    };
    t.emplace("ScatterAxis", scatter_axis);
    t.emplace("ScatterAxisSum", scatter_axis);
    t.emplace("AddMM", [](const array& n) {
      auto& p = as<AddMM>(n);
      return std::make_pair(std::string("AddMM"),
                            State{real(p.alpha()), real(p.beta())});
    });
    t.emplace("Convolution", [](const array& n) {
      auto& p = as<Convolution>(n);
      return std::make_pair(
          std::string("Convolution"),
          State{list(p.stride()), list(p.padding_lo()), list(p.padding_hi()),
                list(p.kernel_dilation()), list(p.input_dilation()),
                integer(p.groups()), integer(p.flip())});
    });
    t.emplace("NumberOfElements", [](const array& n) {
      auto& p = as<NumberOfElements>(n);
      State st{list(p.axes()), integer(0), dtype_value(p.count_dtype())};
      if (p.ddof() == 0)
        return std::make_pair(std::string("NumberOfElements"), st);
      // Shapeless with ddof: MLX's primitive has no ddof (a trace with
      // fixed shapes writes the count as a constant instead).
      st[1] = integer(p.ddof());
      return std::make_pair(std::string("kiln.NumberOfElements"), st);
    });
    t.emplace("FFT", [](const array& n) {
      auto& p = as<FFT>(n);
      if (p.scaling() != FFTNorm::backward) {
        throw std::invalid_argument(
            "[export_function] Unable to serialize primitive FFT with norm "
            "'ortho' or 'forward' (MLX's FFT scales as 'backward' only).");
      }
      bool odd = p.is_real() && p.is_inverse() && p.n_last() % 2 == 1;
      return std::make_pair(std::string("FFT"),
                            State{list(p.axes()), integer(p.is_inverse()),
                                  integer(p.is_real()), integer(odd)});
    });
    fixed("QRF", "QRF", {});
    // MLX writes its general inverse with upper set; it is not read.
    fixed("Inverse", "Inverse", {integer(0), integer(1)});
    t.emplace("TriangularInverse", [](const array& n) {
      return std::make_pair(
          std::string("Inverse"),
          State{integer(1), integer(as<TriangularInverse>(n).upper())});
    });
    t.emplace("Cholesky", [](const array& n) {
      return std::make_pair(std::string("Cholesky"),
                            State{integer(as<Cholesky>(n).upper())});
    });
    t.emplace("SVD", [](const array& n) {
      return std::make_pair(std::string("SVD"),
                            State{integer(as<SVD>(n).compute_uv())});
    });
    t.emplace("Eig", [](const array& n) {
      return std::make_pair(std::string("Eig"),
                            State{integer(as<Eig>(n).vectors())});
    });
    t.emplace("Eigh", [](const array& n) {
      auto& p = as<Eigh>(n);
      return std::make_pair(
          std::string("Eigh"),
          State{text(std::string(1, p.uplo())), integer(p.vectors())});
    });
    // MLX writes no LUF or SegmentedMM and has no Solve primitive.
    fixed("LUF", "kiln.LUF", {});
    fixed("Solve", "kiln.Solve", {});
    fixed("SegmentedMM", "kiln.SegmentedMM", {});
    t.emplace("GatherMM", [](const array& n) {
      return std::make_pair(
          std::string("GatherMM"),
          State{integer(0), integer(as<GatherMM>(n).rhs_sorted())});
    });
    t.emplace("Quantize", [](const array& n) {
      auto& p = as<fast::Quantize>(n);
      return std::make_pair(std::string("Quantize"),
                            State{Value{}, integer(p.group_size()),
                                  integer(p.bits()), integer(0), integer(0)});
    });
    t.emplace("Dequantize", [](const array& n) {
      auto& p = as<fast::Dequantize>(n);
      return std::make_pair(std::string("Quantize"),
                            State{Value{}, integer(p.group_size()),
                                  integer(p.bits()), integer(0), integer(1)});
    });
    t.emplace("DequantizeFp", [](const array& n) {
      auto& p = as<fast::DequantizeFp>(n);
      if (n.inputs().size() != 2) {
        throw std::invalid_argument(
            "[export_function] Unable to serialize primitive DequantizeFp with "
            "nvfp4's global scale (kiln's input is g / 2688, MLX's is g).");
      }
      return std::make_pair(
          std::string("Quantize"),
          State{Value{}, integer(p.group_size()), integer(p.bits()),
                integer(fp_mode(p)), integer(1)});
    });
    t.emplace("QuantizedMatmul", [](const array& n) {
      auto& p = as<fast::QuantizedMatmul>(n);
      return quantized_matmul(p.group_size(), p.bits(), 0, reads_picks(n));
    });
    t.emplace("QuantizedMatmulFp", [](const array& n) {
      auto& p = as<fast::QuantizedMatmulFp>(n);
      return quantized_matmul(p.group_size(), p.bits(), fp_mode(p),
                              reads_picks(n));
    });
    t.emplace("RMSNorm", [](const array& n) {
      return std::make_pair(std::string("RMSNorm"),
                            State{Value{}, real(as<fast::RMSNorm>(n).eps())});
    });
    t.emplace("LayerNorm", [](const array& n) {
      return std::make_pair(std::string("LayerNorm"),
                            State{Value{}, real(as<fast::LayerNorm>(n).eps())});
    });
    t.emplace("RoPE", [](const array& n) {
      auto& p = as<fast::RoPE>(n);
      return std::make_pair(
          std::string("RoPE"),
          State{Value{}, integer(p.dims()), integer(p.traditional()),
                real(p.base()), real(p.scale()), integer(1)});
    });
    t.emplace("ScaledDotProductAttention", [](const array& n) {
      auto& p = as<fast::ScaledDotProductAttention>(n);
      if (p.with_stats()) {
        throw std::invalid_argument(
            "[export_function] Unable to serialize primitive "
            "ScaledDotProductAttention with its log-sum-exp output.");
      }
      return std::make_pair(
          std::string("ScaledDotProductAttention"),
          State{Value{}, real(p.scale()), integer(p.do_causal()),
                integer(p.has_sinks()), integer(0), integer(0)});
    });
    return t;
  }();
  std::string name = node.primitive().name();
  if (name == "Reshape") {
    auto& p = as<Reshape>(node);
    Shape shape =
        shapeless && !p.requested().empty() ? p.requested() : p.shape();
    return {"Reshape", State{list(shape)}};
  }
  auto it = table.find(name);
  if (it == table.end()) {
    throw std::invalid_argument(
        "[export_function] Unable to serialize primitive " + name + ".");
  }
  return it->second(node);
}

} // namespace kiln::detail::mlxfn
