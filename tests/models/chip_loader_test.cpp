// Chip YAML loading: every shipped chip loads with provenance for every value; bad files give one
// line naming file:line:column and the key.
#include "models/chip_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/error.h"

namespace tpusim {
namespace {

namespace fs = std::filesystem;

TEST(ChipLoader, ShippedChipsLoadWithProvenanceForEveryValue) {
  EXPECT_EQ(known_chips(), (std::vector<std::string>{"v5e", "v5p", "v6e"}));
  for (const std::string& name : known_chips()) {
    const ChipSpec c = load_chip(name);
    EXPECT_EQ(c.name, name);
    EXPECT_EQ(c.provenance.size(), 40u) << name;  // every chip parameter
    for (const auto& [key, p] : c.provenance) EXPECT_FALSE(p.empty()) << key;
  }
  EXPECT_EQ(load_chip("v5p").tensorcores, 2);
  EXPECT_EQ(load_chip("v6e").scoped_vmem_bytes, 32 << 20);
}

std::string error_of(const std::string& yaml) {
  // One file per test: ctest runs the test cases in parallel processes.
  const fs::path dir =
      fs::temp_directory_path() /
      ("tpusim_chip_test_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  const fs::path f = dir / "bad.yaml";
  std::ofstream(f) << yaml;
  try {
    load_chip(f.string());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string v5e_text() {
  std::ifstream in(fs::path(models_dir()) / "chips" / "v5e.yaml");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ChipLoader, UnknownKeyNamesFileLineColumnAndKey) {
  const std::string e = error_of("name: x\nclock_hz:\n  value: 1\n  source: s\nclok: 3\n");
  EXPECT_NE(e.find("bad.yaml:5:1: key 'clok': unknown chip parameter"), std::string::npos) << e;
}

TEST(ChipLoader, MissingProvenanceAndWrongTypeAreErrors) {
  EXPECT_NE(error_of("name: x\nclock_hz:\n  value: 1\n")
                .find("bad.yaml:3:3: key 'clock_hz': missing provenance"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\nsynchronous_weight_gather:\n  value: tree\n  source: s\n")
                .find("bad.yaml:3:10: key 'synchronous_weight_gather.value': 'tree' is not a "
                      "gather form: routed or ring"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\nclock_hz:\n  value: fast\n  source: s\n")
                .find("bad.yaml:3:10: key 'clock_hz.value': expected a number, got 'fast'"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\nclock_hz:\n  value: 1\n  source: s\n  assumed: t\n")
                .find("exactly one provenance"),
            std::string::npos);
}

TEST(ChipLoader, MissingParameterIsNamed) {
  std::string text = v5e_text();
  const size_t at = text.find("mxu_dim:");
  text.erase(at, text.find("peak_bf16_flops:") - at);
  EXPECT_NE(error_of(text).find("missing chip parameter 'mxu_dim'"), std::string::npos);
}

TEST(ChipLoader, ValuesOutOfRangeNameTheirKeyAndBounds) {
  EXPECT_NE(
      error_of("name: x\nclock_hz:\n  value: 0\n  source: s\n")
          .find("bad.yaml:3:10: key 'clock_hz.value': 0 is out of range: must be more than 0"),
      std::string::npos);
  EXPECT_NE(error_of("name: x\nici_efficiency:\n  value: 1.5\n  assumed: s\n")
                .find("key 'ici_efficiency.value': 1.5 is out of range: must be more than 0 and "
                      "at most 1"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\nmxu_dim:\n  value: 4\n  source: s\n")
                .find("key 'mxu_dim.value': 4 is out of range: must be at least 8"),
            std::string::npos);
  std::string text = v5e_text();
  const std::string vmem = "value: 134217728";
  text.replace(text.find(vmem), vmem.size(), "value: 1048576");
  EXPECT_NE(error_of(text).find("scoped_vmem_bytes 16777216 is more than vmem_bytes 1048576"),
            std::string::npos)
      << error_of(text);
}

TEST(ChipLoader, UnknownChipListsKnownOnes) {
  try {
    load_chip("v9x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown chip 'v9x' (known chips: v5e, v5p, v6e; or a path to a .yaml file)");
  }
}

}  // namespace
}  // namespace tpusim
