#include "sim/ir/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {
int64_t ceil_to(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t leading(const Shape& s) {
  int64_t n = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) n *= s[i];
  return n;
}
int64_t minor(const Shape& s) { return s.empty() ? 1 : s.back(); }
int64_t second_minor(const Shape& s) { return s.size() < 2 ? 1 : s[s.size() - 2]; }
}  // namespace

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool broadcast_into(Shape& out, const Shape& s) {
  if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), 1);
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t& o = out[out.size() - s.size() + i];
    if (o == 1)
      o = s[i];
    else if (s[i] != 1 && s[i] != o)
      return false;
  }
  return true;
}

std::string to_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

int64_t tiled_bytes(const Shape& s, DType t) {
  const int64_t packing = 4 / byte_size(t) > 0 ? 4 / byte_size(t) : 1;
  const int64_t rows = ceil_to(second_minor(s), kSublanes * packing);
  const int64_t cols = ceil_to(minor(s), kLanes);
  return leading(s) * rows * cols * byte_size(t);
}

int64_t hbm_tiled_bytes(const Shape& s, DType t) {
  Shape dims;
  for (int64_t d : s)
    if (d != 1) dims.push_back(d);
  const int64_t size = byte_size(t);
  int64_t elements = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t n = dims[d];
    if (d + 1 == dims.size()) n = ceil_to(n, kLanes);
    if (d + 2 == dims.size()) n = ceil_to(n, kSublanes * 4 / size);
    elements *= n;
  }
  return elements * size;
}

int64_t vreg_count(const Shape& s) {
  return leading(s) * ((second_minor(s) + kSublanes - 1) / kSublanes) *
         ((minor(s) + kLanes - 1) / kLanes);
}

}  // namespace tpusim
