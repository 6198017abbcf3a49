// isoroce-lab: run a sweep of isoroce-sim scenarios x policies x parameters x seeds
// in parallel (oneTBB) and write one table of means and 95% confidence intervals.
//
//   isoroce-lab SWEEP.toml [--threads N] [--csv FILE] [--json FILE] [--check] [--quiet]
//
// Exit status: 0 done; 1 bad arguments; 2 the sweep file (or a scenario it builds) is
// wrong; 3 some run failed (a flow's integrity check or errors). Manual:
// docs/isoroce-lab.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tools/lab/runner.h"
#include "tools/lab/sweep.h"
#include "tools/lab/table.h"

namespace {

bool write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// Progress is for people: only on a terminal, never under CI=true.
bool show_progress(bool quiet) {
  const char* ci = std::getenv("CI");
  return !quiet && isatty(STDERR_FILENO) && !(ci && std::string(ci) == "true");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace isoroce;
  CLI::App app{"isoroce-lab: run a sweep (scenarios x policies x parameters x seeds) of isoroce-sim runs in "
               "parallel; one CSV/JSON table of means and 95% confidence intervals. Manual: docs/isoroce-lab.md"};
  std::string path, csv, json;
  unsigned threads = 0;
  bool check = false, quiet = false;
  app.add_option("sweep", path, "sweep file (TOML)")->required();
  app.add_option("--threads", threads, "worker threads (0: all cores); the results do not depend on it");
  app.add_option("--csv", csv, "write the table as CSV to FILE (- : stdout; the default when no output is named)");
  app.add_option("--json", json, "write the table as JSON to FILE (- : stdout)");
  app.add_flag("--check", check, "check the sweep file and every scenario it builds, then exit");
  app.add_flag("--quiet", quiet, "no progress on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  const lab::SweepParse parsed = lab::load_sweep(path);
  if (!parsed.ok()) {
    fmt::print(stderr, "isoroce-lab: {}\n", parsed.error->to_string());
    return 2;
  }
  const lab::Sweep& sweep = parsed.sweep;
  lab::Plan plan;
  if (auto err = lab::plan_sweep(sweep, &plan)) {
    fmt::print(stderr, "isoroce-lab: {}\n", err->to_string());
    return 2;
  }
  if (check) {
    fmt::print("{}: ok ({} runs in {} cells)\n", path, plan.runs.size(), plan.cells.size());
    return 0;
  }
  lab::RunOptions opts;
  opts.threads = threads;
  int status = 0;
  const bool progress = show_progress(quiet);
  opts.on_done = [&](const lab::Run& run, const lab::RunResult& r, std::size_t done) {
    if (!r.integrity_ok) {
      fmt::print(stderr, "{}isoroce-lab: {}: {}\n", progress ? "\n" : "", lab::describe(sweep, run), r.failure);
      status = 3;
    }
    if (progress)
      fmt::print(stderr, "\r\033[K[{}/{}] {} ({:.1f} s)", done, plan.runs.size(), lab::describe(sweep, run), r.wall_s);
  };
  const auto results = lab::run_sweep(sweep, plan, opts);
  if (progress) fmt::print(stderr, "\n");
  const lab::Table table = lab::tabulate(sweep, plan, results);
  if (csv.empty() && json.empty()) csv = "-";
  bool ok = true;
  if (!csv.empty()) ok &= write_file(csv, lab::to_csv(sweep, plan, table));
  if (!json.empty()) ok &= write_file(json, lab::to_json(sweep, plan, table).dump(2) + "\n");
  if (!ok) {
    fmt::print(stderr, "isoroce-lab: cannot write the results\n");
    return 1;
  }
  return status;
}
