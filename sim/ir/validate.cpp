#include "sim/ir/validate.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/error.h"

namespace tpusim {

std::string format_bytes(int64_t b) {
  const double d = static_cast<double>(b);
  if (b >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", d / (1 << 30));
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", d / (1 << 20));
  if (b >= (int64_t{1} << 10)) return fmt::format("{:.1f} KiB", d / (1 << 10));
  return fmt::format("{} B", b);
}

namespace {

void check_spec(const Kernel& k, const BlockSpec& s, const char* role) {
  const Shape& a = s.array.shape;
  const Shape& b = s.block_shape;
  const auto where = [&] {
    return fmt::format("kernel '{}': {} '{}'", k.name, role, s.array.name);
  };
  if (a.size() != b.size())
    throw Error(fmt::format("{}: block {} has rank {} but the array {} has rank {}", where(),
                            to_string(b), b.size(), to_string(a), a.size()));
  if (s.index.rank() != b.size())
    throw Error(fmt::format("{}: index map {} has {} results for a rank-{} block", where(),
                            s.index.to_string(), s.index.rank(), b.size()));
  if (s.buffer_count < 1)
    throw Error(fmt::format("{}: buffer count {} must be at least 1", where(), s.buffer_count));
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] < 1 || b[i] > a[i])
      throw Error(fmt::format("{}: block {} does not fit array {} in dim {}", where(), to_string(b),
                              to_string(a), i));
    const bool tiled_dim = i + 2 >= b.size();
    const int64_t unit = i + 1 == b.size() ? kLanes : kSublanes;
    if (tiled_dim && b[i] != a[i] && b[i] % unit != 0)
      throw Error(fmt::format(
          "{}: block {} is impossible on TPU: dim {} = {} is neither a multiple of {} nor the full "
          "dimension {}",
          where(), to_string(b), i, b[i], unit, a[i]));
    if (a[i] % b[i] != 0)
      throw Error(fmt::format("{}: block {} does not divide array {} in dim {} ({} % {} != 0)",
                              where(), to_string(b), to_string(a), i, a[i], b[i]));
  }
  // Affine maps are monotone in each grid axis, so each block index's range over the grid box
  // comes from the box corners in closed form.
  for (size_t d = 0; d < s.index.rank(); ++d) {
    const AffineExpr& e = s.index.dims()[d];
    int64_t lo = e.offset, hi = e.offset;
    for (size_t ax = 0; ax < e.coeff.size(); ++ax) {
      if (ax >= k.grid.size())
        throw Error(fmt::format("{}: index map {} uses grid axis {} of a rank-{} grid", where(),
                                s.index.to_string(), ax, k.grid.size()));
      const int64_t span = e.coeff[ax] * (k.grid[ax] - 1);
      (span < 0 ? lo : hi) += span;
    }
    const int64_t blocks = a[d] / b[d];
    if (lo < 0 || hi >= blocks)
      throw Error(fmt::format("{}: index map {} reaches block {}..{} in dim {}, outside 0..{}",
                              where(), s.index.to_string(), lo, hi, d, blocks - 1));
  }
}

}  // namespace

void check_block_shapes(const Kernel& k) {
  if (k.grid.empty()) throw Error(fmt::format("kernel '{}': empty grid", k.name));
  for (int64_t g : k.grid)
    if (g < 1) throw Error(fmt::format("kernel '{}': grid dim of size {}", k.name, g));
  for (const BlockSpec& s : k.inputs) check_spec(k, s, "input");
  for (const BlockSpec& s : k.outputs) check_spec(k, s, "output");
}

VmemUsage vmem_usage(const Kernel& k) {
  VmemUsage u;
  auto add_block = [&](const BlockSpec& s, const char* role) {
    const int64_t one = tiled_bytes(s.block_shape, s.array.dtype);
    u.items.push_back({fmt::format("{} {} block {} {} x{} buffers", role, s.array.name,
                                   to_string(s.block_shape), name(s.array.dtype), s.buffer_count),
                       one * s.buffer_count});
  };
  for (const BlockSpec& s : k.inputs) add_block(s, "input");
  for (const BlockSpec& s : k.outputs) add_block(s, "output");
  for (const Tensor& t : k.scratch)
    u.items.push_back({fmt::format("scratch {} {} {}", t.name, to_string(t.shape), name(t.dtype)),
                       tiled_bytes(t.shape, t.dtype)});

  // Body temporaries are live from their defining op to their last use (program order).
  std::vector<int> def(k.values.size(), -1), last(k.values.size(), -1);
  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    const Op& op = k.body[i];
    for (ValueId v : op.inputs) last[v] = i;
    if (op.output >= 0 && def[op.output] < 0) def[op.output] = i;
  }
  int64_t live = 0, peak = 0;
  std::vector<std::vector<ValueId>> dies(k.body.size());
  for (size_t v = 0; v < k.values.size(); ++v)
    if (k.values[v].kind == ValueKind::temp && def[v] >= 0)
      dies[std::max(def[v], last[v])].push_back(v);
  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    const ValueId out = k.body[i].output;
    if (out >= 0 && k.values[out].kind == ValueKind::temp && def[out] == i)
      live += tiled_bytes(k.values[out].shape, k.values[out].dtype);
    peak = std::max(peak, live);
    for (ValueId v : dies[i]) live -= tiled_bytes(k.values[v].shape, k.values[v].dtype);
  }
  if (peak > 0) u.items.push_back({"peak live body temporaries", peak});
  for (const VmemItem& it : u.items) u.total_bytes += it.bytes;
  return u;
}

void check_vmem(const Kernel& k, const VmemUsage& usage, int64_t limit,
                const std::string& limit_name) {
  if (usage.total_bytes <= limit) return;
  std::vector<VmemItem> items = usage.items;
  std::stable_sort(items.begin(), items.end(),
                   [](const VmemItem& a, const VmemItem& b) { return a.bytes > b.bytes; });
  std::string list;
  for (size_t i = 0; i < items.size() && i < 6; ++i)
    list += fmt::format("{}{} = {}", i ? "; " : "", items[i].what, format_bytes(items[i].bytes));
  if (items.size() > 6) list += fmt::format("; and {} more", items.size() - 6);
  throw VmemError(fmt::format("kernel '{}' needs {} ({} B) of VMEM, over the {} of {} ({} B): {}",
                              k.name, format_bytes(usage.total_bytes), usage.total_bytes,
                              limit_name, format_bytes(limit), limit, list));
}

}  // namespace tpusim
