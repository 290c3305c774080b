// The tpusim subcommands. Each function adds its subcommand (options and help) to the app and
// returns what runs when it is the one parsed; main.cpp holds the table of them.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace tpusim::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<void()> run;
};

// A command stopped by the user (Ctrl-C) after saving what it had: main prints the message and
// exits 130, as a shell does for SIGINT.
struct Interrupted {
  std::string message;
};

// kernel_commands.cpp: `kernel NAME` for every catalog kernel, and `gdn-builds`.
std::vector<Command> kernel_commands(CLI::App& app);
Command gdn_builds_command(CLI::App& app);

// step_commands.cpp: training steps from scenario files.
Command run_command(CLI::App& app);
Command validate_command(CLI::App& app);
Command sweep_command(CLI::App& app);

// profile_commands.cpp: measured profiles in, predicted against measured per op.
Command import_command(CLI::App& app);
Command compare_command(CLI::App& app);
Command export_command(CLI::App& app);  // `export maxtext SCENARIO`

// tool_commands.cpp: chips, calibration, speed.
Command chip_command(CLI::App& app);
Command calibrate_command(CLI::App& app);
Command bench_command(CLI::App& app);

}  // namespace tpusim::cli
