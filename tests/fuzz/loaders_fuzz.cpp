// libFuzzer target for the input loaders: the first byte picks the scenario, chip, model or
// sweep loader and the rest is the file it reads. Every input must load or fail with
// tpusim::Error (one line for the user); any other exception, a crash, a hang or a sanitizer
// report is a bug. Built and run by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <typeinfo>

#include "app/scenario.h"
#include "app/sweep.h"
#include "models/chip_loader.h"
#include "models/workload/model_config.h"
#include "sim/error.h"

namespace {

// One file per fuzzing process, in the current folder (scripts/fuzz.sh runs in build-fuzz/).
const std::string& input_path() {
  static const std::string path = "fuzz_input_" + std::to_string(getpid()) + ".yaml";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  {
    std::ofstream out(input_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  try {
    switch (data[0] % 4) {
      case 0:
        tpusim::load_scenario(input_path());
        break;
      case 1:
        tpusim::load_chip(input_path());
        break;
      case 2:
        tpusim::load_model(input_path());
        break;
      default:
        tpusim::load_sweep(input_path());
        break;
    }
  } catch (const tpusim::Error&) {
    // The expected outcome of a malformed input.
  } catch (const std::exception& e) {
    // A bug: name it before the crash report (which would say only "deadly signal").
    std::fprintf(stderr, "uncaught %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
