// Command-line parsing shared by tpusim and tpusim-gui: CLI11 with the project's error convention
// (one line on stderr, exit code 2) instead of CLI11's two lines and its own exit codes.
#pragma once
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>

namespace tpusim {

// Parses argv into `app`; `program` names it in errors. Returns the exit code when the program
// should stop now (0 after --help or --version, 2 after a usage error), nothing when it should go
// on.
inline std::optional<int> parse_command_line(CLI::App& app, const char* program, int argc,
                                             char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: error: {} (see --help)\n", program, e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace tpusim
