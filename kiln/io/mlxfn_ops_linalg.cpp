// Import rows for the linear algebra, FFT and matrix product families, and
// the few elementwise and counting primitives MLX records as nodes of their
// own (DivMod, Hadamard, NumberOfElements).
#include <algorithm>
#include <memory>

#include "kiln/io/mlxfn_rows.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fft.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/signal.h"
#include "kiln/ops/slicing.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/fft.h"
#include "kiln/primitives/reduction.h"

namespace kiln::detail::mlxfn {

namespace {

using Inputs = std::vector<array>;

// MLX's linear algebra is for real floating matrices; kiln's ops would
// otherwise cast integers, which the file's recorded dtype then rejects
// less clearly.
const array& matrices(const char* name, const Inputs& in, size_t k = 0) {
  if (in[k].ndim() < 2)
    bad(name, "needs matrices, the file gives a " +
                  std::to_string(in[k].ndim()) + "-d input");
  return in[k];
}

// The FFT node MLX records: axes (distinct, in range), inverse, real, and
// for the real inverse whether the output's last transformed axis is odd.
std::vector<array> fft(const State& st, const Inputs& in, Stream s) {
  arity("FFT", in, 1, 1);
  const array& x = in[0];
  int nd = static_cast<int>(x.ndim());
  std::vector<int> axes;
  for (int64_t ax : st[0].v) {
    if (ax < 0 || ax >= nd) bad("FFT", "an axis is out of range");
    if (std::find(axes.begin(), axes.end(), int(ax)) != axes.end()) {
      bad("FFT", "an axis is repeated");
    }
    axes.push_back(static_cast<int>(ax));
  }
  if (axes.empty()) bad("FFT", "no axes");
  bool inverse = st[1].i, real = st[2].i, odd = st[3].i;
  Dtype want = real && !inverse ? float32 : complex64;
  if (x.dtype() != want) {
    bad("FFT", "takes " + dtype_name(want) + ", the file gives " +
                   dtype_name(x.dtype()));
  }
  int n_last = 0;
  if (real && inverse) n_last = 2 * (x.shape(axes.back()) - 1) + (odd ? 1 : 0);
  if (real && inverse && n_last < 1) bad("FFT", "an empty real inverse");
  // MLX's primitive scales the inverse by 1/n and not the forward one.
  return {
      detail::fft_node(x, axes, inverse, real, FFTNorm::backward, n_last, s)};
}

// A block mask (..., tx, ty) spread over the (..., x, y) entries it covers.
array spread(const array& mask, int block, int x, int y, Stream s) {
  Shape sh = mask.shape();
  int nd = static_cast<int>(sh.size());
  int tx = sh[nd - 2], ty = sh[nd - 1];
  Shape wide = sh, flat = sh;
  wide.pop_back(), wide.pop_back();
  flat.pop_back(), flat.pop_back();
  Shape grid = wide;
  grid.insert(grid.end(), {tx, 1, ty, 1});
  wide.insert(wide.end(), {tx, block, ty, block});
  flat.insert(flat.end(), {tx * block, ty * block});
  auto m = reshape(broadcast_to(reshape(mask, grid, s), wide, s), flat, s);
  Shape start(flat.size(), 0), stop = flat;
  stop[nd - 2] = x, stop[nd - 1] = y;
  return slice(m, start, stop, s);
}

// x with each masked-out block zeroed (a bool mask) or scaled (a float one).
array masked(const array& x, const array& mask, int block, Stream s) {
  auto m = spread(mask, block, x.shape(-2), x.shape(-1), s);
  if (m.dtype() == bool_) return where(m, x, zeros_like(x, s), s);
  return multiply(x, m, s);
}

// MLX's BlockMaskedMM: inputs a, b, then the output's mask when there is
// one, then both operands' masks when there are; each mask holds one
// entry per block_size x block_size block (the last partial).
std::vector<array> block_masked_mm(const State& st, const Inputs& in,
                                   Stream s) {
  arity("BlockMaskedMM", in, 3, 5);
  int block = static_cast<int>(st[0].i);
  if (block < 1) bad("BlockMaskedMM", "block size " + std::to_string(block));
  array a = matrices("BlockMaskedMM", in, 0),
        b = matrices("BlockMaskedMM", in, 1);
  bool out_mask = in.size() == 3 || in.size() == 5;
  bool operand_masks = in.size() >= 4;
  auto tiles = [block](int n) { return (n + block - 1) / block; };
  auto check = [&](const array& m, int x, int y, const char* which) {
    if (m.ndim() < 2 || m.shape(-2) != tiles(x) || m.shape(-1) != tiles(y)) {
      bad("BlockMaskedMM", std::string("the ") + which +
                               " mask does not have one entry per block");
    }
  };
  int M = a.shape(-2), K = a.shape(-1), N = b.shape(-1);
  if (b.ndim() < 2 || b.shape(-2) != K)
    bad("BlockMaskedMM", "a and b do not multiply");
  if (operand_masks) {
    const array& ml = in[out_mask ? 3 : 2];
    const array& mr = in[out_mask ? 4 : 3];
    check(ml, M, K, "left operand's");
    check(mr, K, N, "right operand's");
    a = masked(a, ml, block, s);
    b = masked(b, mr, block, s);
  }
  auto out = matmul(a, b, s);
  if (out_mask) {
    check(in[2], M, N, "output's");
    out = masked(out, in[2], block, s);
  }
  return {out};
}

// MLX's NumberOfElements (axes, inverted, dtype), or kiln's own with ddof
// (axes, ddof, dtype), which a shapeless var writes.
std::vector<array> number_of_elements(const State& st, const Inputs& in,
                                      bool kiln_ddof, Stream s) {
  arity("NumberOfElements", in, 1, 1);
  auto axes =
      normalize_axes({st[0].v.begin(), st[0].v.end()},
                     static_cast<int>(in[0].ndim()), "NumberOfElements");
  Dtype dt = st[2].dt;
  if (dt == bool_ || dt == complex64) {
    bad("NumberOfElements", "a count of dtype " + dtype_name(dt));
  }
  int ddof = kiln_ddof ? static_cast<int>(st[1].i) : 0;
  auto p = std::make_shared<NumberOfElements>(s, std::move(axes), ddof, dt);
  array n(Shape{}, dt, std::move(p), {in[0]});
  // MLX's inverted count is mean's factor, 1 / n.
  return {!kiln_ddof && st[1].i ? divide(array(1.0f, dt), n, s) : n};
}

} // namespace

void put_linalg_rows(Rows& t) {
  auto put = [&](const char* n, Row r) { t.insert_or_assign(n, std::move(r)); };
  put("QRF",
      {"", [](const State&, const Inputs& in, const NodeInfo&, Stream s) {
         arity("QRF", in, 1, 1);
         auto [q, r] = linalg::qr(matrices("QRF", in), s);
         return Inputs{q, r};
       }});
  put("SVD",
      {"b", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("SVD", in, 1, 1);
         return linalg::svd(matrices("SVD", in), bool(st[0].i), s);
       }});
  // (tri, upper): a triangular inverse reads the upper or lower triangle.
  put("Inverse",
      {"bb", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("Inverse", in, 1, 1);
         const array& a = matrices("Inverse", in);
         return Inputs{st[0].i ? linalg::tri_inv(a, bool(st[1].i), s)
                               : linalg::inv(a, s)};
       }});
  put("Cholesky",
      {"b", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("Cholesky", in, 1, 1);
         return Inputs{
             linalg::cholesky(matrices("Cholesky", in), bool(st[0].i), s)};
       }});
  put("Eig",
      {"b", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("Eig", in, 1, 1);
         const array& a = matrices("Eig", in);
         if (!st[0].i) return Inputs{linalg::eigvals(a, s)};
         auto [w, v] = linalg::eig(a, s);
         return Inputs{w, v};
       }});
  put("Eigh",
      {"sb", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("Eigh", in, 1, 1);
         const array& a = matrices("Eigh", in);
         if (st[0].s != "L" && st[0].s != "U")
           bad("Eigh", "UPLO '" + st[0].s + "'");
         if (!st[1].i) return Inputs{linalg::eigvalsh(a, st[0].s, s)};
         auto [w, v] = linalg::eigh(a, st[0].s, s);
         return Inputs{w, v};
       }});
  // kiln's own, which MLX does not write: LU with its pivots and row order,
  // a solve, and products over segments of the inner axis.
  put("kiln.LUF",
      {"", [](const State&, const Inputs& in, const NodeInfo&, Stream s) {
         arity("kiln.LUF", in, 1, 1);
         return detail::lu_outputs(matrices("kiln.LUF", in), s);
       }});
  put("kiln.Solve",
      {"", [](const State&, const Inputs& in, const NodeInfo&, Stream s) {
         arity("kiln.Solve", in, 2, 2);
         return Inputs{linalg::solve(matrices("kiln.Solve", in), in[1], s)};
       }});
  put("kiln.SegmentedMM",
      {"", [](const State&, const Inputs& in, const NodeInfo&, Stream s) {
         arity("kiln.SegmentedMM", in, 3, 3);
         return Inputs{segmented_mm(in[0], in[1], in[2], s)};
       }});
  put("FFT", {"Lbbb", [](const State& st, const Inputs& in, const NodeInfo&,
                         Stream s) { return fft(st, in, s); }});
  // (left_sorted, right_sorted): hints that the indices are sorted.
  put("GatherMM",
      {"bb", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("GatherMM", in, 4, 4);
         return Inputs{gather_mm(in[0], in[1], in[2], in[3], bool(st[1].i), s)};
       }});
  put("BlockMaskedMM",
      {"i", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         return block_masked_mm(st, in, s);
       }});
  put("DivMod", {"",
                 [](const State&, const Inputs& in, const NodeInfo&, Stream s) {
                   arity("DivMod", in, 2, 2);
                   return Inputs{floor_divide(in[0], in[1], s),
                                 remainder(in[0], in[1], s)};
                 }});
  put("Hadamard",
      {"f", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         arity("Hadamard", in, 1, 1);
         return Inputs{hadamard_transform(in[0], float(st[0].f), s)};
       }});
  put("NumberOfElements",
      {"SbD", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         return number_of_elements(st, in, false, s);
       }});
  put("kiln.NumberOfElements",
      {"SiD", [](const State& st, const Inputs& in, const NodeInfo&, Stream s) {
         return number_of_elements(st, in, true, s);
       }});
}

} // namespace kiln::detail::mlxfn
