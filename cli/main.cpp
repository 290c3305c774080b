// build/tpusim: the command-line front end, a table of subcommands (cli/commands.h; `tpusim
// --help` lists them). Errors print one line and exit 2 (docs/cli.md).
#include <cstdio>
#include <iostream>

#include "app/command_line.h"
#include "app/sim_flags.h"
#include "app/version.h"
#include "cli/commands.h"
#include "sim/error.h"

int main(int argc, char** argv) {
  using namespace tpusim::cli;
  CLI::App app{"tpusim: a TPU simulator and cost model for Pallas kernel schedules"};
  app.set_version_flag("--version", tpusim::version_text(), "print the version and git revision");
  app.require_subcommand(1);
  tpusim::SimFlags sim_flags;
  tpusim::add_sim_flags(app, sim_flags,
                        "simulate every grid step (by default repeating steady-state periods are "
                        "jumped over, docs/performance.md)");
  std::vector<Command> commands = kernel_commands(app);
  for (Command c : {gdn_builds_command(app), run_command(app), validate_command(app),
                    sweep_command(app), chip_command(app), calibrate_command(app),
                    bench_command(app), import_command(app), compare_command(app),
                    export_command(app)})
    commands.push_back(std::move(c));
  if (const auto stop = tpusim::parse_command_line(app, "tpusim", argc, argv)) return *stop;
  tpusim::apply_sim_flags(sim_flags);
  tpusim::SimOptions::set_default_progress(tpusim::stderr_sim_progress());
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) c.run();
    // Output to stdout that did not arrive (a full disk, a closed pipe) is an error too.
    if (!std::cout.flush() || std::fflush(stdout) != 0 || std::ferror(stdout))
      throw tpusim::Error("cannot write to stdout");
  } catch (const Interrupted& i) {
    std::cerr << "tpusim: " << i.message << "\n";
    return 130;
  } catch (const tpusim::Error& e) {
    std::cerr << "tpusim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Anything else is a bug, but still one line and no partial output (OutputFiles commits last).
    std::cerr << "tpusim: error: internal error: " << tpusim::shortened(e.what()) << "\n";
    return 2;
  }
  return 0;
}
