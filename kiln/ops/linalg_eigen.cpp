// kiln::linalg: eigendecompositions of symmetric and general matrices.
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_impl.h"
#include "kiln/ops/utils.h"
#include "kiln/primitives/linalg.h"

namespace kiln::linalg {

namespace {

char uplo_of(const char* op, const std::string& uplo) {
  if (uplo != "L" && uplo != "U") {
    detail::invalid(op, "UPLO must be 'L' or 'U', got '" + uplo + "'.");
  }
  return uplo[0];
}

std::vector<array> eigh_outputs(const char* op, const array& a,
                                const std::string& uplo, bool vectors,
                                StreamOrDevice s) {
  detail::check_matrices(op, a, true, true);
  auto p = detail::placed<Eigh>(to_stream(s), {a}, uplo_of(op, uplo),
                                 vectors);
  auto shapes = p->output_shapes({a});
  std::vector<Dtype> dtypes(shapes.size(), a.dtype());
  // A Hermitian matrix's eigenvalues are real: float32 for complex64.
  if (a.dtype() == complex64) dtypes[0] = float32;
  return array::make_arrays(shapes, dtypes, p, {a});
}

std::vector<array> eig_outputs(const char* op, const array& a, bool vectors,
                               StreamOrDevice s) {
  detail::check_matrices(op, a, true, true);
  auto p = detail::placed<Eig>(to_stream(s), {a}, vectors);
  auto shapes = p->output_shapes({a});
  std::vector<Dtype> dtypes(shapes.size(), complex64);
  return array::make_arrays(shapes, dtypes, p, {a});
}

} // namespace

std::pair<array, array> eigh(const array& a, const std::string& uplo,
                             StreamOrDevice s) {
  auto outs = eigh_outputs("linalg::eigh", a, uplo, true, s);
  return {outs[0], outs[1]};
}

array eigvalsh(const array& a, const std::string& uplo, StreamOrDevice s) {
  return eigh_outputs("linalg::eigvalsh", a, uplo, false, s)[0];
}

std::pair<array, array> eig(const array& a, StreamOrDevice s) {
  auto outs = eig_outputs("linalg::eig", a, true, s);
  return {outs[0], outs[1]};
}

array eigvals(const array& a, StreamOrDevice s) {
  return eig_outputs("linalg::eigvals", a, false, s)[0];
}

} // namespace kiln::linalg
