// Small helpers shared by the wire tests: running a command, temp files,
// the list of shipped captures.
#pragma once

#include <string>
#include <vector>

namespace isoroce::test {

struct CommandResult {
  int status = -1;  // exit status, or -1 if it could not run
  std::string out;  // standard output
};

CommandResult run_command(const std::string& cmd);
bool have_program(const std::string& name);
std::string temp_path(const std::string& name);  // unique per test process, gone at exit unless a test failed
std::vector<std::string> capture_files();        // the .pcap files of the shipped captures

}  // namespace isoroce::test
