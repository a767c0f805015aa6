// einsum: parse the equation, take diagonals of repeated labels, sum labels
// nothing else needs, then contract operands left to right (matmul for
// inexact types, multiply + sum otherwise) and transpose to the output order.
#include <algorithm>
#include <cctype>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/utils.h"

namespace kiln {

using detail::invalid;

namespace {

constexpr const char* op = "einsum";
// Labels of the dims an ellipsis stands for, right-aligned across operands.
constexpr int ellipsis_label = 1000;

// One operand: its array and one label per axis.
struct Term {
  array x;
  std::vector<int> labels;
};

// Letters and at most one "..." (returned as -1) of one subscript.
std::vector<int> parse_subscript(const std::string& sub) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < sub.size(); ++i) {
    char ch = sub[i];
    if (ch == '.') {
      if (sub.compare(i, 3, "...") != 0 || ellipsis) {
        invalid(op, "malformed ellipsis in subscript '" + sub + "'.");
      }
      ellipsis = true;
      out.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(ch))) {
      out.push_back(ch);
    } else {
      invalid(op, std::string("subscripts must be letters, got '") + ch +
                      "' in '" + sub + "'.");
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == sep) {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

std::string label_name(int l) {
  return l >= ellipsis_label ? "..." : std::string(1, static_cast<char>(l));
}

int axis_of(const Term& t, int label) {
  auto it = std::find(t.labels.begin(), t.labels.end(), label);
  return it == t.labels.end() ? -1 : static_cast<int>(it - t.labels.begin());
}

// Replace each repeated label by the diagonal of its axes.
void take_diagonals(Term& t, int index, StreamOrDevice s) {
  for (size_t p = 0; p < t.labels.size(); ++p) {
    for (size_t q = p + 1; q < t.labels.size(); ++q) {
      if (t.labels[p] != t.labels[q]) continue;
      int n = t.x.shape(p);
      if (t.x.shape(q) != n) {
        invalid(op, "repeated subscript '" + label_name(t.labels[p]) +
                        "' of operand " + std::to_string(index) +
                        " has sizes " + std::to_string(n) + " and " +
                        std::to_string(t.x.shape(q)) + ".");
      }
      Shape mask_shape(t.x.ndim(), 1);
      mask_shape[p] = mask_shape[q] = n;
      auto mask = reshape(eye(n, n, 0, t.x.dtype(), s), mask_shape, s);
      // One nonzero term per sum, so casting back to the dtype is exact.
      Dtype dt = t.x.dtype();
      auto diag = sum(multiply(t.x, mask, s), static_cast<int>(q), false, s);
      t.x = astype(diag, dt, s);
      t.labels.erase(t.labels.begin() + q);
      --q;
    }
  }
}

// Sum the labels of t that are not in keep.
void sum_unneeded(Term& t, const std::set<int>& keep, StreamOrDevice s) {
  std::vector<int> axes, labels;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.count(t.labels[i])) {
      labels.push_back(t.labels[i]);
    } else {
      axes.push_back(static_cast<int>(i));
    }
  }
  if (axes.empty()) return;
  t.x = sum(t.x, axes, false, s);
  t.labels = labels;
}

// t's axes reordered to `order`, with size-1 axes for labels t lacks.
array align(const Term& t, const std::vector<int>& order, StreamOrDevice s) {
  std::vector<int> perm;
  Shape shape;
  for (int l : order) {
    int ax = axis_of(t, l);
    if (ax >= 0) perm.push_back(ax);
    shape.push_back(ax >= 0 ? t.x.shape(ax) : 1);
  }
  return reshape(transpose(t.x, perm, s), shape, s);
}

Term contract(Term a, Term b, const std::set<int>& needed, StreamOrDevice s) {
  std::set<int> keep_a = needed, keep_b = needed;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  sum_unneeded(a, keep_a, s);
  sum_unneeded(b, keep_b, s);
  std::vector<int> batch, left, right, inner;
  std::map<int, int> size;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    size[l] = a.x.shape(i);
    if (axis_of(b, l) < 0) {
      left.push_back(l);
    } else {
      (needed.count(l) ? batch : inner).push_back(l);
    }
  }
  for (size_t i = 0; i < b.labels.size(); ++i) {
    int l = b.labels[i];
    size[l] = std::max(size[l], b.x.shape(i));
    if (axis_of(a, l) < 0) right.push_back(l);
  }
  std::vector<int> order = batch;
  for (auto* part : {&left, &inner, &right}) {
    order.insert(order.end(), part->begin(), part->end());
  }
  Shape full;
  for (int l : order) full.push_back(size[l]);
  auto lab = [](std::vector<int> v, const std::vector<int>& w) {
    v.insert(v.end(), w.begin(), w.end());
    return v;
  };
  Term out{a.x, lab(lab(batch, left), right)};
  Dtype dt = promote_types(a.x.dtype(), b.x.dtype());
  if (inner.empty() || !is_inexact(dt)) {
    // Broadcasting product, then a sum over the contracted labels.
    auto prod = multiply(align(a, order, s), align(b, order, s), s);
    std::vector<int> axes;
    for (size_t i = 0; i < inner.size(); ++i) {
      axes.push_back(static_cast<int>(batch.size() + left.size() + i));
    }
    out.x = axes.empty() ? prod : sum(prod, axes, false, s);
    return out;
  }
  // (batch, L, C) @ (batch, C, R), with size-1 labels broadcast first.
  auto as_matrix = [&](const Term& t, const std::vector<int>& rows,
                       const std::vector<int>& cols) {
    auto ord = lab(lab(batch, rows), cols);
    Shape target, mat;
    for (int l : batch) target.push_back(size[l]), mat.push_back(size[l]);
    int r = 1, c = 1;
    for (int l : rows) target.push_back(size[l]), r *= size[l];
    for (int l : cols) target.push_back(size[l]), c *= size[l];
    mat.insert(mat.end(), {r, c});
    return reshape(broadcast_to(align(t, ord, s), target, s), mat, s);
  };
  auto prod = matmul(as_matrix(a, left, inner), as_matrix(b, inner, right), s);
  Shape shape;
  for (int l : out.labels) shape.push_back(size[l]);
  out.x = reshape(prod, shape, s);
  return out;
}

} // namespace

namespace {

// An equation checked against its operands: one term per operand (labels
// with ellipsis dims named), the output labels and each label's size.
struct Equation {
  std::vector<Term> terms;
  std::vector<int> out_labels;
  std::map<int, int> sizes;
};

Equation parse_equation(const std::string& subscripts,
                        const std::vector<array>& operands) {
  std::string eq;
  for (char ch : subscripts) {
    if (ch != ' ') eq += ch;
  }
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  auto subs = split(lhs, ',');
  if (subs.size() != operands.size()) {
    invalid(op, "the equation '" + subscripts + "' has " +
                    std::to_string(subs.size()) + " input subscripts but " +
                    std::to_string(operands.size()) + " operands were given.");
  }
  std::vector<Term> terms;
  int max_ell = 0;
  for (size_t i = 0; i < subs.size(); ++i) {
    auto labels = parse_subscript(subs[i]);
    const array& x = operands[i];
    int letters = static_cast<int>(std::count_if(labels.begin(), labels.end(),
                                                 [](int l) { return l >= 0; }));
    bool ell = letters != static_cast<int>(labels.size());
    int nd = static_cast<int>(x.ndim());
    if (ell ? letters > nd : letters != nd) {
      invalid(op, "subscript '" + subs[i] + "' does not fit operand " +
                      std::to_string(i) + ", a " + detail::describe(x) + ".");
    }
    std::vector<int> full;
    int e = nd - letters;
    for (int l : labels) {
      if (l >= 0) {
        full.push_back(l);
      } else {
        for (int j = 0; j < e; ++j) full.push_back(-e + j); // fixed below
      }
    }
    max_ell = std::max(max_ell, ell ? e : 0);
    terms.push_back({x, full});
  }
  // Right-align ellipsis dims: -e + j becomes the label of dim max_ell - e + j.
  for (auto& t : terms) {
    for (int& l : t.labels) {
      if (l < 0) l = ellipsis_label + max_ell + l;
    }
  }
  std::vector<int> ell_labels;
  for (int j = 0; j < max_ell; ++j) ell_labels.push_back(ellipsis_label + j);

  std::map<int, int> count;
  for (auto& t : terms) {
    for (int l : t.labels) ++count[l];
  }
  std::vector<int> out_labels;
  if (arrow == std::string::npos) {
    out_labels = ell_labels;
    for (auto& [l, c] : count) {
      if (c == 1 && l < ellipsis_label) out_labels.push_back(l);
    }
  } else {
    for (int l : parse_subscript(eq.substr(arrow + 2))) {
      if (l < 0) {
        out_labels.insert(out_labels.end(), ell_labels.begin(),
                          ell_labels.end());
        continue;
      }
      if (!count.count(l)) {
        invalid(op, "output subscript '" + label_name(l) +
                        "' does not appear in the inputs.");
      }
      if (std::count(out_labels.begin(), out_labels.end(), l)) {
        invalid(op, "output subscript '" + label_name(l) + "' is repeated.");
      }
      out_labels.push_back(l);
    }
  }
  // Sizes of labels shared across operands must agree or be 1.
  std::map<int, std::pair<int, int>> sizes; // label -> (size, operand)
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t d = 0; d < terms[i].labels.size(); ++d) {
      int l = terms[i].labels[d], n = terms[i].x.shape(d);
      auto it = sizes.find(l);
      if (it == sizes.end() || it->second.first == 1) {
        sizes[l] = {n, static_cast<int>(i)};
      } else if (n != 1 && n != it->second.first) {
        invalid(op, "subscript '" + label_name(l) + "' has size " +
                        std::to_string(it->second.first) + " in operand " +
                        std::to_string(it->second.second) + " but " +
                        std::to_string(n) + " in operand " + std::to_string(i) +
                        ".");
      }
    }
  }
  Equation e{std::move(terms), std::move(out_labels), {}};
  for (auto& [l, sz] : sizes) e.sizes[l] = sz.first;
  return e;
}

} // namespace

array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s) {
  auto [terms, out_labels, sizes] = parse_equation(subscripts, operands);
  std::set<int> out_set(out_labels.begin(), out_labels.end());
  for (size_t i = 0; i < terms.size(); ++i) {
    take_diagonals(terms[i], static_cast<int>(i), s);
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::set<int> needed = out_set;
    for (size_t j = i + 1; j < terms.size(); ++j) {
      needed.insert(terms[j].labels.begin(), terms[j].labels.end());
    }
    acc = contract(acc, terms[i], needed, s);
  }
  sum_unneeded(acc, out_set, s);
  std::vector<int> perm;
  for (int l : out_labels) perm.push_back(axis_of(acc, l));
  return transpose(acc.x, perm, s);
}

namespace {

// The cost model MLX reports (opt_einsum's): a contraction over the labels
// `labels` of `terms` operands costs size * max(terms - 1, 1), plus size
// again when it sums a label away.
double flop_count(const std::set<int>& labels, bool inner, int terms,
                  const std::map<int, int>& sizes) {
  double size = 1;
  for (int l : labels) size *= sizes.at(l);
  return size * std::max(terms - 1, 1) + (inner ? size : 0);
}

double size_of(const std::set<int>& labels, const std::map<int, int>& sizes) {
  double size = 1;
  for (int l : labels) size *= sizes.at(l);
  return size;
}

std::string with_width(const std::string& name, const std::string& value) {
  return std::string(name.size() < 22 ? 22 - name.size() : 0, ' ') + name +
         ":  " + value + "\n";
}

std::string integer_text(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(0) << v;
  return os.str();
}

} // namespace

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands) {
  auto eq = parse_equation(subscripts, operands);
  std::vector<std::set<int>> sets;
  std::set<int> all;
  for (auto& t : eq.terms) {
    sets.emplace_back(t.labels.begin(), t.labels.end());
    all.insert(t.labels.begin(), t.labels.end());
  }
  std::set<int> out(eq.out_labels.begin(), eq.out_labels.end());
  int n = static_cast<int>(sets.size());
  double naive = flop_count(all, all.size() > out.size(), n, eq.sizes);
  std::vector<std::vector<int>> path;
  double optimized = 0;
  size_t scaling = 0;
  if (n == 1) {
    path.push_back({0});
    optimized = naive;
    scaling = all.size();
  }
  // Greedy: contract the pair whose result shrinks memory the most (the
  // earliest pair on ties); the result joins the end of the list.
  while (sets.size() > 1) {
    double best_cost = 0;
    int bi = -1, bj = -1;
    std::set<int> best_result, best_union;
    for (size_t i = 0; i < sets.size(); ++i) {
      for (size_t j = i + 1; j < sets.size(); ++j) {
        std::set<int> keep = out;
        for (size_t k = 0; k < sets.size(); ++k) {
          if (k != i && k != j) keep.insert(sets[k].begin(), sets[k].end());
        }
        std::set<int> uni = sets[i], result;
        uni.insert(sets[j].begin(), sets[j].end());
        for (int l : uni) {
          if (keep.count(l)) result.insert(l);
        }
        double cost = size_of(result, eq.sizes) - size_of(sets[i], eq.sizes) -
                      size_of(sets[j], eq.sizes);
        if (bi < 0 || cost < best_cost) {
          best_cost = cost;
          bi = static_cast<int>(i);
          bj = static_cast<int>(j);
          best_result = result;
          best_union = uni;
        }
      }
    }
    optimized += flop_count(best_union, best_union.size() > best_result.size(),
                            2, eq.sizes);
    scaling = std::max(scaling, best_union.size());
    path.push_back({bi, bj});
    sets.erase(sets.begin() + bj);
    sets.erase(sets.begin() + bi);
    sets.push_back(best_result);
  }
  std::string text =
      with_width("Complete contraction", subscripts) +
      with_width("Naive scaling", std::to_string(all.size())) +
      with_width("Optimized scaling", std::to_string(scaling)) +
      with_width("Naive FLOP count", integer_text(naive)) +
      with_width("Optimized FLOP count", integer_text(optimized));
  return {path, text};
}

} // namespace kiln
