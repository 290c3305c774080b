// The examples in docs/ are what the tool prints: every fenced block of a Markdown file under
// docs/ that starts with `$ build/tpusim ARGS` is run from the repository's root, and the block's
// other lines must be the command's output (stdout and stderr together), line by line. A line
// `...` (indented or not) stands for any number of lines; a line ending in `...` for any line
// that starts with what comes before it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Example {
  std::string file, command;
  int line = 0;
  std::vector<std::string> expected;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<Example> examples() {
  std::vector<Example> out;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(TPUSIM_SOURCE_DIR) / "docs")) {
    if (e.path().extension() != ".md") continue;
    std::ifstream in(e.path());
    const std::vector<std::string> lines =
        lines_of(std::string(std::istreambuf_iterator<char>(in), {}));
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      // A block may be indented (inside a list item): its lines lose the fence's indentation.
      const size_t indent = lines[i].find_first_not_of(' ');
      auto unindented = [&](const std::string& l) {
        return l.substr(std::min(indent, l.find_first_not_of(' ') == std::string::npos
                                             ? l.size()
                                             : l.find_first_not_of(' ')));
      };
      if (indent == std::string::npos || lines[i].compare(indent, 3, "```") != 0 ||
          unindented(lines[i + 1]).rfind("$ build/tpusim ", 0) != 0)
        continue;
      Example ex{fs::relative(e.path(), TPUSIM_SOURCE_DIR).string(),
                 unindented(lines[i + 1]).substr(2), static_cast<int>(i + 2)};
      // The command, without a trailing comment.
      if (const size_t hash = ex.command.find("  #"); hash != std::string::npos)
        ex.command.erase(ex.command.find_last_not_of(' ', hash) + 1);
      for (i += 2; i < lines.size() && unindented(lines[i]).rfind("```", 0) != 0; ++i)
        ex.expected.push_back(unindented(lines[i]));
      out.push_back(ex);
    }
  }
  return out;
}

std::string run(const std::string& command) {
  const fs::path out = fs::temp_directory_path() / "tpusim_doc_example.out";
  const std::string cmd = fmt::format("cd {} && SYSTEMC_DISABLE_COPYRIGHT_MESSAGE=1 {} >{} 2>&1",
                                      TPUSIM_SOURCE_DIR, command, out.string());
  [[maybe_unused]] const int status = std::system(cmd.c_str());  // examples may show errors
  std::ifstream in(out);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Whether `actual` from line `a` on matches `expected` from line `e` on.
bool matches(const std::vector<std::string>& expected, size_t e,
             const std::vector<std::string>& actual, size_t a) {
  if (e == expected.size()) return a == actual.size();
  if (expected[e].find_first_not_of(' ') != std::string::npos &&
      expected[e].substr(expected[e].find_first_not_of(' ')) == "...") {
    for (size_t skip = a; skip <= actual.size(); ++skip)
      if (matches(expected, e + 1, actual, skip)) return true;
    return false;
  }
  if (a == actual.size()) return false;
  const std::string& x = expected[e];
  const bool prefix = x.size() > 3 && x.compare(x.size() - 3, 3, "...") == 0;
  const bool same = prefix ? actual[a].rfind(x.substr(0, x.size() - 3), 0) == 0 : actual[a] == x;
  return same && matches(expected, e + 1, actual, a + 1);
}

TEST(DocExamples, EveryExampleIsWhatTheToolPrints) {
  const std::vector<Example> all = examples();
  EXPECT_GE(all.size(), 4u);  // cli.md, step_model.md and the others still have their examples
  for (const Example& ex : all) {
    SCOPED_TRACE(fmt::format("{}:{}: $ {}", ex.file, ex.line, ex.command));
    ASSERT_EQ(ex.command.rfind("build/tpusim ", 0), 0u);
    const std::string output = run(std::string(TPUSIM_BIN) + ex.command.substr(12));
    EXPECT_TRUE(matches(ex.expected, 0, lines_of(output), 0))
        << "the tool prints:\n"
        << output << "\nwhich the example does not match (regenerate it)";
  }
}

}  // namespace
