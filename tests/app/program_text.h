// Writes a program's JSON text to a file named after the running test, and edits such texts.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tpusim::testing {

inline std::string write_program(const std::string& text) {
  const std::filesystem::path f =
      std::filesystem::temp_directory_path() /
      ("tpusim_program_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".json");
  std::ofstream(f) << text;
  return f.string();
}

inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

}  // namespace tpusim::testing
