#include "sim/ir/index_map.h"

#include <fmt/format.h>

namespace tpusim {

AffineExpr axis(int a) {
  AffineExpr e;
  e.coeff.assign(a + 1, 0);
  e.coeff[a] = 1;
  return e;
}

AffineExpr constant(int64_t c) { return AffineExpr{c, {}}; }

AffineExpr reversed(int a, int64_t size) {
  AffineExpr e = axis(a);
  e.coeff[a] = -1;
  e.offset = size - 1;
  return e;
}

AffineExpr clamped(int a, int limit) {
  AffineExpr e = axis(a);
  e.min_axis = limit;
  return e;
}

AffineExpr clamped_below(int a, int limit) {
  AffineExpr e = axis(a);
  e.max_axis = limit;
  return e;
}

std::string IndexMap::to_string() const {
  std::string out = "(";
  for (size_t i = 0; i < dims_.size(); ++i) {
    const AffineExpr& e = dims_[i];
    std::string term;
    for (size_t a = 0; a < e.coeff.size(); ++a) {
      if (e.coeff[a] == 0) continue;
      if (!term.empty() || e.coeff[a] < 0) term += e.coeff[a] < 0 ? "-" : "+";
      if (std::abs(e.coeff[a]) != 1) term += fmt::format("{}*", std::abs(e.coeff[a]));
      term += fmt::format("g{}", a);
    }
    if (e.offset != 0 || term.empty())
      term = term.empty() ? fmt::format("{}", e.offset)
                          : fmt::format("{}{}", e.offset, term[0] == '-' ? term : "+" + term);
    if (e.min_axis >= 0) term = fmt::format("min({},g{})", term, e.min_axis);
    if (e.max_axis >= 0) term = fmt::format("max({},g{})", term, e.max_axis);
    out += (i ? "," : "") + term;
  }
  return out + ")";
}

}  // namespace tpusim
