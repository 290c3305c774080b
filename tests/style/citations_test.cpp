// Citations resolve inside the repository: every source key a chip file or scenario cites
// (CLOUD-v5e, SB, JAX-tpuinfo, ...) and every fact sheet the docs and data name
// (measured_runs.md, ...) is described in docs/sources.md, and every measurement group and blind
// configuration label (C1..C5, B1..B5) is explained in docs/glossary.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const fs::path kRoot = TPUSIM_SOURCE_DIR;

// Every match of `pattern` in the YAML and Markdown files under `dirs`.
std::set<std::string> cited(const std::vector<std::string>& dirs, const std::regex& pattern) {
  std::set<std::string> out;
  for (const std::string& d : dirs)
    for (const auto& e : fs::recursive_directory_iterator(kRoot / d)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".yaml" && ext != ".md") continue;
      const std::string text = slurp(e.path());
      for (std::sregex_iterator m(text.begin(), text.end(), pattern), end; m != end; ++m)
        out.insert((*m)[1].str());
    }
  return out;
}

TEST(Citations, EverySourceKeyAndFactSheetIsInSourcesMd) {
  const std::string sources = slurp(kRoot / "docs/sources.md");
  // Source keys: the labels of tpu_hardware.md's source list as the chip files and scenarios
  // write them.
  const std::regex key(
      R"(\b(SB|CLOUD-v[0-9a-z]+|JAX-[a-z]+|PALLAS-[a-z]+|XLA-[a-z]+|MT-[a-z]+|3P-[a-z]+)\b)");
  const auto keys = cited({"models/chips", "scenarios"}, key);
  EXPECT_GE(keys.size(), 8u);  // the pattern still finds what the files cite
  for (const std::string& k : keys)
    EXPECT_NE(sources.find("| " + k + " |"), std::string::npos)
        << k << " is not in docs/sources.md";
  const std::regex sheet(R"(\b([a-z_]+)\.md\b)");
  for (const std::string& s : cited({"models", "scenarios", "docs"}, sheet)) {
    if (fs::exists(kRoot / "docs" / (s + ".md")) ||
        fs::exists(kRoot / "docs/kernels" / (s + ".md")))
      continue;  // one of ours
    EXPECT_NE(sources.find(s + ".md"), std::string::npos)
        << s << ".md is cited but not described in docs/sources.md";
  }
}

TEST(Citations, MeasurementGroupsAndBlindLabelsAreInTheGlossary) {
  const std::string glossary = slurp(kRoot / "docs/glossary.md");
  for (const char* label : {"**C1**", "**C2**", "**C3**", "**C4**", "**C5**", "**B1 ... B5**",
                            "**blind**", "**remat**", "**FSDP**"})
    EXPECT_NE(glossary.find(label), std::string::npos) << label;
  // Every builds' name the CLI accepts.
  for (const char* build : {"**main**", "**scan**", "**heads**", "**ladder**", "**doubling**"})
    EXPECT_NE(glossary.find(build), std::string::npos) << build;
}

}  // namespace
