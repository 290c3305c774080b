#include "sim/ir/liveness.h"

#include <algorithm>
#include <map>
#include <set>

namespace tpusim {
namespace {

// One item's use of the arrays: read (before any write in the item) and written.
struct Use {
  std::map<std::string, int64_t> reads, writes;  // name -> bytes
};

void add(std::map<std::string, int64_t>& to, const std::string& name, int64_t bytes) {
  to[name] = std::max(to[name], bytes);
}

using BufferMap = std::map<std::string, std::vector<std::string>>;

// Adds a kernel array's use as the program buffers `buffers` makes of it (program.h).
void add_array(std::map<std::string, int64_t>& to, const Tensor& array, const BufferMap& buffers) {
  if (array.space != MemSpace::hbm) return;
  const int64_t bytes = hbm_tiled_bytes(array.shape, array.dtype);
  const auto it = buffers.find(array.name);
  if (it == buffers.end()) return add(to, array.name, bytes);
  for (const std::string& buffer : it->second)
    add(to, buffer, it->second.size() == 1 ? bytes : 0);  // parts: sized by their other uses
}

Use kernel_use(const Kernel& k, const BufferMap& buffers) {
  Use u;
  for (const BlockSpec& b : k.inputs) add_array(u.reads, b.array, buffers);
  for (const BlockSpec& b : k.outputs) add_array(u.writes, b.array, buffers);
  return u;
}

// A loop's use, as whole arrays (see the header), given which names are read after it.
Use loop_use(const Loop& l, const BufferMap& buffers, const std::set<std::string>& read_later) {
  const std::string slice = "[n]";
  auto whole = [&](const std::string& n) {
    return n.size() > slice.size() && n.compare(n.size() - slice.size(), slice.size(), slice) == 0
               ? n.substr(0, n.size() - slice.size())
               : std::string();
  };
  Use u;
  std::set<std::string> written;
  for (const auto& k : l.body) {
    const Use ku = kernel_use(*k, buffers);
    for (const auto& [n, b] : ku.reads) {
      const std::string w = whole(n);
      if (!w.empty())
        add(u.reads, w, b * l.trips);
      else if (!written.count(n))
        add(u.reads, n, b);  // a carry or a loop-invariant input
    }
    for (const auto& [n, b] : ku.writes) {
      const std::string w = whole(n);
      if (!w.empty()) {
        add(u.writes, w, b * l.trips);
        continue;
      }
      const bool carry = u.reads.count(n) > 0;
      add(u.writes, n, !carry && read_later.count(n) ? b * l.trips : b);
      written.insert(n);
    }
  }
  return u;
}

}  // namespace

Liveness hbm_liveness(const Program& p, const std::function<bool(const ProgramItem&)>& include) {
  std::vector<int> items;
  for (int i = 0; i < static_cast<int>(p.items.size()); ++i)
    if ((!include || include(p.items[i])) && !std::holds_alternative<Collective>(p.items[i].what))
      items.push_back(i);
  // Names read by each item and after it (to tell a loop's stacked outputs from its temporaries).
  std::vector<std::set<std::string>> read_after(items.size() + 1);
  for (int j = static_cast<int>(items.size()) - 1; j >= 0; --j) {
    read_after[j] = read_after[j + 1];
    const ProgramItem& item = p.items[items[j]];
    for (const Kernel* k : kernels_of(item))
      for (const auto& [n, bytes] : kernel_use(*k, item.buffers).reads) read_after[j].insert(n);
  }
  // One span per value: a write that does not read the name (not in place) starts a new value.
  struct Span {
    std::string name;
    int64_t bytes = 0;
    int first = -1, last_read = -1, last_write = -1;
  };
  std::vector<Span> spans;
  std::map<std::string, size_t> current;
  const int end = static_cast<int>(items.size()) - 1;
  for (int j = 0; j <= end; ++j) {
    const ProgramItem& item = p.items[items[j]];
    Use u;
    if (const auto* c = std::get_if<KernelCall>(&item.what))
      u = kernel_use(*c->kernel, item.buffers);
    if (const auto* l = std::get_if<Loop>(&item.what))
      u = loop_use(*l, item.buffers, read_after[j + 1]);
    for (const auto& [n, b] : u.reads) {
      auto it = current.find(n);
      if (it == current.end())  // read before any write: an argument, held from the start
        it = current.emplace(n, spans.size()).first, spans.push_back({n, b, 0, -1, -1});
      Span& s = spans[it->second];
      s.bytes = std::max(s.bytes, b);
      s.last_read = j;
    }
    for (const auto& [n, b] : u.writes) {
      auto it = current.find(n);
      if (it == current.end() || !u.reads.count(n)) {
        current[n] = spans.size();
        spans.push_back({n, b, j, -1, j});
        continue;
      }
      Span& s = spans[it->second];
      s.bytes = std::max(s.bytes, b);
      s.last_write = j;
    }
  }
  // A value written and not read after: the program's output if it is the name's last value
  // (held to the end), else dead at once.
  Liveness out;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    int last = s.last_read;
    if (s.last_write > s.last_read) last = current.at(s.name) == i ? end : s.last_write;
    out.buffers.push_back({s.name, s.bytes, s.first, last});
  }
  int peak = -1;  // of the items considered
  for (int j = 0; j <= end; ++j) {
    int64_t sum = 0;
    for (const LiveBuffer& b : out.buffers)
      if (b.first <= j && j <= b.last) sum += b.bytes;
    if (sum > out.peak_bytes) out.peak_bytes = sum, peak = j;
  }
  if (peak < 0) return out;
  out.peak_item = items[peak];
  for (const LiveBuffer& b : out.buffers)
    if (b.first <= peak && peak <= b.last) out.at_peak.push_back(b);
  std::stable_sort(out.at_peak.begin(), out.at_peak.end(),
                   [](const LiveBuffer& a, const LiveBuffer& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace tpusim
