#include "app/report.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "app/version.h"
#include "sim/error.h"
#include "sim/ir/validate.h"

namespace tpusim {
namespace {

std::string origin_name(Origin o) { return o == Origin::pallas ? "pallas" : "xla"; }

// What the lane names of the unit-busy line stand for, for the units this run has.
std::string unit_legend(const RunResult& r) {
  int mxus = 0, dmas = 0;
  for (const UnitInfo& u : r.units) {
    if (u.core == 0 && u.kind == UnitKind::mxu) ++mxus;
    if (u.core == 0 && u.kind == UnitKind::dma) ++dmas;
  }
  return fmt::format(
      "  (tcN: TensorCore N, with mxu0-{} its matrix units, vpu its vector unit, eup its "
      "transcendental unit, dma0-{} its DMA queues; hbm: the HBM pipe)\n",
      mxus - 1, dmas - 1);
}

// What is written to it goes to `out` compressed as gzip (zlib's deflate with a gzip header).
class GzipBuffer : public std::streambuf {
 public:
  explicit GzipBuffer(std::ostream& out) : out_(out) {
    ok_ = deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) ==
          Z_OK;
    setp(in_, in_ + sizeof in_);
  }
  GzipBuffer(const GzipBuffer&) = delete;
  GzipBuffer& operator=(const GzipBuffer&) = delete;
  ~GzipBuffer() override { deflateEnd(&z_); }
  // Compresses what is left and ends the stream; false if anything failed.
  bool finish() { return deflate_pending(Z_FINISH) && ok_; }

 protected:
  int overflow(int c) override {
    if (!deflate_pending(Z_NO_FLUSH)) return traits_type::eof();
    if (c != traits_type::eof()) {
      *pptr() = static_cast<char>(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

 private:
  bool deflate_pending(int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(pbase());
    z_.avail_in = static_cast<uInt>(pptr() - pbase());
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(out_buffer_);
      z_.avail_out = sizeof out_buffer_;
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) ok_ = false;
      out_.write(out_buffer_, static_cast<std::streamsize>(sizeof out_buffer_ - z_.avail_out));
    } while (ok_ && (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END)));
    setp(in_, in_ + sizeof in_);
    return ok_ && static_cast<bool>(out_);
  }
  std::ostream& out_;
  z_stream z_{};
  bool ok_ = false;
  char in_[1 << 16];
  char out_buffer_[1 << 16];
};

}  // namespace

std::string format_duration(double s) {
  return s < 1e-3 ? fmt::format("{:.2f} us", s * 1e6) : fmt::format("{:.3f} ms", s * 1e3);
}

std::string format_si(double v, const char* unit) {
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, prefix] : kPrefixes)
    if (std::abs(v) >= scale) return fmt::format("{:.2f} {}{}", v / scale, prefix, unit);
  return fmt::format("{:.0f} {}", v, unit);
}

std::vector<std::pair<std::string, int64_t>> stage_cycles(const RunResult& r) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const ItemResult& item : r.items) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == item.stage; });
    if (it == out.end())
      out.emplace_back(item.stage, item.cycles);
    else
      it->second += item.cycles;
  }
  return out;
}

std::vector<StageDifference> side_by_side(const std::vector<std::pair<std::string, double>>& first,
                                          double first_total,
                                          const std::vector<std::pair<std::string, double>>& second,
                                          double second_total, const std::string& total_name) {
  std::vector<StageDifference> rows;
  auto add = [&](const std::vector<std::pair<std::string, double>>& side, double total,
                 double StageDifference::*t, double StageDifference::*share) {
    for (const auto& named : side) {
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const StageDifference& d) { return d.stage == named.first; });
      if (it == rows.end()) it = rows.insert(rows.end(), StageDifference{named.first});
      (*it).*t = named.second;
      (*it).*share = total > 0 ? named.second / total : 0;
    }
  };
  add(first, first_total, &StageDifference::first_s, &StageDifference::first_share);
  add(second, second_total, &StageDifference::second_s, &StageDifference::second_share);
  rows.push_back({total_name, first_total, second_total, 1, 1});
  for (StageDifference& d : rows) d.delta_s = d.second_s - d.first_s;
  return rows;
}

std::vector<StageDifference> stage_difference(const RunResult& first, const RunResult& second) {
  auto seconds = [](const RunResult& r) {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& [stage, cycles] : stage_cycles(r))
      out.emplace_back(stage, cycles / r.clock_hz);
    return out;
  };
  return side_by_side(seconds(first), first.time_s, seconds(second), second.time_s, "total");
}

std::string summary_text(const RunResult& r, const ChipSpec& chip) {
  std::string out;
  const double tflops = r.time_s > 0 ? r.flops / r.time_s / 1e12 : 0;
  // Host dispatch (launching the program) is not device work: shown apart when there is any.
  const double dispatch_s =
      r.cycles > 0 ? r.time_s * r.time[static_cast<int>(Cause::dispatch)] / r.cycles : 0;
  const std::string split = dispatch_s > 0
                                ? fmt::format(" = device {:.4f} ms + host dispatch {:.4f} ms",
                                              (r.time_s - dispatch_s) * 1e3, dispatch_s * 1e3)
                                : "";
  out += fmt::format("chip {}  time {:.4f} ms{}  ({} cycles at {:.3g} GHz)\n", r.chip,
                     r.time_s * 1e3, split, r.cycles, chip.clock_hz / 1e9);
  out += fmt::format("work {}  ->  {:.1f} TFLOP/s, {:.1f}% of the {:.0f} TFLOP/s bf16 peak\n",
                     format_si(static_cast<double>(r.flops), "FLOP"), tflops,
                     100 * tflops * 1e12 / chip.peak_bf16_flops, chip.peak_bf16_flops / 1e12);
  // Bytes in decimal units here, as the bandwidths they are compared with.
  out += fmt::format(
      "HBM {} read, {} written  ->  {:.1f} GB/s ({:.1f}% of {:.0f} GB/s)\n",
      format_si(static_cast<double>(r.hbm_read_bytes), "B"),
      format_si(static_cast<double>(r.hbm_write_bytes), "B"), r.hbm_bytes() / r.time_s / 1e9,
      100 * r.hbm_bytes() / r.time_s / chip.hbm_bytes_per_s, chip.hbm_bytes_per_s / 1e9);
  out += "TensorCore 0 time:";
  for (int c = 0; c < kNumCauses; ++c)
    if (r.time[c] > 0)
      out += fmt::format("  {} {:.1f}%", name(static_cast<Cause>(c)), 100.0 * r.time[c] / r.cycles);
  out += "\nunit busy:";
  for (size_t u = 0; u < r.units.size(); ++u)
    if (r.unit_busy[u] > 0)
      out += fmt::format("  {} {:.1f}%", r.units[u].name, 100.0 * r.unit_busy[u] / r.cycles);
  out += "\n" + unit_legend(r);
  const auto stages = stage_cycles(r);
  if (stages.size() > 1) {
    out += "by stage:";
    for (const auto& [stage, cycles] : stages)
      out += fmt::format("  {} {:.3f} ms", stage, chip.cycles_to_s(cycles) * 1e3);
    out += "\n";
  }
  for (const KernelStats& k : r.kernels)
    out +=
        fmt::format("kernel {} [{}] grid {}, {} call{}: VMEM {} of {} ({:.1f}%)\n", k.name,
                    origin_name(k.origin), fmt::join(k.grid, "x"), k.calls, k.calls == 1 ? "" : "s",
                    format_bytes(k.vmem.total_bytes), format_bytes(k.vmem_limit_bytes),
                    100.0 * k.vmem.total_bytes / k.vmem_limit_bytes);
  return out;
}

nlohmann::json result_json(const RunResult& r, const ChipSpec& chip, const nlohmann::json& config) {
  using nlohmann::json;
  json j;
  j["tool"] = tool_json();
  j["config"] = config;
  j["chip"] = r.chip;
  j["time_s"] = r.time_s;
  j["cycles"] = r.cycles;
  j["clock_hz"] = r.clock_hz;
  j["flops"] = r.flops;
  j["mxu_pass_flops"] = r.mxu_pass_flops;
  j["tflops_per_s"] = r.time_s > 0 ? r.flops / r.time_s / 1e12 : 0.0;
  j["mxu_utilization"] = r.time_s > 0 ? r.flops / r.time_s / chip.peak_bf16_flops : 0.0;
  j["hbm_bytes"] = r.hbm_bytes();
  j["hbm_read_bytes"] = r.hbm_read_bytes;
  j["hbm_write_bytes"] = r.hbm_write_bytes;
  j["vmem_peak_bytes"] = r.vmem_peak_bytes;
  json busy = json::object();
  for (size_t u = 0; u < r.units.size(); ++u)
    busy[r.units[u].name] = chip.cycles_to_s(r.unit_busy[u]);
  j["busy_s"] = busy;
  json stall = json::object();
  for (int c = 0; c < kNumCauses; ++c)
    if (static_cast<Cause>(c) != Cause::busy)
      stall[std::string(name(static_cast<Cause>(c)))] = chip.cycles_to_s(r.time[c]);
  j["stall_s"] = stall;
  j["core_busy_s"] = chip.cycles_to_s(r.time[static_cast<int>(Cause::busy)]);
  json kernels = json::array();
  for (const KernelStats& k : r.kernels) {
    json kj;
    kj["name"] = k.name;
    kj["origin"] = origin_name(k.origin);
    kj["grid"] = k.grid;
    kj["calls"] = k.calls;
    kj["time_s"] = chip.cycles_to_s(k.cycles);
    kj["flops"] = k.flops;
    kj["mxu_pass_flops"] = k.mxu_pass_flops;
    kj["hbm_read_bytes"] = k.hbm_read_bytes;
    kj["hbm_write_bytes"] = k.hbm_write_bytes;
    kj["vmem_bytes"] = k.vmem.total_bytes;
    kj["vmem_limit_bytes"] = k.vmem_limit_bytes;
    json items = json::array();
    for (const VmemItem& it : k.vmem.items)
      items.push_back({{"what", it.what}, {"bytes", it.bytes}});
    kj["vmem_items"] = items;
    json ks = json::object();
    for (int c = 0; c < kNumCauses; ++c)
      ks[std::string(name(static_cast<Cause>(c)))] = chip.cycles_to_s(k.time[c]);
    kj["core_time_s"] = ks;
    kernels.push_back(kj);
  }
  j["kernels"] = kernels;
  json stages = json::array();
  for (const auto& [stage, cycles] : stage_cycles(r))
    stages.push_back({{"stage", stage}, {"time_s", chip.cycles_to_s(cycles)}});
  j["stages"] = stages;
  return j;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void OutputFiles::stage(const std::string& path, std::string content, std::string how_to_open) {
  files_.push_back({path, std::move(content), std::move(how_to_open), {}});
}

void OutputFiles::stage(const std::string& path, std::function<void(std::ostream&)> write,
                        std::string how_to_open) {
  files_.push_back({path, "", std::move(how_to_open), std::move(write)});
}

namespace {

std::string size_text(size_t bytes) {
  if (bytes < 10 * 1024) return fmt::format("{} bytes", bytes);
  if (bytes < 10 * 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

}  // namespace

namespace {

// The file's bytes into `out`: gzip-compressed when its path ends in .gz. False if that failed.
bool emit(const std::string& path, const std::string& content,
          const std::function<void(std::ostream&)>& write, std::ostream& out) {
  if (!path.ends_with(".gz")) {
    if (write)
      write(out);
    else
      out << content;
    return static_cast<bool>(out.flush());
  }
  auto gz = std::make_unique<GzipBuffer>(out);
  std::ostream z(gz.get());
  if (write)
    write(z);
  else
    z << content;
  return z.flush() && gz->finish() && out.flush();
}

// Where an output's bytes land: through a symlink to what it names (the link stays).
std::filesystem::path landing(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_symlink(path, ec)) return path;
  const fs::path target = fs::read_symlink(path, ec);
  return target.is_absolute() ? target : fs::path(path).parent_path() / target;
}

// A new, uniquely named temporary file beside `target` with the permissions a new file gets.
std::string temporary_beside(const std::filesystem::path& target) {
  std::string name = target.string() + ".XXXXXX";
  const int fd = mkstemp(name.data());
  if (fd < 0)
    throw Error(fmt::format("cannot write '{}': {}", target.string(), std::strerror(errno)));
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  close(fd);
  return name;
}

}  // namespace

bool OutputFiles::uses_stdout() const {
  return std::any_of(files_.begin(), files_.end(), [](const File& f) { return f.path == "-"; });
}

std::ostream& OutputFiles::summary_stream() const { return uses_stdout() ? std::cerr : std::cout; }

void OutputFiles::commit() {
  namespace fs = std::filesystem;
  // Refuse what would fail halfway: two outputs with one path, a path that is a directory.
  std::set<std::string> seen;
  for (const File& file : files_) {
    std::error_code ec;
    const std::string key =
        file.path == "-" ? "-" : fs::weakly_canonical(landing(file.path), ec).string();
    if (!seen.insert(key).second)
      throw Error(file.path == "-" ? std::string("two outputs are given as '-' (stdout)")
                                   : fmt::format("'{}' is named for two outputs", file.path));
    if (fs::is_directory(file.path, ec))
      throw Error(fmt::format("cannot write '{}': it is a directory", file.path));
  }
  // A regular file (or a new one) is written to a temporary file renamed onto it once every output
  // is written; a FIFO or a device is written in place; '-' is stdout, written last.
  std::vector<std::pair<std::string, fs::path>> renames;  // temporary -> target
  auto discard = [&] {
    std::error_code ec;
    for (const auto& [tmp, target] : renames) fs::remove(tmp, ec);
  };
  for (const File& file : files_) {
    if (file.path == "-") continue;
    const fs::path target = landing(file.path);
    std::error_code ec;
    const bool in_place = fs::exists(target, ec) && !fs::is_regular_file(target, ec);
    std::string where = target.string();
    if (!in_place) {
      try {
        where = temporary_beside(target);
      } catch (const Error&) {
        discard();
        throw;
      }
      renames.emplace_back(where, target);
    }
    std::ofstream f(where, std::ios::binary);
    const int open_errno = errno;
    if (!f || !emit(file.path, file.content, file.write, f)) {
      discard();
      throw Error(
          fmt::format("cannot write '{}': {}", file.path, std::strerror(f ? EIO : open_errno)));
    }
  }
  for (size_t i = 0; i < renames.size(); ++i) {
    std::error_code ec;
    fs::rename(renames[i].first, renames[i].second, ec);
    if (ec) {
      discard();
      throw Error(fmt::format("cannot write '{}': {}{}", renames[i].second.string(), ec.message(),
                              i > 0 ? " (the files before it were written)" : ""));
    }
  }
  for (const File& file : files_) {
    if (file.path == "-") {
      if (!emit(file.path, file.content, file.write, std::cout))
        throw Error("cannot write to stdout");
      continue;
    }
    std::error_code ec;
    const auto size = fs::file_size(landing(file.path), ec);
    fmt::print(stderr, "wrote {}{}{}\n", file.path, ec ? "" : " (" + size_text(size) + ")",
               file.how_to_open.empty() ? "" : ": " + file.how_to_open);
  }
  files_.clear();
}

std::string live_buffers_text(const Program& p, const Liveness& l) {
  if (l.peak_item < 0) return "";
  const ProgramItem& at = p.items[l.peak_item];
  std::string out = fmt::format(
      "HBM buffers live (tpusim): peak {} at item {} ({}); largest:", format_bytes(l.peak_bytes),
      l.peak_item, at.stage.empty() ? at.name : at.stage);
  for (size_t i = 0; i < l.at_peak.size() && i < 5; ++i)
    out += fmt::format(" {} {}{}", l.at_peak[i].name, format_bytes(l.at_peak[i].bytes),
                       i + 1 < std::min<size_t>(5, l.at_peak.size()) ? "," : "");
  return out + "\n";
}

// One CSV field as RFC 4180 writes it: quoted (quotes doubled) when it holds a comma, a quote or a
// line break (a mapping axis value such as {th: 8, tile_n: 4}, an error message).
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace tpusim
