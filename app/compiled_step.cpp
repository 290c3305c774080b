#include "app/compiled_step.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string_view>

#include "app/hlo_import.h"
#include "app/report.h"
#include "sim/error.h"
#include "sim/text_file.h"
#include "sim/timing/engine.h"

namespace tpusim {

CompiledStep load_compiled_step(const std::string& file) {
  const nlohmann::json j = nlohmann::json::parse(read_text_file(file), nullptr, false);
  if (j.is_discarded())
    throw Error(fmt::format("{}: not JSON (a compile-step result was expected)", file));
  if (!j.is_object() || j.value("format", "") != "tpusim-compiled-step")
    throw Error(fmt::format("{}: not a compile-step result (format tpusim-compiled-step)", file));
  CompiledStep c;
  c.file = file;
  try {
    c.topology = j.at("topology").get<std::string>();
    c.device_kind = j.value("device_kind", "");
    c.maxtext_args = j.at("maxtext_args").get<std::vector<std::string>>();
    c.fits = j.at("fits").get<bool>();
    c.libtpu_init_args = j.value("libtpu_init_args", "");
    if (j.contains("hlo"))
      c.hlo = (std::filesystem::path(file).parent_path() / j.at("hlo").get<std::string>()).string();
    if (!c.hlo.empty() && !std::filesystem::is_regular_file(c.hlo))
      throw Error(fmt::format("{}: its optimized HLO {} is missing", file, c.hlo));
    if (c.fits) {
      const nlohmann::json& m = j.at("memory");
      c.peak_hbm_bytes = m.at("total_bytes").get<int64_t>();
      c.host_bytes = m.value("host_temp_bytes", int64_t{0});
      if (j.contains("buffers")) {
        const nlohmann::json& b = j.at("buffers");
        for (const nlohmann::json& slot : b.at("largest"))
          c.largest_buffers.push_back(
              {slot.at("bytes").get<int64_t>(), slot.at("values").get<std::string>()});
        if (b.contains("peak_live")) {
          c.peak_live_bytes = b.at("peak_live_bytes").get<int64_t>();
          c.peak_live_parameter_bytes = b.at("peak_live_parameter_bytes").get<int64_t>();
          c.peak_live_at = b.at("peak_live_at").get<std::string>();
          for (const nlohmann::json& v : b.at("peak_live"))
            c.peak_live.push_back({v.at("bytes").get<int64_t>(), v.at("shape").get<std::string>(),
                                   v.at("opcode").get<std::string>(),
                                   v.at("op").get<std::string>()});
        }
      }
    } else {
      c.message = j.at("message").get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: {}", file, e.what()));
  }
  return c;
}

std::string compiled_verdict(const CompiledStep& c) {
  if (c.fits) return format_bytes(c.peak_hbm_bytes);
  // libtpu: "... required for HLO temporaries (48.96G) exceeds available HBM (31.25G)".
  static const std::regex amounts(
      R"(\(([0-9.]+[KMGT]?)\) exceeds available HBM \(([0-9.]+[KMGT]?)\))");
  std::smatch m;
  if (std::regex_search(c.message, m, amounts))
    return fmt::format("does not fit ({} needed, {} available)", m[1].str(), m[2].str());
  // The pinned host memory remat offloads into: "Allocation (size=N) would exceed memory
  // (size=M) :: ... operand.host ...".
  static const std::regex host(
      R"(Allocation \(size=(\d+)\) would exceed memory \(size=(\d+)\).*\.host)");
  if (std::regex_search(c.message, m, host))
    return fmt::format("does not fit in host memory ({} offloaded, {} available)",
                       format_bytes(std::stoll(m[1].str())), format_bytes(std::stoll(m[2].str())));
  // Everything offloaded at once over it: "Ran out of memory in memory space host. Used 140.00G
  // of 128.00G host."
  static const std::regex host_total(
      R"(memory space host\. Used ([0-9.]+[KMGT]?) of ([0-9.]+[KMGT]?) host)");
  if (std::regex_search(c.message, m, host_total))
    return fmt::format("does not fit in host memory ({} offloaded, {} available)", m[1].str(),
                       m[2].str());
  return fmt::format("does not fit ({})", c.message);
}

double simulate_compiled_program(const CompiledStep& c, const ChipSpec& chip) {
  if (c.hlo.empty()) throw Error(fmt::format("{}: holds no optimized HLO", c.file));
  // The record, not its HLO alone: it also names the Pallas kernels exported beside it.
  return simulate(chip, import_hlo(c.file).program).time_s;
}

void apply_compiled(const CompiledStep& c, bool use_for_memory, StepPrediction& p) {
  p.compiled_peak_hbm_bytes = c.peak_hbm_bytes;
  // The verdict is libtpu's: it accepts a program whose total reads somewhat above the chip's
  // HBM (C3 #42, which ran, compiles to 16.37 GiB on v5e's 16 GiB), so no capacity rule of ours
  // is added to it.
  p.compiled_fits = c.fits;
  p.compiled_verdict = compiled_verdict(c);
  for (const CompiledStep::Buffer& b : c.largest_buffers)
    p.compiled_largest_buffers.push_back(fmt::format("{} {}", format_bytes(b.bytes), b.values));
  p.compiled_peak_live_bytes = c.peak_live_bytes;
  p.compiled_peak_live_parameter_bytes = c.peak_live_parameter_bytes;
  p.compiled_peak_live_at = c.peak_live_at;
  for (const CompiledStep::LiveValue& v : c.peak_live) {
    // The op_name without the jit(step)/ every value of the step shares.
    constexpr std::string_view kStep = "jit(step)/";
    const std::string op = v.op.rfind(kStep, 0) == 0 ? v.op.substr(kStep.size()) : v.op;
    const std::string what = fmt::format("{} {} {}", format_bytes(v.bytes), v.shape, v.opcode);
    p.compiled_peak_live.push_back(op.empty() ? what : fmt::format("{} ({})", what, op));
  }
  if (!use_for_memory) return;
  p.memory_source = "compiler";
  p.model_peak_hbm_bytes = p.peak_hbm_bytes;
  p.fits_hbm = p.compiled_fits;  // the compiler's verdict covers its pinned host memory too
  p.fits_host = true;
  if (c.fits) p.peak_hbm_bytes = c.peak_hbm_bytes;
}

}  // namespace tpusim
