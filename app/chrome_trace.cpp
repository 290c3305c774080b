#include "app/chrome_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "app/report.h"
#include "app/version.h"

namespace tpusim {
namespace {

constexpr size_t kLongTrace = 1'000'000;   // events: a trace that reports its progress
constexpr int64_t kCounterBuckets = 2000;  // samples of the HBM counter over the run

std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& grid) {
  std::vector<int64_t> g(grid.size());
  for (int d = static_cast<int>(grid.size()) - 1; d >= 0; --d) {
    g[d] = flat % grid[d];
    flat /= grid[d];
  }
  return g;
}

std::string quoted(const std::string& s) { return json_text(nlohmann::json(s)); }

class Writer {
 public:
  Writer(const RunResult& r, std::ostream& out)
      : r_(r), out_(out), ns_per_cycle_(1e9 / r.clock_hz) {
    program_tid_ = static_cast<int>(r.units.size());
  }

  int64_t ns(int64_t cycles) const { return std::llround(cycles * ns_per_cycle_); }
  // A unit's process: its TensorCore's, or the chip's for the shared units.
  int pid(int unit) const { return r_.units[unit].core + 1; }

  // One trace event; `fields` follow the leading comma-separated pairs.
  template <typename... Args>
  void event(fmt::format_string<Args...> f, Args&&... args) {
    buf_.push_back(first_ ? '\n' : ',');
    first_ = false;
    fmt::format_to(std::back_inserter(buf_), f, std::forward<Args>(args)...);
    if (buf_.size() > (1 << 20)) flush();
  }
  // Trace time: whole nanoseconds as microseconds with three decimals.
  std::string ts(int64_t ns) const { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

  void begin(const nlohmann::json& metadata) {
    nlohmann::json meta = {{"chip", r_.chip},
                           {"clock_hz", r_.clock_hz},
                           {"cycles", r_.cycles},
                           {"time_s", r_.time_s},
                           {"tool", tool_json()}};
    meta.update(metadata);
    fmt::format_to(std::back_inserter(buf_), R"({{"displayTimeUnit":"ns","metadata":{},)",
                   json_text(meta));
    fmt::format_to(std::back_inserter(buf_), R"("traceEvents":[)");
  }
  void processes_and_threads() {
    int cores = 0;
    for (const UnitInfo& u : r_.units) cores = std::max(cores, u.core + 1);
    auto meta = [&](const char* name, int pid, int tid, const std::string& args) {
      event(R"({{"args":{},"name":"{}","ph":"M","pid":{},"tid":{}}})", args, name, pid, tid);
    };
    meta("process_name", 0, 0, fmt::format(R"({{"name":{}}})", quoted("chip " + r_.chip)));
    meta("process_sort_index", 0, 0, fmt::format(R"({{"sort_index":{}}})", cores));
    for (int c = 0; c < cores; ++c) {
      meta("process_name", c + 1, 0, fmt::format(R"({{"name":"TensorCore {}"}})", c));
      meta("process_sort_index", c + 1, 0, fmt::format(R"({{"sort_index":{}}})", c));
    }
    for (size_t u = 0; u < r_.units.size(); ++u) {
      const int p = pid(static_cast<int>(u));
      meta("thread_name", p, static_cast<int>(u),
           fmt::format(R"({{"name":{}}})", quoted(r_.units[u].name)));
      meta("thread_sort_index", p, static_cast<int>(u), fmt::format(R"({{"sort_index":{}}})", u));
    }
    const char* tracks[] = {"program", "stages", "collectives"};
    for (int t = 0; t < 3; ++t) {
      meta("thread_name", 1, program_tid_ + t, fmt::format(R"({{"name":"{}"}})", tracks[t]));
      meta("thread_sort_index", 1, program_tid_ + t, fmt::format(R"({{"sort_index":{}}})", t - 3));
    }
  }

  void timeline_events(const TraceProgress& progress) {
    std::vector<std::string> labels, items, stages;
    for (const std::string& l : r_.labels) labels.push_back(quoted(l));
    for (const ItemResult& i : r_.items) {
      items.push_back(quoted(i.name));
      stages.push_back(quoted(i.stage));
    }
    const size_t n = r_.events.size(), tenth = n >= kLongTrace && progress ? n / 10 : 0;
    std::string args;
    for (size_t i = 0; i < n; ++i) {
      const TimelineEvent& e = r_.events[i];
      args.clear();
      auto add = [&](const std::string& kv) { args += (args.empty() ? "" : ",") + kv; };
      if (e.cause != Cause::busy) add(fmt::format(R"("cause":"{}")", name(e.cause)));
      if (e.item >= 0) {
        const ItemResult& item = r_.items[e.item];
        if (e.step >= 0 && item.kernel >= 0)
          add(fmt::format(R"("grid":[{}])",
                          fmt::join(unflatten(e.step, r_.kernels[item.kernel].grid), ",")));
        add(fmt::format(R"("item":{},"stage":{})", items[e.item], stages[e.item]));
      }
      const int64_t start = ns(e.start);
      event(R"({{"args":{{{}}},"cat":"{}","dur":{},"name":{},"ph":"X","pid":{},"tid":{},"ts":{}}})",
            args,
            e.op == kFastForwardedSpan ? "fast-forward"
            : e.cause == Cause::busy   ? "op"
                                       : "stall",
            ts(ns(e.end) - start), labels[e.label], pid(e.unit), e.unit, ts(start));
      if (tenth > 0 && (i + 1) % tenth == 0) progress(i + 1, n);
    }
  }

  // A slice per program item, the stages as runs of items, flows along the dependencies.
  void program() {
    auto track = [&](const ItemResult& i) { return program_tid_ + (i.kernel >= 0 ? 0 : 2); };
    for (const ItemResult& i : r_.items) {
      const std::string kernel =
          i.kernel >= 0 ? "," + std::string(R"("kernel":)") + quoted(r_.kernels[i.kernel].name)
                        : "";
      event(R"({{"args":{{"stage":{}{}}},"cat":"item","dur":{},"name":{},"ph":"X","pid":1,)"
            R"("tid":{},"ts":{}}})",
            quoted(i.stage), kernel, ts(ns(i.start + i.cycles) - ns(i.start)), quoted(i.name),
            track(i), ts(ns(i.start)));
    }
    for (size_t a = 0; a < r_.items.size();) {
      if (r_.items[a].kernel < 0) {
        ++a;
        continue;
      }
      size_t b = a + 1;
      int64_t end = r_.items[a].start + r_.items[a].cycles;
      for (; b < r_.items.size() &&
             (r_.items[b].kernel < 0 || r_.items[b].stage == r_.items[a].stage);
           ++b)
        if (r_.items[b].kernel >= 0) end = r_.items[b].start + r_.items[b].cycles;
      event(R"({{"cat":"stage","dur":{},"name":{},"ph":"X","pid":1,"tid":{},"ts":{}}})",
            ts(ns(end) - ns(r_.items[a].start)), quoted(r_.items[a].stage), program_tid_ + 1,
            ts(ns(r_.items[a].start)));
      a = b;
    }
    int id = 0;
    for (const ItemResult& i : r_.items)
      for (int d : i.deps) {
        const ItemResult& dep = r_.items[d];
        const int64_t from = std::max(ns(dep.start), ns(dep.start + dep.cycles) - 1);
        event(R"({{"cat":"dependency","id":{},"name":"waits for","ph":"s","pid":1,"tid":{},)"
              R"("ts":{}}})",
              id, track(dep), ts(from));
        event(R"({{"bp":"e","cat":"dependency","id":{},"name":"waits for","ph":"f","pid":1,)"
              R"("tid":{},"ts":{}}})",
              id, track(i), ts(ns(i.start)));
        ++id;
      }
  }

  // HBM's busy share per interval of the run, and the VMEM of the kernel running on it.
  void counters() {
    const auto hbm = std::find_if(r_.units.begin(), r_.units.end(),
                                  [](const UnitInfo& u) { return u.kind == UnitKind::hbm; });
    if (hbm != r_.units.end() && r_.cycles > 0) {
      const int unit = static_cast<int>(hbm - r_.units.begin());
      const int64_t width =
          std::max<int64_t>(1, (r_.cycles + kCounterBuckets - 1) / kCounterBuckets);
      std::vector<int64_t> busy((r_.cycles + width - 1) / width + 1, 0);
      for (const TimelineEvent& e : r_.events) {
        if (e.unit != unit || e.cause != Cause::busy || e.op == kFastForwardedSpan) continue;
        for (int64_t b = e.start / width;
             b * width < e.end && b < static_cast<int64_t>(busy.size()); ++b)
          busy[b] += std::min(e.end, (b + 1) * width) - std::max(e.start, b * width);
      }
      for (size_t b = 0; b < busy.size(); ++b)
        event(R"({{"args":{{"%":{:.1f}}},"name":"HBM busy","ph":"C","pid":0,"ts":{}}})",
              100.0 * busy[b] / width, ts(ns(static_cast<int64_t>(b) * width)));
    }
    for (const ItemResult& i : r_.items) {
      if (i.kernel < 0) continue;
      const double mib = r_.kernels[i.kernel].vmem.total_bytes / double(1 << 20);
      event(R"({{"args":{{"MiB":{:.2f}}},"name":"VMEM of the running kernel","ph":"C","pid":1,)"
            R"("ts":{}}})",
            mib, ts(ns(i.start)));
      event(R"({{"args":{{"MiB":0}},"name":"VMEM of the running kernel","ph":"C","pid":1,)"
            R"("ts":{}}})",
            ts(ns(i.start + i.cycles)));
    }
  }

  // The spans in a process of their own (pid after the TensorCores'), sorted above them.
  void spans(const std::vector<TraceSpan>& spans, const std::string& process) {
    if (spans.empty()) return;
    int cores = 0;
    for (const UnitInfo& u : r_.units) cores = std::max(cores, u.core + 1);
    const int pid = cores + 1;
    event(R"({{"args":{{"name":{}}},"name":"process_name","ph":"M","pid":{},"tid":0}})",
          quoted(process), pid);
    event(R"({{"args":{{"sort_index":-1}},"name":"process_sort_index","ph":"M","pid":{},"tid":0}})",
          pid);
    std::vector<std::string> tracks;
    for (const TraceSpan& s : spans) {
      auto it = std::find(tracks.begin(), tracks.end(), s.track);
      if (it == tracks.end()) {
        tracks.push_back(s.track);
        event(R"({{"args":{{"name":{}}},"name":"thread_name","ph":"M","pid":{},"tid":{}}})",
              quoted(s.track), pid, tracks.size());
        it = tracks.end() - 1;
      }
      const int64_t start = std::llround(s.start_s * 1e9), dur = std::llround(s.duration_s * 1e9);
      const std::string args = s.part.empty() ? std::string()
                                              : fmt::format(R"("args":{{"part":{},"pass":{}}},)",
                                                            quoted(s.part), quoted(s.pass));
      event(R"({{{}"name":{},"ph":"X","pid":{},"tid":{},"ts":{},"dur":{}}})", args, quoted(s.name),
            pid, it - tracks.begin() + 1, ts(start), ts(dur));
    }
  }

  void end() {
    buf_.append(std::string_view("\n]}\n"));
    flush();
  }

 private:
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
  const RunResult& r_;
  std::ostream& out_;
  double ns_per_cycle_;
  int program_tid_ = 0;
  fmt::memory_buffer buf_;
  bool first_ = true;
};

}  // namespace

void print_trace_progress(size_t done, size_t total) {
  fmt::print(stderr, "trace: {} of {} events written\n", done, total);
}

void write_chrome_trace(const RunResult& r, std::ostream& out, const TraceProgress& progress,
                        const nlohmann::json& metadata, const std::vector<TraceSpan>& spans,
                        const std::string& spans_process) {
  Writer w(r, out);
  w.begin(metadata);
  w.processes_and_threads();
  w.timeline_events(progress);
  w.program();
  w.counters();
  w.spans(spans, spans_process);
  w.end();
}

}  // namespace tpusim
