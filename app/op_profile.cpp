#include "app/op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "app/report.h"
#include "app/version.h"

namespace tpusim {
namespace {

int64_t at(const std::array<int64_t, kNumCauses>& t, Cause c) { return t[static_cast<int>(c)]; }

std::string bound(const KernelStats& k, const ChipSpec& chip) {
  // On the sloped roof: its transfers keep HBM at least 90% busy, whatever overlaps them.
  const double bytes = static_cast<double>(k.hbm_read_bytes + k.hbm_write_bytes);
  if (k.cycles > 0 && bytes / k.cycles >= 0.9 * chip.hbm_bytes_per_cycle()) return "HBM";
  const int64_t busy = at(k.time, Cause::busy);
  const std::array<std::pair<const char*, int64_t>, 4> groups = {{
      {"compute", busy},
      {"HBM", at(k.time, Cause::dma_wait)},
      {"latency", at(k.time, Cause::dependency) + at(k.time, Cause::mxu_fill_drain)},
      {"overhead", at(k.time, Cause::step_overhead) + at(k.time, Cause::loop_overhead)},
  }};
  const auto top = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.second < b.second;
  });
  if (top->second == 0) return "-";
  if (top != groups.begin()) return top->first;
  // The MXUs' share of the busy time: their passes at the chip's MXU rate.
  const double mxu_cycles = static_cast<double>(k.mxu_pass_flops) / chip.mxu_flops_per_cycle();
  return mxu_cycles >= 0.5 * static_cast<double>(busy) ? "MXU" : "VPU";
}

}  // namespace

std::vector<OpProfileRow> op_profile(const RunResult& r, const ChipSpec& chip) {
  // Kernels of one name and origin are one op (a forward kernel and its remat recompute are
  // built twice): their calls, time and counters add up.
  std::vector<KernelStats> ops;
  for (const KernelStats& k : r.kernels) {
    auto same = std::find_if(ops.begin(), ops.end(), [&](const KernelStats& o) {
      return o.name == k.name && o.origin == k.origin;
    });
    if (same == ops.end()) {
      ops.push_back(k);
      continue;
    }
    same->calls += k.calls;
    same->cycles += k.cycles;
    same->flops += k.flops;
    same->mxu_pass_flops += k.mxu_pass_flops;
    same->hbm_read_bytes += k.hbm_read_bytes;
    same->hbm_write_bytes += k.hbm_write_bytes;
    for (int c = 0; c < kNumCauses; ++c) same->time[c] += k.time[c];
  }
  std::vector<OpProfileRow> rows;
  for (const KernelStats& k : ops) {
    OpProfileRow row;
    row.name = k.name;
    row.origin = k.origin == Origin::pallas ? "pallas" : "xla";
    row.calls = k.calls;
    row.time_s = chip.cycles_to_s(k.cycles);
    row.share = r.cycles > 0 ? static_cast<double>(k.cycles) / r.cycles : 0;
    row.flops = static_cast<double>(k.flops);
    row.hbm_bytes = static_cast<double>(k.hbm_read_bytes + k.hbm_write_bytes);
    row.bound = bound(k, chip);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const OpProfileRow& a, const OpProfileRow& b) {
    return a.time_s > b.time_s;
  });
  return rows;
}

std::string op_profile_text(const std::vector<OpProfileRow>& rows) {
  std::string out = fmt::format("{:>10} {:>6} {:>5}  {:>12} {:>11} {:>9}  {:<8} {}\n", "time ms",
                                "share", "calls", "FLOP/s", "HBM B/s", "FLOP/B", "bound", "op");
  for (const OpProfileRow& r : rows)
    out += fmt::format("{:>10.4f} {:>5.1f}% {:>5}  {:>12} {:>11} {:>9.1f}  {:<8} {} [{}]\n",
                       r.time_s * 1e3, 100 * r.share, r.calls, format_si(r.flops_per_s(), "FLOP/s"),
                       format_si(r.hbm_bytes_per_s(), "B/s"), r.intensity(), r.bound, r.name,
                       r.origin);
  return out;
}

std::string op_profile_csv(const std::vector<OpProfileRow>& rows) {
  std::string out =
      "op,origin,calls,time_s,share,flops,hbm_bytes,flops_per_s,hbm_bytes_per_s,"
      "flops_per_byte,bound\n";
  for (const OpProfileRow& r : rows)
    out += fmt::format("{},{},{},{:.9g},{:.6g},{:.9g},{:.9g},{:.6g},{:.6g},{:.6g},{}\n",
                       csv_field(r.name), r.origin, r.calls, r.time_s, r.share, r.flops,
                       r.hbm_bytes, r.flops_per_s(), r.hbm_bytes_per_s(), r.intensity(), r.bound);
  return out;
}

nlohmann::json op_profile_json(const std::vector<OpProfileRow>& rows, const ChipSpec& chip) {
  nlohmann::json j = {{"tool", tool_json()},
                      {"chip", chip.name},
                      {"peak_flops_per_s", chip.peak_bf16_flops},
                      {"hbm_bytes_per_s", chip.hbm_effective_bytes_per_s()},
                      {"ops", nlohmann::json::array()}};
  for (const OpProfileRow& r : rows)
    j["ops"].push_back({{"op", r.name},
                        {"origin", r.origin},
                        {"calls", r.calls},
                        {"time_s", r.time_s},
                        {"share", r.share},
                        {"flops", r.flops},
                        {"hbm_bytes", r.hbm_bytes},
                        {"flops_per_s", r.flops_per_s()},
                        {"hbm_bytes_per_s", r.hbm_bytes_per_s()},
                        {"flops_per_byte", r.intensity()},
                        {"bound", r.bound}});
  return j;
}

std::string op_profile_file(const std::string& path, const std::vector<OpProfileRow>& rows,
                            const ChipSpec& chip) {
  if (path.ends_with(".csv")) return op_profile_csv(rows);
  if (path.ends_with(".json")) return json_text(op_profile_json(rows, chip), 2) + "\n";
  return op_profile_text(rows);
}

}  // namespace tpusim
