// Writing fitted values back into a chip file: the key's block is replaced in place (comments and
// other keys untouched) and the value reads back as the same double.
#include "app/calibrated_value.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "sim/error.h"

namespace tpusim {
namespace {

TEST(CalibratedValue, ReplacesTheBlockInPlaceAndReadsBackExactly) {
  const auto path = std::filesystem::temp_directory_path() / "tpusim_calibrated_value.yaml";
  std::ofstream(path) << "# header\na:\n  value: 1\n  source: \"x\"\n# between\nb:\n  value: 2\n"
                         "  assumed: y\n";
  const double fitted = 0.3477;  // the nearest double to the decimal
  const std::string text =
      chip_file_with(path.string(), {{"b", fitted, false, "fitted on \"t\": here"}});
  EXPECT_EQ(text,
            "# header\na:\n  value: 1\n  source: \"x\"\n# between\nb:\n  value: 0.3477\n"
            "  calibrated: \"fitted on \\\"t\\\": here\"\n");
  EXPECT_EQ(YAML::Load(text)["b"]["value"].as<double>(), fitted);
  EXPECT_EQ(YAML::Load(text)["b"]["calibrated"].as<std::string>(), "fitted on \"t\": here");
  EXPECT_EQ(chip_file_with(path.string(), {{"a", 385, true, "n"}})
                .rfind("# header\na:\n  value: 385\n  calibrated: \"n\"\n# between\n", 0),
            0u);
  try {
    chip_file_with(path.string(), {{"c", 1, true, "n"}});
    FAIL() << "a key without a block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'c' block of a value and a provenance"),
              std::string::npos);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tpusim
